"""Connection limits, idle timeouts and white/blacklists on a running daemon."""

from __future__ import annotations

import socket
import time

from tests.support import CarbonInstance, carbonlink, send_tcp, wait_for

PAUSED = {"MAX_UPDATES_PER_SECOND": 0.0001, "MAX_CREATES_PER_MINUTE": 0.0001}


def cached(instance: CarbonInstance, names: list[str]) -> dict:
    return carbonlink(instance.query_port, {"type": "cache-query-bulk",
                                            "metrics": names})["datapointsByMetric"]


def test_max_receiver_connections_refuses_and_recovers(tmp_path):
    instance = CarbonInstance(tmp_path, MAX_RECEIVER_CONNECTIONS=2, BAD_LINE_LOG_INTERVAL=1,
                              **PAUSED)
    instance.start_foreground()
    try:
        # start_foreground's probe connection counts until the daemon sees it close
        wait_for(lambda: "closed cleanly" in instance.output(), what="probe closed")
        first = socket.create_connection(("127.0.0.1", instance.line_port))
        second = socket.create_connection(("127.0.0.1", instance.pickle_port))
        wait_for(lambda: instance.output().count("established") == 3, what="both accepted")
        third = socket.create_connection(("127.0.0.1", instance.line_port), timeout=5)
        # over the limit: closed at once (the sender knows, unlike a silent backlog)
        try:
            assert third.recv(10) == b""
        except ConnectionResetError:
            pass
        third.close()
        wait_for(lambda: "connection refused: 2 receiver connections open, limit 2 "
                 "(MAX_RECEIVER_CONNECTIONS)" in instance.output(), what="refusal logged")
        first.sendall(b"conn.first 1 100\n")
        first.close()
        # a slot frees: a new connection is served
        wait_for(lambda: cached(instance, ["conn.first"])["conn.first"], what="first read")

        def fourth_served() -> bool:
            with socket.create_connection(("127.0.0.1", instance.line_port)) as fourth:
                fourth.sendall(b"conn.fourth 1 100\n")
            return bool(cached(instance, ["conn.fourth"])["conn.fourth"])

        wait_for(fourth_served, what="fourth served")
        second.close()
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
