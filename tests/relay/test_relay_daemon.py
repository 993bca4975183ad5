"""The carbon-relay daemon as a real process: lines in over TCP, pickle out to a counting
destination, self-metrics with the reference's names, spool kept across a restart."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from twisted.internet import defer

from tests.relay.countsink import CountingSink
from tests.relay.harness import run_reactor, sleep, wait_for
from tests.relay.relayutil import free_port

ROOT = Path(__file__).parents[2]


def _write_conf(base: Path, line_port: int, dest_port: int, protocol: str = "pickle") -> None:
    conf = base / "conf"
    conf.mkdir(parents=True, exist_ok=True)
    (conf / "storage-schemas.conf").write_text("[all]\npattern = .*\nretentions = 60s:1d\n")
    (conf / "carbon.conf").write_text("\n".join([
        "[relay]", "STORAGE_DIR = %s" % (base / "storage"), "USER = ",
        "LINE_RECEIVER_INTERFACE = 127.0.0.1", "LINE_RECEIVER_PORT = %d" % line_port,
        "PICKLE_RECEIVER_INTERFACE = 127.0.0.1", "PICKLE_RECEIVER_PORT = 0",
        "RELAY_METHOD = consistent-hashing", "DESTINATIONS = 127.0.0.1:%d" % dest_port,
        "DESTINATION_PROTOCOL = %s" % protocol,
        "CARBON_METRIC_INTERVAL = 1", "SHUTDOWN_FLUSH_TIMEOUT = 2", ""]))


def _start(base: Path) -> subprocess.Popen:
    env = {"GRAPHITE_ROOT": str(base), "PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-m", "carbon.daemon", "carbon-relay", "--config",
                             str(base / "conf" / "carbon.conf"), "--nodaemon", "start"],
                            stdout=open(base / "relay.out", "a"), stderr=subprocess.STDOUT,
                            env=env, cwd=str(base))


def _accepting(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


def _send_lines(port: int, lines: list[str]) -> threading.Thread:
    def push() -> None:
        with socket.create_connection(("127.0.0.1", port)) as sock:
            sock.sendall("".join(lines).encode())
    thread = threading.Thread(target=push)
    thread.start()
    return thread


@pytest.mark.parametrize("protocol", ["pickle", "line"])  # line: the lean path
def test_relay_daemon_end_to_end(tmp_path, protocol):
    line_port, dest_port = free_port(), free_port()
    _write_conf(tmp_path, line_port, dest_port, protocol)
    first = ["daemon.test.m%d %d %d\n" % (i % 100, i, 1_700_000_000 + i) for i in range(5000)]
    second = ["daemon.later.m%d 1 %d\n" % (i, 1_700_000_000 + i) for i in range(3000)]
    procs: list[subprocess.Popen] = []

    def relayed(sink: CountingSink, prefix: str) -> list:
        return [p for p in sink.points if p[0].startswith(prefix)]

    @defer.inlineCallbacks
    def body(reactor):
        sink = CountingSink(reactor, protocol, port=dest_port)
        sink.listen()
        relay = _start(tmp_path)
        procs.append(relay)
        yield wait_for(reactor, lambda: _accepting(line_port), timeout=20, what="line port")
        sender = _send_lines(line_port, first)
        yield wait_for(reactor, lambda: len(relayed(sink, "daemon.test.")) == len(first),
                       timeout=20, what="relayed lines")
        sender.join(5)
        assert relayed(sink, "daemon.test.") == [
            ("daemon.test.m%d" % (i % 100), float(1_700_000_000 + i), float(i))
            for i in range(5000)]
        name = "destinations.127_0_0_1:%d:None.sent" % dest_port
        yield wait_for(reactor, lambda: any(p[0].endswith(name) for p in sink.points),
                       timeout=10, what="self-metrics")
        assert any(p[0].startswith("carbon.relays.") and p[0].endswith(name)
                   for p in sink.points)

        # The destination goes away: lines sent now go to the spool (more than
        # MAX_QUEUE_SIZE for a destination that is down) and stay there at shutdown ...
        yield sink.stop()
        sender = _send_lines(line_port, second)
        spool_dir = tmp_path / "storage" / "relay-spool" / "carbon-relay-a"

        def spooled_bytes() -> int:
            return sum(f.stat().st_size for f in spool_dir.rglob("*.spool"))
        yield wait_for(reactor, lambda: spooled_bytes() > 1000 * 20, timeout=20,
                       what="spooled lines")
        sender.join(5)
        yield sleep(reactor, 0.5)  # the relay reads on (nothing holds it paused)
        os.kill(relay.pid, signal.SIGTERM)
        yield wait_for(reactor, lambda: relay.poll() is not None, timeout=20,
                       what="relay shutdown")
        assert relay.returncode == 0
        assert "datapoints spooled for the next start" in (tmp_path / "relay.out").read_text()

        # ... and replayed by the next start once the destination is back.
        back = CountingSink(reactor, protocol, port=dest_port)
        back.listen()
        again = _start(tmp_path)
        procs.append(again)
        yield wait_for(reactor, lambda: len(relayed(back, "daemon.later.")) == len(second),
                       timeout=20, what="replay after restart")
        assert relayed(back, "daemon.later.") == [
            ("daemon.later.m%d" % i, float(1_700_000_000 + i), 1.0) for i in range(3000)]
        os.kill(again.pid, signal.SIGTERM)
        yield wait_for(reactor, lambda: again.poll() is not None, timeout=20,
                       what="second shutdown")
        yield back.stop()

    try:
        run_reactor(body, timeout=90)
    finally:
        for proc in procs:
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait(10)
