"""Rate limiters for updates and creates (plugins: RATE_LIMITERS)."""

from __future__ import annotations

import threading
import time

from carbon.plugins import RATE_LIMITERS


@RATE_LIMITERS.register("token_bucket")
class TokenBucket:
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


class CreateTokens:
    """What the creator asks a create limiter (any RATE_LIMITERS plugin): take a token
    without waiting, tokens free now, seconds until one is. A plugin without
    ``available``/``seconds_until`` says one token free now, so it is tried again
    soon (the creator sleeps 0.05 s after a pass with no token)."""

    __slots__ = ("limiter",)

    def __init__(self, limiter: TokenBucket) -> None:
        self.limiter = limiter

    def unlimited(self) -> bool:
        return getattr(self.limiter, "unlimited", False)

    def take(self) -> bool:
        return self.limiter.take(blocking=False)

    def free(self) -> float:
        if self.unlimited():
            return float("inf")
        available = getattr(self.limiter, "available", None)
        return available() if available is not None and hasattr(
            self.limiter, "seconds_until") else 1.0

    def seconds_until(self) -> float:
        if self.unlimited():
            return 0.0
        until = getattr(self.limiter, "seconds_until", None)
        return until() if until is not None and hasattr(self.limiter, "available") else 0.0


def make_limiter(name: str, per_second: float, capacity: float | None = None) -> TokenBucket:
    """A limiter allowing ``per_second`` operations a second (burst ``capacity``)."""
    cls = RATE_LIMITERS.get(name)
    return cls(per_second if capacity is None else capacity, per_second)
