"""Connection limits, idle timeouts and white/blacklists on a running daemon."""

from __future__ import annotations

import socket
import time

from tests.support import CarbonInstance, carbonlink, send_tcp, wait_for

PAUSED = {"MAX_UPDATES_PER_SECOND": 0.0001, "MAX_CREATES_PER_MINUTE": 0.0001}


def cached(instance: CarbonInstance, names: list[str]) -> dict:
    return carbonlink(instance.query_port, {"type": "cache-query-bulk",
                                            "metrics": names})["datapointsByMetric"]


def test_max_receiver_connections_pauses_accepting(tmp_path):
    instance = CarbonInstance(tmp_path, MAX_RECEIVER_CONNECTIONS=2, **PAUSED)
    instance.start_foreground()
    try:
        first = socket.create_connection(("127.0.0.1", instance.line_port))
        second = socket.create_connection(("127.0.0.1", instance.pickle_port))
        wait_for(lambda: "Pausing" in instance.output(), what="pause log")
        third = socket.create_connection(("127.0.0.1", instance.line_port), timeout=5)
        third.sendall(b"conn.third 1 100\n")
        time.sleep(0.5)
        assert cached(instance, ["conn.third"])["conn.third"] == []  # not accepted yet
        first.sendall(b"conn.first 1 100\n")
        first.close()
        # a slot frees: the waiting connection is accepted and its line is read
        wait_for(lambda: cached(instance, ["conn.third"])["conn.third"], what="third accepted")
        assert cached(instance, ["conn.first"])["conn.first"] == [(100.0, 1.0)]
        second.close()
        third.close()
    finally:
        instance.kill()


def test_idle_timeout_closes_silent_connections(tmp_path):
    instance = CarbonInstance(tmp_path, METRIC_CLIENT_IDLE_TIMEOUT=1, **PAUSED)
    instance.start_foreground()
    try:
        with socket.create_connection(("127.0.0.1", instance.line_port), timeout=10) as sock:
            sock.sendall(b"idle.a 1 100\n")
            started = time.monotonic()
            assert sock.recv(10) == b""
            assert time.monotonic() - started < 8
        assert cached(instance, ["idle.a"])["idle.a"] == [(100.0, 1.0)]
    finally:
        instance.kill()


def test_whitelist_and_blacklist(tmp_path):
    instance = CarbonInstance(tmp_path, USE_WHITELIST=True, CARBON_METRIC_INTERVAL=1, **PAUSED)
    (instance.conf / "whitelist.conf").write_text("^allowed\\.\n")
    (instance.conf / "blacklist.conf").write_text("secret\n")
    instance.start_foreground()
    try:
        send_tcp(instance.line_port, b"allowed.x 1 100\nallowed.secret 2 100\nother.y 3 100\n")
        wait_for(lambda: cached(instance, ["allowed.x"])["allowed.x"], what="allowed")
        got = cached(instance, ["allowed.secret", "other.y"])
        assert got == {"allowed.secret": [], "other.y": []}
        host = socket.gethostname().replace(".", "_")
        prefix = "carbon.agents.%s-a." % host

        def counted() -> bool:
            stats = cached(instance, [prefix + "blacklistMatches", prefix + "whitelistRejects"])
            return any(v == 1.0 for _, v in stats[prefix + "blacklistMatches"]) and \
                any(v == 1.0 for _, v in stats[prefix + "whitelistRejects"])

        wait_for(counted, timeout=15, what="list counters")
    finally:
        instance.kill()
