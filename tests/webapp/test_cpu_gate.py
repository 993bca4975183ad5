"""CPU_SLOTS: one request at a time does Python work; waits on other hosts give the slot back."""

from __future__ import annotations

import socket
import threading
import time
from typing import Any, Callable, Iterator

import pytest

from tests.webapp.helpers import STEP, FakeCarbonCache, LiveServer, http_get, make_whisper
from webapp.app import make_app
from webapp.cpu_gate import CpuGate


def test_gate_counts_slots_and_is_reentrant() -> None:
    gate = CpuGate(1)
    inside = threading.Event()
    leave = threading.Event()
    entered = []

    def other() -> None:
        with gate.held():
            entered.append(time.monotonic())

    def holder() -> None:
        with gate.held():
            with gate.held():          # re-entrant: no self-deadlock
                inside.set()
                leave.wait(5)

    first = threading.Thread(target=holder)
    first.start()
    assert inside.wait(5)
    second = threading.Thread(target=other)
    second.start()
    time.sleep(0.2)
    assert entered == []               # the only slot is taken
    leave.set()
    first.join(5)
    second.join(5)
    assert len(entered) == 1


def test_released_lends_the_slot_and_takes_it_back() -> None:
    gate = CpuGate(1)
    order: list[str] = []

    def other() -> None:
        with gate.held():
            order.append('other')

    with gate.held():
        with gate.released():
            helper = threading.Thread(target=other)
            helper.start()
            helper.join(5)             # another thread got the slot while we waited
        order.append('back')
        blocked = threading.Thread(target=other)
        blocked.start()
        blocked.join(0.2)
        assert blocked.is_alive()      # and we have it again
    blocked.join(5)
    assert order == ['other', 'back', 'other']
    with gate.released():              # not held: a no-op
        pass
    unlimited = CpuGate(0)
    with unlimited.held(), unlimited.held(), unlimited.released():
        pass


@pytest.fixture
def slow_remote() -> Iterator[int]:
    """A cluster server that accepts and answers nothing for a while."""
    sock = socket.socket()
    sock.bind(('127.0.0.1', 0))
    sock.listen(16)
    yield sock.getsockname()[1]
    sock.close()


def _timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    start = time.monotonic()
    result = fn()
    return time.monotonic() - start, result


@pytest.mark.parametrize('waits_on', ['cluster server', 'carbon cache'])
def test_waits_on_other_hosts_do_not_hold_the_slot(
        tmp_path: Any, make_web_settings: Callable, base_time: int, slow_remote: int,
        waits_on: str) -> None:
    make_whisper(str(tmp_path / 'w'), 'local.m', [(base_time, 1.0)])
    cache = FakeCarbonCache({}, delay=1.5)
    remote = waits_on == 'cluster server'
    app = make_app(make_web_settings(
        WHISPER_DIR=str(tmp_path / 'w'), CPU_SLOTS=1, FETCH_TIMEOUT=1.5, FIND_TIMEOUT=1.5,
        CLUSTER_SERVERS=['127.0.0.1:%d' % slow_remote] if remote else [],
        CARBONLINK_TIMEOUT=3.0, CARBONLINK_HOSTS=[] if remote else [
            '127.0.0.1:%d' % cache.port]))
    server = LiveServer(app)
    try:
        window = {'format': 'json', 'from': base_time - 10 * STEP, 'until': base_time}
        slow = threading.Thread(target=http_get, args=(server.url('/render', dict(
            window, target='local.m')),), kwargs={'timeout': 20})
        slow.start()                   # waits ~1.5 s on the other host
        time.sleep(0.3)
        took, (status, _, body) = _timed(lambda: http_get(server.url('/version')))
        slow.join(20)
    finally:
        server.stop()
        app.close()
        cache.stop()
    assert status == 200 and body == b'1.1.10\n'
    assert took < 1.0                  # not queued behind the waiting request
