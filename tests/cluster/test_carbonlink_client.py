"""carbon.carbonlink.client against a real carbon-cache daemon (writes paused, so the
points stay in the cache and carbonlink is the only place to read them)."""

from __future__ import annotations

import pickle
import socket
import threading
import time

import pytest

from carbon.carbonlink.client import (CarbonlinkError, cache_query, cache_query_bulk,
                                      request)
from carbon.formats.pickled import frame
from tests.support import CarbonInstance, free_port, send_tcp, wait_for


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory):
    instance = CarbonInstance(tmp_path_factory.mktemp("carbonlink"),
                              MAX_UPDATES_PER_SECOND="0.001")  # points stay cached
    instance.start_foreground()
    try:
        yield instance
    finally:
        instance.kill()


def test_cache_query_and_bulk_read_the_points_the_cache_holds(cache: CarbonInstance) -> None:
    now = int(time.time()) // 60 * 60
    lines = "".join("link.m%d %d %d\n" % (n, n * 10 + k, now - 60 * k)
                    for n in range(3) for k in range(4))
    send_tcp(cache.line_port, lines.encode())
    address = ("127.0.0.1", cache.query_port)
    wait_for(lambda: len(cache_query(address, "link.m2")) == 4, what="points cached")
    assert sorted(cache_query(address, "link.m1")) == [(now - 60 * k, float(10 + k))
                                                        for k in (3, 2, 1, 0)]
    bulk = cache_query_bulk(address, ["link.m0", "link.m2", "link.none"])
    assert {name: sorted(points) for name, points in bulk.items() if points} == {
        "link.m0": [(now - 60 * k, float(k)) for k in (3, 2, 1, 0)],
        "link.m2": [(now - 60 * k, float(20 + k)) for k in (3, 2, 1, 0)]}
    assert cache_query(address, "link.none") == []
    raw = request(address, {"type": "cache-query", "metric": "link.m0"})
    assert sorted(raw["datapoints"]) == [(now - 60 * k, k) for k in (3, 2, 1, 0)]


@pytest.mark.parametrize("answer, error", [
    (b"\x00\x00\x01\x00abc", "closed after 3 of 256"),  # 256 bytes announced, 3 sent
    (frame(pickle.dumps([1, 2], protocol=2)), "not a dict"),
    (frame(b"\x80\x02cos\nsystem\n."), "not a safe pickle"),
], ids=["short", "list", "unsafe"])
def test_a_bad_answer_is_an_error(answer: bytes, error: str) -> None:
    """A cache that closes early or answers something else than a plain dict."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        def reply() -> None:
            conn, _ = server.accept()
            with conn:
                conn.recv(65536)
                conn.sendall(answer)
        thread = threading.Thread(target=reply)
        thread.start()
        with pytest.raises(CarbonlinkError, match=error):
            cache_query(server.getsockname(), "x", timeout=5)
        thread.join()


def test_a_closed_port_is_an_oserror() -> None:
    with pytest.raises(OSError):
        cache_query(("127.0.0.1", free_port()), "x", timeout=2)
