"""Large format=json bodies are printed while they are sent (webapp.readahead)."""

from __future__ import annotations

import json
import logging
import threading
import time
from typing import Any, Iterator

import pytest

from tests.webapp.helpers import LiveServer, call, http_get
from webapp import http
from webapp.cpu_gate import CpuGate
from webapp.readahead import Readahead

YEAR = {'target': 'identity("i")', 'format': 'json', 'from': '-1y'}


def test_large_body_streams_the_same_bytes(app: Any, base_time: int,
                                          monkeypatch: Any) -> None:
    year = dict(YEAR, **{'from': base_time - 365 * 86400, 'until': base_time})
    monkeypatch.setattr(http, 'EAGER_BYTES', 1 << 30)
    status, headers, whole = call(app, '/render', year)
    assert status == 200 and int(headers['Content-Length']) == len(whole)
    monkeypatch.setattr(http, 'EAGER_BYTES', 1 << 20)
    status, headers, streamed = call(app, '/render', year)
    assert status == 200 and 'Content-Length' not in headers, headers
    assert streamed == whole and len(whole) > 4 * (1 << 20)
    assert len(json.loads(streamed)[0]['datapoints']) >= 525600
    # a small answer is still made whole, with its length
    status, headers, small = call(app, '/render', dict(YEAR, **{'from': '-1h'}))
    assert int(headers['Content-Length']) == len(small)
    # HEAD gives the whole body's length and no body
    status, headers, empty = call(app, '/render', year, method='HEAD')
    assert empty == b'' and int(headers['Content-Length']) == len(whole)


def test_jsonp_and_live_server_stream(app: Any, monkeypatch: Any) -> None:
    monkeypatch.setattr(http, 'EAGER_BYTES', 1 << 20)
    server = LiveServer(app)
    try:
        status, headers, body = http_get(server.url('/render', dict(YEAR, jsonp='cb')))
    finally:
        server.stop()
    assert status == 200 and headers['Content-Type'] == 'text/javascript'
    assert body.startswith(b'cb([{') and body.endswith(b'])')
    assert len(json.loads(body[3:-1])[0]['datapoints']) >= 525600


def chunks(count: int, made: list, size: int = 10) -> Iterator[bytes]:
    try:
        for i in range(count):
            made.append(i)
            yield b'%0*d' % (size, i)
    finally:
        made.append('closed')


def test_slow_reader_gives_the_cpu_slot_back() -> None:
    gate = CpuGate(1)
    made: list = []
    body = Readahead([b'first'], chunks(100, made), gate, depth=2)
    it = iter(body)
    assert next(it) == b'first'
    # the reader stops; the maker fills its queue and waits without the slot
    deadline = time.monotonic() + 5
    while len(made) < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    got = threading.Event()

    def other() -> None:
        with gate.held():
            got.set()
    threading.Thread(target=other, daemon=True).start()
    assert got.wait(5)
    assert len(made) <= 4              # at most depth chunks ahead (+1 waiting)
    rest = list(it)
    body.close()
    assert [b'first'] + rest == [b'first'] + [b'%010d' % i for i in range(100)]
    assert made[-1] == 'closed'


def test_close_before_the_end_stops_the_maker() -> None:
    made: list = []
    body = Readahead([], chunks(10 ** 6, made), CpuGate(1), depth=2)
    it = iter(body)
    assert next(it) == b'%010d' % 0
    body.close()
    assert made[-1] == 'closed' and len(made) < 100


def test_error_while_streaming_is_logged_once_and_cuts_the_body(caplog: Any) -> None:
    def failing() -> Iterator[bytes]:
        yield b'a'
        raise OSError('disk went away')
    body = Readahead([b'0'], failing(), CpuGate(1), what='/render')
    got = []
    with caplog.at_level(logging.ERROR, logger='webapp'):
        with pytest.raises(OSError, match='disk went away'):
            for chunk in body:
                got.append(chunk)
    body.close()
    assert got == [b'0', b'a']
    lines = [r.getMessage() for r in caplog.records if 'disk went away' in r.getMessage()]
    assert lines == ['error while sending /render: OSError: disk went away']


def test_client_gone_mid_body_stops_the_thread(app: Any, monkeypatch: Any) -> None:
    """A client that closes its connection after the first bytes of a large body: the
    server closes the body and the printing thread ends (no thread left behind)."""
    import socket
    from urllib.parse import urlencode
    monkeypatch.setattr(http, 'EAGER_BYTES', 1 << 20)
    server = LiveServer(app)
    try:
        sock = socket.create_connection(('127.0.0.1', server.port), timeout=10)
        sock.sendall(b'GET /render?%s HTTP/1.1\r\nHost: x\r\n\r\n'
                     % urlencode(dict(YEAR, **{'from': '-5y'})).encode())
        assert sock.recv(65536).startswith(b'HTTP/1.')
        sock.close()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(
                t.name == 'webapp-readahead' for t in threading.enumerate()):
            time.sleep(0.05)
        assert not [t for t in threading.enumerate() if t.name == 'webapp-readahead']
    finally:
        server.stop()


def test_concurrent_streamed_answers_share_one_cpu_slot(whisper_tree: str,
                                                       make_web_settings: Any,
                                                       base_time: int,
                                                       monkeypatch: Any) -> None:
    """Six clients at once, one CPU slot: every printing thread takes the slot in turn and
    each client gets the whole body (no thread waits for a slot another holds while
    waiting for its reader)."""
    from concurrent.futures import ThreadPoolExecutor
    from webapp.app import make_app
    monkeypatch.setattr(http, 'EAGER_BYTES', 256 << 10)
    app = make_app(make_web_settings(WHISPER_DIR=whisper_tree, CPU_SLOTS=1))
    server = LiveServer(app)
    try:
        url = server.url('/render', dict(YEAR, **{'from': base_time - 2 * 365 * 86400,
                                                  'until': base_time}))
        with ThreadPoolExecutor(6) as pool:
            answers = list(pool.map(lambda _: http_get(url, timeout=60), range(6)))
    finally:
        server.stop()
        app.close()
    assert {status for status, _, _ in answers} == {200}
    bodies = {body for _, _, body in answers}
    assert len(bodies) == 1
    assert len(json.loads(bodies.pop())[0]['datapoints']) >= 2 * 525600
