"""A bounded cache of open whisper file descriptors, each with its last parsed header.

Carbon's writer visits every metric with cached points in turn, so with more active
metrics than cached descriptors plain LRU would evict each file just before it is
needed again and never hit. Instead, when full, the least recently used descriptor
is replaced only if it has been idle for ``idle_seconds``; otherwise the new file is
used through a transient descriptor that is closed right after the write. Cached
descriptors idle that long are also closed as the cache is used, so a deleted file's
space is not held for long.
"""

from __future__ import annotations

import os
import time
from collections import OrderedDict

from carbon.storage.whisper_format import Header

__all__ = ["Handle", "FdCache", "effective_capacity"]

# O_CLOEXEC is not on every platform
_OPEN_FLAGS = os.O_RDWR | getattr(os, "O_CLOEXEC", 0)


class Handle:
    """An open file: descriptor, identity (device, inode; 0, 0 until ``identify``
    for a file this process created), cached header, last use."""

    __slots__ = ("fd", "dev", "ino", "header", "used", "cached", "fresh", "in_use")

    def __init__(self, fd: int, dev: int, ino: int, used: float) -> None:
        self.fd = fd
        self.dev = dev
        self.ino = ino
        self.header: Header | None = None
        self.used = used
        self.cached = False
        # created by this process and not written yet: ``header`` is what was written
        self.fresh = False
        # held for a batch: dropping it from the cache leaves it open for ``release``
        self.in_use = False

    def identify(self) -> None:
        """Learn the descriptor's identity if not known yet (a new file's is asked for
        only when a later use checks that its path still names it)."""
        if not self.ino:
            st = os.fstat(self.fd)
            self.dev, self.ino = st.st_dev, st.st_ino


def effective_capacity(requested: int) -> int:
    """``requested`` bounded to half the process's open-file soft limit (at least 1)."""
    try:
        import resource
        soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (ImportError, OSError, ValueError):
        soft = -1
    capacity = max(1, int(requested))
    if soft > 0:
        capacity = min(capacity, max(1, soft // 2))
    return capacity


class FdCache:
    """Path -> Handle, never more than ``capacity`` descriptors kept open.

    Not thread-safe by itself: the backend serialises access. Call ``release`` after
    using a handle from ``get`` (it closes transient ones).
    """

    def __init__(self, capacity: int, fadvise_random: bool = False,
                 idle_seconds: float = 300.0) -> None:
        self.capacity = capacity
        self.idle_seconds = idle_seconds
        # posix_fadvise is not on every platform
        self.fadvise_random = fadvise_random and hasattr(os, "posix_fadvise")
        self._handles: OrderedDict[str, Handle] = OrderedDict()

    def __len__(self) -> int:
        return len(self._handles)

    def __contains__(self, path: object) -> bool:
        return path in self._handles

    def get(self, path: str) -> Handle:
        """An open handle of the file ``path`` names now (reopened if it was replaced)."""
        now = time.monotonic()
        handle = self._handles.get(path)
        if handle is not None:
            try:
                st = os.stat(path)
            except OSError:
                self.discard(path)  # deleted: let its space go
                raise
            handle.identify()
            if st.st_ino == handle.ino and st.st_dev == handle.dev:
                self._handles.move_to_end(path)
                handle.used = now
                self._close_idle(now)
                return handle
            self.discard(path)
        return self._admit(path, os.open(path, _OPEN_FLAGS), now)

    def peek(self, path: str) -> Handle | None:
        """The cached handle of ``path`` without checking that the path still names its
        file (the caller checks), or None; counts as a use."""
        handle = self._handles.get(path)
        if handle is not None:
            now = time.monotonic()
            self._handles.move_to_end(path)
            handle.used = now
            self._close_idle(now)
        return handle

    def has_room(self) -> bool:
        """Whether a descriptor opened now would be kept."""
        return self._room(time.monotonic())

    def take_fresh(self, path: str) -> Handle | None:
        """The cached handle of a file created by us and not written since, else None
        (no stat: nothing can have replaced it yet that we must notice)."""
        handle = self._handles.get(path)
        if handle is None or not handle.fresh:
            return None
        self._handles.move_to_end(path)
        handle.used = time.monotonic()
        return handle

    def adopt_new(self, path: str, fd: int) -> Handle:
        """Take over the ``fd`` of a file this process has just made (set up as this
        cache would: no fadvise; its identity is learnt when first checked); the
        caller must ``release`` it."""
        return self._keep(path, Handle(fd, 0, 0, time.monotonic()))

    def room(self) -> int:
        """How many descriptors opened now would be kept (free slots, else one if the
        oldest is idle)."""
        free = self.capacity - len(self._handles)
        return free if free > 0 else int(self.has_room())

    def adopt(self, path: str, fd: int) -> None:
        """Take over an open read-write descriptor of ``path`` (closed if not kept)."""
        self.release(self._admit(path, fd, time.monotonic()))

    def release(self, handle: Handle) -> None:
        """Done with ``handle`` for now: closes it unless it is cached."""
        if not handle.cached:
            os.close(handle.fd)

    def _admit(self, path: str, fd: int, now: float) -> Handle:
        try:
            self.discard(path)
            # the identity only matters to a descriptor that is kept
            st = os.fstat(fd) if self._room(now) else None
            if self.fadvise_random:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
        except BaseException:
            os.close(fd)
            raise
        if st is None:
            return Handle(fd, 0, 0, now)  # transient
        return self._keep(path, Handle(fd, st.st_dev, st.st_ino, now))

    def _room(self, now: float) -> bool:
        """Whether a new descriptor would be kept (the cache has room or an idle one)."""
        if len(self._handles) < self.capacity:
            return True
        return now - next(iter(self._handles.values())).used >= self.idle_seconds

    def _keep(self, path: str, handle: Handle) -> Handle:
        self.discard(path)
        if len(self._handles) >= self.capacity:
            if not self._room(handle.used):
                return handle  # transient: the cached ones are still in use
            self._evict_oldest()
        handle.cached = True
        self._handles[path] = handle
        return handle

    def _close_idle(self, now: float) -> None:
        """Close the least recently used descriptor if it has been idle too long."""
        if len(self._handles) > 1:
            oldest = next(iter(self._handles.values()))
            if now - oldest.used >= self.idle_seconds:
                self._evict_oldest()

    def _evict_oldest(self) -> None:
        _drop(self._handles.popitem(last=False)[1])

    def discard(self, path: str) -> None:
        """Close and forget ``path``'s descriptor, if open."""
        handle = self._handles.pop(path, None)
        if handle is not None:
            _drop(handle)

    def close(self) -> None:
        """Close every descriptor (those ``in_use`` at their ``release``)."""
        while self._handles:
            _drop(self._handles.popitem()[1])


def _drop(handle: Handle) -> None:
    """A handle leaves the cache: closed now, or by ``release`` if a batch holds it."""
    handle.cached = False
    if not handle.in_use:
        os.close(handle.fd)
