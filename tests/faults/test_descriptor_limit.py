"""Fault: 600 connections against a carbon-cache whose open-file limit is 256 (hard, so it
cannot raise it). Carbonlink and self-metrics keep working, the refusals are counted in
one listener line per interval (no line per attempt, no busy loop), and once the
connections close new ones are served again."""

from __future__ import annotations

import resource
import select
import socket
import subprocess
import time

from tests.support import CarbonInstance, carbonlink, port_open, read_whisper, wait_for

LIMIT = 256
FLOOD = 600


def limit_descriptors() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (LIMIT, LIMIT))


def refused(sock: socket.socket) -> bool:
    """The daemon closed this connection (EOF or reset) rather than keeping it."""
    ready, _, _ = select.select([sock], [], [], 0)
    if not ready:
        return False
    try:
        return sock.recv(1) == b""
    except OSError:
        return True


def test_connection_flood_at_the_descriptor_limit(tmp_path):
    cache = CarbonInstance(tmp_path, CARBON_METRIC_INTERVAL=1, BAD_LINE_LOG_INTERVAL=1,
                           WHISPER_FD_CACHE_SIZE=32)
    stdout = open(tmp_path / "stdout.log", "w")
    cache.proc = subprocess.Popen(cache.script + ["--nodaemon", "start"], env=cache_env(cache),
                                  stdout=stdout, stderr=subprocess.STDOUT,
                                  preexec_fn=limit_descriptors)
    flood: list[socket.socket] = []
    try:
        wait_for(lambda: cache.proc.poll() is not None or port_open(cache.line_port),
                 what="daemon to listen")
        assert cache.proc.poll() is None, cache.output()
        assert "Open-file limit: soft 256, hard 256" in cache.output()
        for _ in range(FLOOD):  # every connect succeeds at the TCP level (backlog)
            flood.append(socket.create_connection(("127.0.0.1", cache.line_port), timeout=5))
        time.sleep(1.0)
        closed = [s for s in flood if refused(s)]
        kept = len(flood) - len(closed)
        assert 0 < kept < LIMIT and len(closed) == FLOOD - kept
        # The connections it kept are served; carbonlink answers; its own metrics are
        # written.
        stamp = int(time.time())
        kept_socks = [s for s in flood if s not in closed]
        kept_socks[-1].sendall(b"kept.conn 5 %d\n" % stamp)
        wait_for(lambda: carbonlink(cache.query_port, {"type": "cache-query",
                                                       "metric": "kept.conn"})["datapoints"]
                 or read_whisper(cache.whisper_path("kept.conn"), stamp - 120, stamp + 60),
                 timeout=15, what="a point sent over a kept connection")
        host = socket.gethostname().replace(".", "_")
        connections = cache.whisper_path("carbon.agents.%s-a.activeConnections" % host)
        wait_for(lambda: kept in latest(connections), timeout=15,
                 what="activeConnections self-metric at %d" % kept)
        # One summary line per interval, not a line per refused attempt.
        time.sleep(2.5)
        lines = [line for line in cache.output().splitlines() if "refused" in line]
        assert 1 <= len(lines) <= 6, lines
        assert "limit" in lines[0] and "open-file limit 256" in lines[0]
        # Descriptors free up: new connections are served again.
        for sock in flood:
            sock.close()
        flood.clear()
        now = int(time.time())
        wait_for(lambda: send_and_cached(cache, now), timeout=15, what="served again")
        cpu = cache_cpu_seconds(cache.proc.pid)
        time.sleep(1.0)
        assert cache_cpu_seconds(cache.proc.pid) - cpu < 0.5  # idle: no busy loop
    finally:
        for sock in flood:
            sock.close()
        cache.kill()
        stdout.close()


def cache_env(cache: CarbonInstance) -> dict:
    import os

    from tests.support import ROOT
    return dict(os.environ, GRAPHITE_ROOT=str(cache.root), PYTHONPATH=str(ROOT))


def latest(path) -> set:
    now = int(time.time())
    return set(read_whisper(path, now - 120, now + 60).values())


def send_and_cached(cache: CarbonInstance, stamp: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", cache.line_port), timeout=5) as sock:
            sock.sendall(b"after.flood 7 %d\n" % stamp)
    except OSError:
        return False
    reply = carbonlink(cache.query_port, {"type": "cache-query", "metric": "after.flood"})
    return bool(reply["datapoints"]) or bool(read_whisper(
        cache.whisper_path("after.flood"), stamp - 120, stamp + 60))


def cache_cpu_seconds(pid: int) -> float:
    with open("/proc/%d/stat" % pid) as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / 100.0
