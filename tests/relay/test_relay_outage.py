"""A destination process stopped for a few seconds under load: afterwards every
datapoint has arrived at least once per replica, in order of first arrival; the
duplicates are exactly what the relay counted as resent."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from twisted.internet import defer

from tests.relay.harness import run_reactor, sleep, wait_for
from tests.relay.relayutil import Relay, feed, make_points, relay_settings

SINK_SCRIPT = str(Path(__file__).with_name("countsink.py"))


class SinkProcess:
    """A counting sink in its own process; stopped by PID with SIGTERM (drains first)."""

    def __init__(self, out: Path, port: int = 0) -> None:
        self.out = out
        self.proc = subprocess.Popen(
            [sys.executable, SINK_SCRIPT, "--protocol", "pickle", "--port", str(port),
             "--out", str(out)], stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        assert line.startswith("PORT "), line
        self.port = int(line.split()[1])

    def terminate(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)

    def exited(self) -> bool:
        return self.proc.poll() is not None

    def points(self) -> list:
        return [tuple(p) for p in json.loads(self.out.read_text())]

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(5)
        self.proc.stdout.close()


def test_destination_stopped_under_load_gets_everything_at_least_once(tmp_path):
    points = make_points(120_000, names=2000)
    started: list[SinkProcess] = []

    @defer.inlineCallbacks
    def body(reactor):
        a = SinkProcess(tmp_path / "a.json")
        b1 = SinkProcess(tmp_path / "b1.json")
        started.extend([a, b1])
        relay = Relay(reactor, relay_settings(tmp_path, [a.port, b1.port],
                                              REPLICATION_FACTOR=2))
        relay.sink.start()

        @defer.inlineCallbacks
        def paced_load():
            for start in range(0, len(points), 4000):
                yield feed(reactor, relay, points[start:start + 4000], batch=500)
                yield sleep(reactor, 0.07)

        load = paced_load()
        yield sleep(reactor, 0.5)
        b1.terminate()
        yield wait_for(reactor, b1.exited, timeout=10, what="sink b to stop")
        yield sleep(reactor, 1.5)
        assert not load.called, "load should still be running during the outage"
        b2 = SinkProcess(tmp_path / "b2.json", port=b1.port)
        started.append(b2)
        yield load
        yield wait_for(reactor, relay.idle, timeout=20, what="queues and spools to empty")
        client_b = relay.sink.clients[next(d for d in relay.sink.clients if d.port == b1.port)]
        assert relay.stats.get(client_b.stat["spooled"]) > 0  # the outage went to disk
        assert relay.total("dropped") == 0
        yield relay.sink.stop()
        for sink in (a, b2):
            sink.terminate()
        yield wait_for(reactor, lambda: a.exited() and b2.exited(), timeout=10,
                       what="sinks to drain and exit")
        resent = {port: relay.stats.get(client.stat["resent"])
                  for port, client in ((d.port, c) for d, c in relay.sink.clients.items())}
        return a.points(), b1.points() + b2.points(), resent[a.port], resent[b1.port]

    try:
        got_a, got_b, resent_a, resent_b = run_reactor(body, timeout=90)
    finally:
        for sink in started:
            sink.kill()
    assert len(got_a) == len(points) and got_a == points and resent_a == 0
    # b's first connection ended when it stopped: the relay's resend window went out
    # again on the next one (duplicates, never a loss).
    assert resent_b > 0
    assert len(got_b) == len(points) + resent_b
    assert first_arrivals(got_b) == points


def first_arrivals(points: list) -> list:
    """``points`` without repeats, each where it first arrived."""
    return list(dict.fromkeys(points))
