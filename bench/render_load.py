"""A cheap HTTP/1.1 keep-alive load generator for the render benchmark.

Each client thread owns one raw socket, sends a prebuilt GET and reads the answer
with ``recv_into`` into a reused buffer: only the status line and headers are parsed
(Content-Length or chunked), the body is never decoded, so the client costs little
of the CPU the measured server needs.
"""

from __future__ import annotations

import socket
import threading
import time
from typing import Optional

BUFFER = 1 << 20


def request_bytes(port: int, path: str) -> bytes:
    """A keep-alive GET of ``path``."""
    return ('GET %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nConnection: keep-alive\r\n'
            'Accept: */*\r\n\r\n' % (path, port)).encode('latin-1')


class RawClient:
    """One keep-alive connection to 127.0.0.1:port."""

    def __init__(self, port: int, path: str, timeout: float = 120.0) -> None:
        self.port = port
        self.timeout = timeout
        self.request = request_bytes(port, path)
        self.buf = bytearray(BUFFER)
        self.view = memoryview(self.buf)
        self.sock: Optional[socket.socket] = None
        self.pending = b''

    def _connect(self) -> socket.socket:
        sock = socket.create_connection(('127.0.0.1', self.port), timeout=self.timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.pending = b''
        return sock

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None

    def _recv(self) -> bytes:
        assert self.sock is not None
        n = self.sock.recv_into(self.buf)
        if not n:
            raise ConnectionError('server closed the connection')
        return bytes(self.view[:n])

    def _discard(self, size: int, keep: bool, out: list[bytes]) -> None:
        """Read ``size`` body bytes (after any already pending)."""
        assert self.sock is not None
        if self.pending:
            take = self.pending[:size]
            self.pending = self.pending[size:]
            size -= len(take)
            if keep:
                out.append(take)
        while size > 0:
            n = self.sock.recv_into(self.view[:min(size, BUFFER)])
            if not n:
                raise ConnectionError('server closed the connection mid-body')
            if keep:
                out.append(bytes(self.view[:n]))
            size -= n

    def _line(self) -> bytes:
        while b'\r\n' not in self.pending:
            self.pending += self._recv()
        line, _, self.pending = self.pending.partition(b'\r\n')
        return line

    def get(self, keep: bool = False) -> tuple[int, int, bytes]:
        """(status, body length, body if ``keep``) of one request."""
        if self.sock is None:
            self.sock = self._connect()
        self.sock.sendall(self.request)
        while b'\r\n\r\n' not in self.pending:
            self.pending += self._recv()
        head, _, self.pending = self.pending.partition(b'\r\n\r\n')
        lines = head.split(b'\r\n')
        status = int(lines[0].split()[1])
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(b':')
            headers[name.strip().lower()] = value.strip().lower()
        out: list[bytes] = []
        length = 0
        if b'content-length' in headers:
            length = int(headers[b'content-length'])
            self._discard(length, keep, out)
        elif headers.get(b'transfer-encoding') == b'chunked':
            while True:
                size = int(self._line().split(b';')[0], 16)
                if size == 0:
                    while self._line():
                        pass
                    break
                self._discard(size, keep, out)
                self._line()
                length += size
        else:
            raise ConnectionError('response without length')
        if headers.get(b'connection') == b'close' or lines[0].startswith(b'HTTP/1.0'):
            self.close()
        return status, length, b''.join(out)


def fetch(port: int, path: str) -> tuple[int, bytes]:
    """(status, body) of one request on a fresh connection."""
    client = RawClient(port, path)
    try:
        status, _, body = client.get(keep=True)
    finally:
        client.close()
    return status, body


def load(port: int, path: str | list[str], duration: float,
         concurrency: int) -> dict[str, float]:
    """Closed loop: ``concurrency`` keep-alive clients for ``duration`` seconds; with a list
    of paths each client cycles through them (client i starts at path i)."""
    paths = [path] if isinstance(path, str) else list(path)
    requests = [request_bytes(port, p) for p in paths]
    latencies: list[float] = []
    errors = [0]
    lock = threading.Lock()
    stop_at = time.monotonic() + duration

    def worker(index: int) -> None:
        client = RawClient(port, paths[0])
        mine = []
        failures = 0
        while time.monotonic() < stop_at and failures < 1000:
            client.request = requests[index % len(requests)]
            index += 1
            t0 = time.perf_counter()
            try:
                status, _, _ = client.get()
            except OSError:
                client.close()
                status = 0
            if status != 200:
                failures += 1
                continue
            mine.append(time.perf_counter() - t0)
        client.close()
        with lock:
            latencies.extend(mine)
            errors[0] += failures
    threads = [threading.Thread(target=worker, args=(i,)) for i in range(concurrency)]
    started = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - started
    latencies.sort()

    def pct(p: float) -> float:
        return latencies[min(len(latencies) - 1, int(p * len(latencies)))] * 1000 \
            if latencies else float('nan')
    return {'requests': len(latencies), 'rps': len(latencies) / elapsed, 'p50_ms': pct(0.50),
            'p99_ms': pct(0.99), 'errors': errors[0], 'elapsed': elapsed}
