"""Shared pieces of the relay sending tests: settings, load generator, free ports."""

from __future__ import annotations

from typing import Any

from twisted.internet import defer

from carbon.config.settings import Settings
from carbon.instrumentation.stats import Stats
from carbon.logs import MemoryLog
from carbon.flow import FlowControl
from carbon.relay.sink import RelaySink
from tests.relay.harness import sleep


def free_port() -> int:
    """A port nobody listens on right now (for a destination that starts later)."""
    from tests.support import free_port as below_ephemeral_range

    return below_ephemeral_range()


def relay_settings(storage: Any, ports: list[int], **overrides: Any) -> Settings:
    values: dict[str, Any] = dict(
        RELAY_METHOD="consistent-hashing", DIVERSE_REPLICAS=False, STORAGE_DIR=str(storage),
        DESTINATIONS=["127.0.0.1:%d:%s" % (port, chr(ord("a") + i))
                      for i, port in enumerate(ports)],
        SHUTDOWN_FLUSH_TIMEOUT=5)
    values.update(overrides)
    return Settings(**values)


class Relay:
    """A RelaySink with its own flow control, stats and in-memory log."""

    def __init__(self, reactor: Any, settings: Settings, **kwargs: Any) -> None:
        self.flow = FlowControl()
        self.stats = Stats()
        self.log = MemoryLog()
        kwargs.setdefault("initial_delay", 0.05)
        kwargs.setdefault("max_delay", 0.3)
        self.sink = RelaySink.from_settings(settings, self.flow, self.stats, reactor, log=self.log,
                                            **kwargs)
        self.reactor = reactor

    def total(self, suffix: str) -> float:
        return sum(v for k, v in self.stats.counters.items() if k.endswith("." + suffix))

    def idle(self) -> bool:
        return all(not c.pending and not c.spool.points for c in self.sink.clients.values())


def make_points(count: int, names: int = 500, start: float = 1_600_000_000.0) -> list:
    """Unique (metric, timestamp) points: metric i % names, timestamp start + i."""
    return [("relay.test.m%d" % (i % names), start + i, float(i % 97)) for i in range(count)]


@defer.inlineCallbacks
def feed(reactor: Any, relay: Relay, points: list, batch: int = 500,
         respect_flow: bool = True, max_seconds: float = 20.0) -> Any:
    """Push ``points`` in batches like receivers would: never while receivers are paused."""
    deadline = reactor.seconds() + max_seconds
    sent = 0
    while sent < len(points):
        if reactor.seconds() > deadline:
            raise AssertionError("feed stalled at %d/%d points" % (sent, len(points)))
        if respect_flow and relay.flow.paused:
            yield sleep(reactor, 0.002)
            continue
        relay.sink.put_many(points[sent:sent + batch])
        sent += batch
        yield sleep(reactor, 0)
    return sent


def expected_per_destination(relay: Relay, points: list) -> dict:
    """What each destination must receive, in order: the router's answer per point."""
    out: dict = {dest: [] for dest in relay.sink.clients}
    for point in points:
        for dest in relay.sink.router.get_destinations(point[0]):
            out[dest].append(point)
    return out
