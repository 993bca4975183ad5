"""Rate limiters for updates and creates (plugins: RATE_LIMITERS).

The contract is ``RateLimiter``: a plugin class is made as ``cls(capacity, fill_rate)``
and must ``take`` and ``set_rate``; ``unlimited``, ``available`` and ``seconds_until``
have defaults there (limited; one token free now; none to wait for, so the creator
tries again soon). A plugin that does not subclass the protocol is wrapped once by
``make_limiter`` (``PluginLimiter``).
"""

from __future__ import annotations

import threading
import time
from typing import Any, Protocol, cast

from carbon.plugins import RATE_LIMITERS


class RateLimiter(Protocol):
    """What the writer and creator ask of a MAX_UPDATES_PER_SECOND /
    MAX_CREATES_PER_MINUTE limiter."""

    def take(self, cost: float = 1.0, blocking: bool = True) -> bool:
        """A token: True once taken (``blocking``: after waiting), False if none free."""
        ...

    def set_rate(self, capacity: float, fill_rate: float) -> None: ...

    @property
    def unlimited(self) -> bool:
        """True if ``take`` never waits (the writer then skips token bookkeeping)."""
        return False

    def available(self) -> float:
        """Tokens free now, taking none."""
        return 1.0

    def seconds_until(self, cost: float = 1.0) -> float:
        """Seconds until ``cost`` tokens are free, taking none."""
        return 0.0


@RATE_LIMITERS.register("token_bucket")
class TokenBucket(RateLimiter):
    """``capacity`` tokens refilled at ``fill_rate`` a second; infinite rate = no limit.

    ``take(blocking=True)`` sleeps until a token is free; ``take(blocking=False)``
    returns False instead. The rate can change while running (shutdown speed).
    """

    def __init__(self, capacity: float, fill_rate: float) -> None:
        self.lock = threading.Lock()
        self.capacity = float(capacity)
        self.fill_rate = float(fill_rate)
        self.tokens = float(capacity)
        self.stamp = time.monotonic()

    @property
    def unlimited(self) -> bool:
        return self.fill_rate == float("inf") or self.capacity == float("inf")

    def _refill(self) -> None:
        now = time.monotonic()
        if self.tokens < self.capacity:
            self.tokens = min(self.capacity, self.tokens + (now - self.stamp) * self.fill_rate)
        self.stamp = now

    def take(self, cost: float = 1.0, blocking: bool = True) -> bool:
        if self.unlimited:
            return True
        with self.lock:
            self._refill()
            if self.tokens >= cost:
                self.tokens -= cost
                return True
            if not blocking:
                return False
            wait = self._wait(cost)
            self.tokens -= cost
        time.sleep(max(wait, 0.0))
        return True

    def available(self) -> float:
        """Tokens free now (inf without a limit), taking none."""
        if self.unlimited:
            return float("inf")
        with self.lock:
            self._refill()
            return self.tokens

    def seconds_until(self, cost: float = 1.0) -> float:
        """Seconds until ``cost`` tokens are free (0: now), taking none."""
        if self.unlimited:
            return 0.0
        with self.lock:
            self._refill()
            return self._wait(cost) if self.tokens < cost else 0.0

    def _wait(self, cost: float) -> float:
        """Seconds until ``cost`` tokens are free at the fill rate (1 s if it is 0); under
        the lock, after ``_refill``."""
        return (cost - self.tokens) / self.fill_rate if self.fill_rate > 0 else 1.0

    def set_rate(self, capacity: float, fill_rate: float) -> None:
        with self.lock:
            self._refill()
            self.capacity = float(capacity)
            self.fill_rate = float(fill_rate)
            self.tokens = min(self.tokens, self.capacity) if not self.unlimited else self.capacity


@RATE_LIMITERS.register("unlimited")
class Unlimited(TokenBucket):
    """Never waits."""

    def __init__(self, capacity: float = float("inf"), fill_rate: float = float("inf")) -> None:
        super().__init__(float("inf"), float("inf"))

    def set_rate(self, capacity: float, fill_rate: float) -> None:
        return None


class PluginLimiter(RateLimiter):
    """A RATE_LIMITERS plugin written without the protocol (duck-typed): ``take`` and
    ``set_rate`` forwarded, its own ``unlimited``/``available``/``seconds_until`` where
    it has them (looked up once, here), the protocol's defaults elsewhere. As before the
    protocol, ``available``/``seconds_until`` are used only if it has both."""

    def __init__(self, plugin: Any) -> None:  # Any: a third-party object, duck-typed
        self.plugin = plugin
        # A plugin loaded by entry point: what it has is read once here, never per call.
        self._says_unlimited = hasattr(plugin, "unlimited")
        both = hasattr(plugin, "available") and hasattr(plugin, "seconds_until")
        self._available = plugin.available if both else None
        self._seconds_until = plugin.seconds_until if both else None

    def take(self, cost: float = 1.0, blocking: bool = True) -> bool:
        return bool(self.plugin.take(cost, blocking))

    def set_rate(self, capacity: float, fill_rate: float) -> None:
        self.plugin.set_rate(capacity, fill_rate)

    @property
    def unlimited(self) -> bool:
        # read on the plugin each time: set_rate may change it
        return self._says_unlimited and bool(self.plugin.unlimited)

    def available(self) -> float:
        return float(self._available()) if self._available is not None else 1.0

    def seconds_until(self, cost: float = 1.0) -> float:
        return float(self._seconds_until(cost)) if self._seconds_until is not None else 0.0


class CreateTokens:
    """What the creator asks a create limiter: take a token without waiting, tokens free
    now, seconds until one is. A limiter that cannot tell says one token free now, so
    it is tried again soon (the creator sleeps 0.05 s after a pass with no token)."""

    __slots__ = ("limiter",)

    def __init__(self, limiter: RateLimiter) -> None:
        self.limiter = limiter

    def unlimited(self) -> bool:
        return self.limiter.unlimited

    def take(self) -> bool:
        return self.limiter.take(blocking=False)

    def free(self) -> float:
        if self.limiter.unlimited:
            return float("inf")
        return self.limiter.available()

    def seconds_until(self) -> float:
        if self.limiter.unlimited:
            return 0.0
        return self.limiter.seconds_until()


def as_limiter(plugin: object) -> RateLimiter:
    """``plugin`` itself if it subclasses RateLimiter, else wrapped (``PluginLimiter``)."""
    if RateLimiter in type(plugin).__mro__:
        return cast(RateLimiter, plugin)
    return PluginLimiter(plugin)


def make_limiter(name: str, per_second: float, capacity: float | None = None) -> RateLimiter:
    """A limiter allowing ``per_second`` operations a second (burst ``capacity``)."""
    cls = RATE_LIMITERS.get(name)
    return as_limiter(cls(per_second if capacity is None else capacity, per_second))
