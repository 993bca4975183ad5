"""Shared helpers for the render app tests: whisper trees, WSGI calls, loopback servers."""

from __future__ import annotations

import os
import pickle
import signal
import socket
import socketserver
import struct
import subprocess
import threading
import time
import urllib.request
from io import BytesIO
from typing import Any, Callable, Optional
from urllib.parse import urlencode
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import whisper

STEP = 60


def create_whisper_with(path: str, archives: list, writes: list, now: int) -> None:
    """A whisper file with each (age, value) of ``writes`` stored one at a time at
    ``now - age`` (whisper.file_update's now, not the clock); ages it does not cover
    are skipped."""
    whisper.create(path, archives)
    with open(path, 'r+b') as fh:
        for age, value in writes:
            try:
                whisper.file_update(fh, value, now - age, now=now)
            except whisper.TimestampNotCovered:
                pass


def stop_server(proc: subprocess.Popen) -> None:
    """SIGTERM a server process a test started (killed if not gone in 10 s); its pipes
    are closed."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)
    for pipe in (proc.stdout, proc.stderr):
        if pipe is not None:
            pipe.close()


def aligned_now(step: int = 3600) -> int:
    """A recent time on a ``step`` boundary, so test windows are stable."""
    return int(time.time()) // step * step


def make_whisper(root: str, metric: str, points: list[tuple[int, float]],
                 archives: Optional[list[tuple[int, int]]] = None,
                 aggregation: str = 'average', xff: float = 0.5) -> str:
    """Create ``metric``'s whisper file under ``root`` and write ``points``."""
    path = os.path.join(root, *metric.split('.')) + '.wsp'
    os.makedirs(os.path.dirname(path), exist_ok=True)
    whisper.create(path, archives or [(STEP, 1440 * 2)], xFilesFactor=xff,
                   aggregationMethod=aggregation)
    if points:
        whisper.update_many(path, points)
    return path


class _Quiet(WSGIRequestHandler):
    def log_message(self, *args: Any) -> None:
        pass


class _ThreadingServer(socketserver.ThreadingMixIn, WSGIServer):
    daemon_threads = True


class LiveServer:
    """A real HTTP server on 127.0.0.1 (port 0) running a WSGI app in a thread."""

    def __init__(self, app: Callable) -> None:
        self.httpd = make_server('127.0.0.1', 0, app, server_class=_ThreadingServer,
                                 handler_class=_Quiet)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={
            'poll_interval': 0.05}, daemon=True)
        self.thread.start()

    @property
    def address(self) -> str:
        return '127.0.0.1:%d' % self.port

    def url(self, path: str, params: Any = None) -> str:
        query = '?' + urlencode(params, doseq=True) if params else ''
        return 'http://%s%s%s' % (self.address, path, query)

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(5)


def http_get(url: str, timeout: float = 10.0, data: Optional[bytes] = None,
             headers: Optional[dict] = None) -> tuple[int, dict, bytes]:
    """(status, headers, body) of a real HTTP request; errors returned, not raised."""
    req = urllib.request.Request(url, data=data, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, dict(resp.headers), resp.read()
    except urllib.error.HTTPError as err:
        return err.code, dict(err.headers), err.read()


def call(app: Callable, path: str, params: Any = None, method: str = 'GET',
         body: Optional[bytes] = None, headers: Optional[dict] = None,
         content_type: str = 'application/x-www-form-urlencoded',
         environ: Optional[dict] = None) -> tuple[int, dict, bytes]:
    """Call a WSGI app in-process; (status, headers, body). ``environ`` adds WSGI keys."""
    extra = environ
    environ = {
        'REQUEST_METHOD': method, 'PATH_INFO': path, 'SCRIPT_NAME': '',
        'QUERY_STRING': urlencode(params, doseq=True) if params else '',
        'SERVER_NAME': 'localhost', 'SERVER_PORT': '80', 'SERVER_PROTOCOL': 'HTTP/1.1',
        'wsgi.input': BytesIO(body or b''), 'wsgi.url_scheme': 'http', 'wsgi.errors': BytesIO(),
        'CONTENT_LENGTH': str(len(body or b'')), 'CONTENT_TYPE': content_type if body else '',
    }
    for name, value in (headers or {}).items():
        environ['HTTP_' + name.upper().replace('-', '_')] = value
    environ.update(extra or {})
    captured: dict[str, Any] = {}

    def start_response(status: str, hdrs: list) -> None:
        captured['status'] = int(status.split()[0])
        captured['headers'] = dict(hdrs)
    body = app(environ, start_response)
    try:
        data = b''.join(body)
    finally:
        close = getattr(body, 'close', None)
        if close is not None:
            close()
    return captured['status'], captured['headers'], data


class FakeCarbonCache:
    """A real TCP server speaking carbonlink framing (4-byte length + pickle)."""

    def __init__(self, points: dict[str, list[tuple[int, float]]], delay: float = 0.0,
                 error: Optional[str] = None) -> None:
        self.points = points
        self.delay = delay
        self.error = error
        self.requests: list[dict] = []
        self.connections = 0
        self.open_conns: list[socket.socket] = []
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(('127.0.0.1', 0))
        self.sock.listen(16)
        self.sock.settimeout(0.1)
        self.port = self.sock.getsockname()[1]
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.connections += 1
            self.open_conns.append(conn)
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn: socket.socket) -> None:
        conn.settimeout(5)
        try:
            for _ in range(1000):
                header = self._exact(conn, 4)
                if header is None:
                    return
                request = pickle.loads(self._exact(conn, struct.unpack('!L', header)[0]))
                self.requests.append(request)
                if self.delay:
                    time.sleep(self.delay)
                if self.error:
                    answer: dict = {'error': self.error}
                elif request['type'] == 'cache-query-bulk':
                    answer = {'datapointsByMetric': {
                        m: list(self.points.get(m, [])) for m in request['metrics']}}
                elif request['type'] == 'cache-query':
                    answer = {'datapoints': list(self.points.get(request['metric'], []))}
                else:
                    answer = {'error': 'Invalid request type "%s"' % request['type']}
                payload = pickle.dumps(answer, protocol=2)
                conn.sendall(struct.pack('!L', len(payload)) + payload)
        except OSError:
            pass
        finally:
            conn.close()

    @staticmethod
    def _exact(conn: socket.socket, size: int) -> Optional[bytes]:
        buf = b''
        while len(buf) < size:
            chunk = conn.recv(size - len(buf))
            if not chunk:
                return None
            buf += chunk
        return buf

    def stop(self) -> None:
        self._stop.set()
        self.sock.close()
        for conn in self.open_conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self.thread.join(2)


def render_with_and_without_packed(settings: Any, params: dict) -> tuple[tuple, tuple]:
    """The same /render request answered by one app with numpy's packed rows (first) and
    with plain lists everywhere (``packed.ENABLED = False``, second)."""
    from webapp.app import make_app
    from webapp.storage import packed
    app = make_app(settings)
    try:
        fast = call(app, '/render', params)
        packed.ENABLED = False
        try:
            slow = call(app, '/render', params)
        finally:
            packed.ENABLED = True
    finally:
        app.close()
    return fast, slow
