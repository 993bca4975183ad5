"""At most N requests of a process run their CPU-bound work at once.

In CPython only one thread runs Python at a time; when several request threads all
want the GIL, every system call and every large numpy operation hands it over, and
the context switches cost more than the work (a 200-file read does 800 system calls).
Request threads therefore take a slot for the whole request (``CPU_SLOTS``, default
1) and give it back while they wait on other machines: cluster servers and carbon
caches (``released()``). Sending the response happens after the slot is returned, so
one request's socket writes overlap the next one's work.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Iterator


class CpuGate:
    """A semaphore of ``slots`` (0 = no limit) that knows which threads hold it."""

    def __init__(self, slots: int) -> None:
        self.slots = max(0, int(slots))
        self._sem = threading.BoundedSemaphore(self.slots) if self.slots else None
        self._local = threading.local()

    @contextmanager
    def held(self) -> Iterator[None]:
        """Run the body with a slot (re-entrant within a thread)."""
        # a threading.local: unset in a thread that never held a slot
        if self._sem is None or getattr(self._local, 'held', False):
            yield
            return
        self._sem.acquire()
        self._local.held = True
        try:
            yield
        finally:
            self._local.held = False
            self._sem.release()

    @contextmanager
    def released(self) -> Iterator[None]:
        """Give the slot back for the body (a wait on the network), if this thread has it."""
        # a threading.local: unset in a thread that never held a slot
        if self._sem is None or not getattr(self._local, 'held', False):
            yield
            return
        self._local.held = False
        self._sem.release()
        try:
            yield
        finally:
            self._sem.acquire()
            self._local.held = True


NO_GATE = CpuGate(0)
