"""Load generator: plaintext or pickle points over TCP at a rate shape, counted per second.

Every metric gets one point a *round* (a pass over its connection's names); the point of
round ``r`` has timestamp ``start + r * step``, so no (metric, timestamp) pair is sent
twice and the points that land on disk can be counted exactly. A plaintext chunk is one
``bytes.join`` (``sep.join(names) + sep`` where ``sep`` is `` value timestamp\\n``), so the
generator costs far less CPU than any receiver it feeds.
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
import threading
import time
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Callable

from carbon.formats.pickled import encode_pickle_items

PROTOCOLS = ("plaintext", "pickle")
SHAPES = ("steady", "ramp", "bursts")
SLICE = 0.005  # seconds between rate checks
CHUNK = 2000  # points a send at most
PICKLE_CHUNK = 500  # points a pickle message (carbon's own clients send 500 too)


@dataclass
class LoadProfile:
    """What to send. ``rate`` 0 means flat out; ``duration`` or ``points`` (or both) bound it."""

    host: str = "127.0.0.1"
    port: int = 2003
    protocol: str = "plaintext"
    metrics: int = 1000
    pattern: str = "load.group{g}.metric{i}"
    groups: int = 100
    rate: float = 0.0
    shape: str = "steady"
    ramp_to: float = 0.0
    burst_every: float = 10.0
    burst_length: float = 2.0
    burst_factor: float = 5.0
    duration: float = 10.0
    points: int = 0
    connections: int = 1
    new_per_minute: float = 0.0
    new_pattern: str = "load.new.metric{i}"
    step: int = 10
    start: int = 0
    value: float = 1.0

    def check(self) -> None:
        """Raise ValueError naming the first bad field."""
        if self.protocol not in PROTOCOLS:
            raise ValueError("protocol: %r is not one of %s"
                             % (self.protocol, ", ".join(PROTOCOLS)))
        if self.shape not in SHAPES:
            raise ValueError("shape: %r is not one of %s" % (self.shape, ", ".join(SHAPES)))
        for name in ("metrics", "connections", "groups", "step"):
            if int(getattr(self, name)) < 1:
                raise ValueError("%s: must be at least 1" % name)
        for name in ("rate", "ramp_to", "duration", "points", "new_per_minute"):
            if float(getattr(self, name)) < 0:
                raise ValueError("%s: must not be negative" % name)
        if not self.duration and not self.points:
            raise ValueError("duration: give a duration or a point count")
        for name in ("pattern", "new_pattern"):
            try:
                getattr(self, name).format(i=0, g=0)
            except (KeyError, IndexError, ValueError) as exc:
                raise ValueError("%s: only {i} and {g} may be used (%s)" % (name, exc)) from None

    def rate_at(self, elapsed: float) -> float:
        """Points a second wanted at ``elapsed`` seconds (0: flat out)."""
        if self.shape == "ramp" and self.duration:
            return self.rate + (self.ramp_to - self.rate) * min(elapsed / self.duration, 1.0)
        if self.shape == "bursts" and self.burst_every > 0:
            if elapsed % self.burst_every < self.burst_length:
                return self.rate * self.burst_factor
        return self.rate

    def name(self, index: int) -> str:
        return self.pattern.format(i=index, g=index % self.groups)

    def new_name(self, index: int) -> str:
        return self.new_pattern.format(i=index, g=index % self.groups)


@dataclass
class LoadResult:
    """What was sent: totals, per-second counts and the timestamp window used."""

    sent: int = 0
    elapsed: float = 0.0
    per_second: list[int] = field(default_factory=list)
    names: int = 0
    first_timestamp: int = 0
    last_timestamp: int = 0
    errors: list[str] = field(default_factory=list)

    @property
    def rate(self) -> float:
        return self.sent / self.elapsed if self.elapsed > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["rate"] = self.rate
        return out


class _Connection:
    """One TCP connection sending its share of the names and of the rate."""

    def __init__(self, profile: LoadProfile, index: int, share: float, start: int) -> None:
        self.profile = profile
        self.index = index
        self.share = share
        self.start = start
        count = profile.connections
        self.names = [self._encode(profile.name(i)) for i in range(index, profile.metrics, count)]
        self.new_added = 0  # new names of this connection added so far
        self.position = 0
        self.round = 0
        self.sent = 0
        self.max_round = -1 if not self.names else 0
        self.error: str | None = None

    def _encode(self, name: str) -> Any:
        if self.profile.protocol == "plaintext":
            return name.encode() + b" "
        return name

    def add_new(self, wanted_total: int) -> None:
        """Add this connection's share of the first ``wanted_total`` new names."""
        count, profile = self.profile.connections, self.profile
        while True:
            global_index = self.new_added * count + self.index
            if global_index >= wanted_total:
                return
            self.names.append(self._encode(profile.new_name(global_index)))
            self.new_added += 1

    def chunk(self, limit: int) -> tuple[bytes, int]:
        """The next at most ``limit`` points of the current round, as wire bytes."""
        names = self.names
        if not names or limit <= 0:
            return b"", 0
        if self.position >= len(names):
            self.position = 0
            self.round += 1
        end = min(len(names), self.position + limit)
        part = names[self.position:end]
        self.position = end
        stamp = self.start + self.round * self.profile.step
        self.max_round = max(self.max_round, self.round)
        value = self.profile.value
        if self.profile.protocol == "plaintext":
            sep = b"%s %d\n" % (repr(value).encode(), stamp)
            return sep.join(part) + sep, len(part)
        point = (float(stamp), float(value))
        return encode_pickle_items([(name, point) for name in part], PICKLE_CHUNK)[0], len(part)


