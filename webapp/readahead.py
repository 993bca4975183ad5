"""A large response body made on its own thread, a few chunks ahead of the sender.

The render app prints a large format=json body in blocks (webapp.render.jsonfmt) while
the server sends it: the body is never held whole, and the client's reading overlaps
the printing. The thread takes a CPU slot (webapp.cpu_gate) for the work and gives it
back while it waits for the sender, so a client that reads slowly holds a thread and
``depth`` chunks, not a slot.
"""

from __future__ import annotations

import logging
import queue
import threading
from typing import Any, Iterator, Optional

from webapp.cpu_gate import CpuGate

log = logging.getLogger("webapp")
DEPTH = 2
WAIT_SECONDS = 0.5
_END = object()


class _Failed:
    def __init__(self, error: BaseException) -> None:
        self.error = error


class Readahead:
    """An iterable WSGI body: ``first``, then the chunks of ``rest`` made by a thread at
    most ``depth`` chunks ahead of whoever iterates. ``close()`` (called by the WSGI
    server, also when the client went away) stops the thread.

    An error while the rest is made is logged once and raised to the server, which
    drops the connection: the status line is already sent, and a cut body is how HTTP
    tells the client the answer is incomplete.
    """

    def __init__(self, first: list[bytes], rest: Iterator[bytes], gate: CpuGate,
                 what: str = '', depth: int = DEPTH) -> None:
        self._first = first
        self._rest = rest
        self._gate = gate
        self._what = what
        self._queue: queue.Queue[Any] = queue.Queue(max(1, depth))
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._produce, name='webapp-readahead',
                                        daemon=True)
        self._thread.start()

    def __iter__(self) -> Iterator[bytes]:
        yield from self._first
        self._first = []
        while True:
            item = self._queue.get()
            if item is _END:
                return
            if isinstance(item, _Failed):
                raise item.error
            yield item

    def close(self) -> None:
        """Stop making chunks (the body was sent, or the client is gone)."""
        self._stop.set()
        while self._thread.is_alive():
            try:
                self._queue.get(timeout=WAIT_SECONDS)
            except queue.Empty:
                pass
        self._thread.join()

    def _produce(self) -> None:
        try:
            with self._gate.held():
                for chunk in self._rest:
                    if not self._put(chunk):
                        return
            self._put(_END)
        except Exception as err:  # noqa: BLE001 - handed to the sender, logged once
            log.error("error while sending %s: %s: %s", self._what or 'a response',
                      type(err).__name__, err)
            self._put(_Failed(err))
        finally:
            # PEP 3333: a WSGI body may have close()
            close = getattr(self._rest, 'close', None)
            if close is not None:
                close()

    def _put(self, item: Any) -> bool:
        """Queue ``item``, giving the CPU slot back while the queue is full; False once
        the body is closed."""
        try:
            self._queue.put_nowait(item)
            return True
        except queue.Full:
            pass
        with self._gate.released():
            while not self._stop.is_set():
                try:
                    self._queue.put(item, timeout=WAIT_SECONDS)
                    return True
                except queue.Full:
                    continue
        return False


def body_of(response: Any, gate: CpuGate, what: str = '') -> Optional[Readahead]:
    """The Readahead for a response with a stream, else None."""
    if response.stream is None:
        return None
    stream, response.stream = response.stream, None
    return Readahead(response.chunks, stream, gate, what)
