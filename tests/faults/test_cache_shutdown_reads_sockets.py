"""Fault: SIGTERM while a sender's lines sit unread in the cache's socket buffers (the cache
is full, so flow control stopped reading). They are read and stored before exit."""

from __future__ import annotations

import socket
import threading
import time

from tests.faults.load import count_stored, expected_points, fault_lines, one_second_schema
from tests.support import CarbonInstance

POINTS = 30000
NAMES = 30


def test_lines_unread_at_sigterm_are_stored(tmp_path):
    start = int(time.time()) - 3600
    cache = CarbonInstance(tmp_path, MAX_CACHE_SIZE=1000, MAX_UPDATES_PER_SECOND=5,
                           MAX_UPDATES_PER_SECOND_ON_SHUTDOWN=100000)
    one_second_schema(cache)
    cache.start_foreground()
    sent = threading.Event()
    payload = b"".join(fault_lines(POINTS, NAMES, start))

    def send() -> None:
        with socket.create_connection(("127.0.0.1", cache.line_port), timeout=30) as sock:
            sock.sendall(payload)
            sent.set()
            sock.shutdown(socket.SHUT_WR)
            while sock.recv(4096):  # until the cache closes its side
                pass

    sender = threading.Thread(target=send, daemon=True)
    try:
        sender.start()
        # The cache fills (1,000 points) and stops reading; the rest waits in buffers.
        time.sleep(1.0)
        assert cache.terminate(60) == 0
        sender.join(30)
        assert sent.is_set(), "the sender's bytes were not all taken"
    finally:
        cache.kill()
    good, wrong = count_stored(cache.storage, NAMES, start, start + POINTS // NAMES,
                               expected_points(POINTS, NAMES, start))
    assert (good, wrong) == (POINTS, 0)