def _plan(profile: LoadProfile) -> list[float]:
    """Each connection's share of the rate (by its number of names)."""
    shares = []
    for index in range(profile.connections):
        shares.append(len(range(index, profile.metrics, profile.connections)))
    total = sum(shares) or 1
    return [share / total for share in shares]


def run_load(profile: LoadProfile, stop: threading.Event | None = None,
             on_second: Callable[[int, int], None] | None = None) -> LoadResult:
    """Send the profile's load; ``on_second(second, points_in_it)`` is called each second.

    ``stop`` ends the run early (points already sent stay counted).
    """
    profile.check()
    stop = stop or threading.Event()
    start = profile.start or int(time.time()) // profile.step * profile.step
    shares = _plan(profile)
    conns = [_Connection(profile, index, share, start) for index, share in enumerate(shares)]
    point_caps = _split(profile.points, shares) if profile.points else [0] * len(conns)
    result = LoadResult(first_timestamp=start)
    began = time.monotonic()
    threads = [threading.Thread(target=_send_loop,
                                args=(profile, conn, cap, began, stop), daemon=True)
               for conn, cap in zip(conns, point_caps, strict=True)]
    for thread in threads:
        thread.start()
    second, last_total = 0, 0
    try:
        while any(thread.is_alive() for thread in threads):
            for thread in threads:
                thread.join(max(0.0, began + second + 1 - time.monotonic()))
            now = time.monotonic()
            while now - began >= second + 1:
                total = sum(conn.sent for conn in conns)
                result.per_second.append(total - last_total)
                if on_second is not None:
                    on_second(second, total - last_total)
                last_total = total
                second += 1
    except KeyboardInterrupt:
        stop.set()
        for thread in threads:
            thread.join(5)
        raise
    result.elapsed = time.monotonic() - began
    result.sent = sum(conn.sent for conn in conns)
    if result.sent != sum(result.per_second):
        result.per_second.append(result.sent - sum(result.per_second))
    result.names = sum(len(conn.names) for conn in conns)
    result.last_timestamp = start + max(conn.max_round for conn in conns) * profile.step
    result.errors = [conn.error for conn in conns if conn.error]
    return result


def _split(total: int, shares: list[float]) -> list[int]:
    caps = [int(total * share) for share in shares]
    caps[0] += total - sum(caps)
    return caps


def _send_loop(profile: LoadProfile, conn: _Connection, cap: int, began: float,
               stop: threading.Event) -> None:
    try:
        sock = socket.create_connection((profile.host, profile.port), timeout=30)
    except OSError as exc:
        conn.error = "connect %s:%d: %s" % (profile.host, profile.port, exc)
        return
    allowed = 0.0
    last = began
    try:
        with sock:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            while not stop.is_set():
                now = time.monotonic()
                elapsed = now - began
                if profile.duration and elapsed >= profile.duration:
                    break
                if cap and conn.sent >= cap:
                    break
                if profile.new_per_minute:
                    conn.add_new(int(profile.new_per_minute * elapsed / 60.0))
                rate = profile.rate_at(elapsed) * conn.share
                if rate > 0:
                    allowed += rate * (now - last)
                    last = now
                    want = int(allowed)
                    if want <= 0:
                        time.sleep(SLICE)
                        continue
                else:
                    want = CHUNK
                if cap:
                    want = min(want, cap - conn.sent)
                data, count = conn.chunk(min(want, CHUNK))
                if not count:
                    time.sleep(SLICE)
                    continue
                sock.sendall(data)
                conn.sent += count
                allowed -= count if rate > 0 else 0
    except OSError as exc:
        conn.error = "send to %s:%d: %s" % (profile.host, profile.port, exc)


def profile_from(values: dict[str, Any]) -> LoadProfile:
    """A LoadProfile from a mapping, values converted to each field's type."""
    known = {f.name: f for f in fields(LoadProfile)}
    profile = LoadProfile()
    for key, value in values.items():
        if key not in known:
            raise ValueError("%s: unknown load setting (known: %s)" % (key, ", ".join(known)))
        kind = type(getattr(profile, key))
        try:
            setattr(profile, key, kind(value))
        except (TypeError, ValueError):
            raise ValueError("%s: %r is not a %s" % (key, value, kind.__name__)) from None
    profile.check()
    return profile


def main(argv: list[str] | None = None) -> int:
    """``loadgen --port 2003 --metrics 1000 --rate 5000 --duration 10``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    defaults = LoadProfile()
    for item in fields(LoadProfile):
        default = getattr(defaults, item.name)
        parser.add_argument("--" + item.name.replace("_", "-"), type=type(default),
                            default=default, help="default: %(default)s")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.add_argument("--quiet", action="store_true", help="no per-second lines")
    args = parser.parse_args(argv)
    values = {item.name: getattr(args, item.name) for item in fields(LoadProfile)}
    try:
        profile = profile_from(values)
    except ValueError as exc:
        parser.error(str(exc))

    def show(second: int, count: int) -> None:
        if not args.quiet:
            print("second %d: sent %d points" % (second + 1, count), file=sys.stderr)

    result = run_load(profile, on_second=show)
    if args.json:
        print(json.dumps(result.to_dict()))
    else:
        print("sent %d points to %d metrics in %.2f s (%.0f points/s)"
              % (result.sent, result.names, result.elapsed, result.rate))
    for error in result.errors:
        print("error: %s" % error, file=sys.stderr)
    return 1 if result.errors else 0

