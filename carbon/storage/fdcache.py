"""A bounded LRU of open whisper file descriptors, each with its last parsed header."""

from __future__ import annotations

import os
from collections import OrderedDict

from carbon.storage.whisper_format import Header

__all__ = ["Handle", "FdCache", "effective_capacity"]

_OPEN_FLAGS = os.O_RDWR | getattr(os, "O_CLOEXEC", 0)


class Handle:
    """An open file: its descriptor, identity (device, inode) and cached header."""

    __slots__ = ("fd", "dev", "ino", "header")

    def __init__(self, fd: int, dev: int, ino: int) -> None:
        self.fd = fd
        self.dev = dev
        self.ino = ino
        self.header: Header | None = None


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
    """Path -> Handle, least recently used closed first, never more than ``capacity`` open.

    Not thread-safe by itself: the backend serialises access.
    """

    def __init__(self, capacity: int, fadvise_random: bool = False) -> None:
        self.capacity = capacity
        self.fadvise_random = fadvise_random and hasattr(os, "posix_fadvise")
        self._handles: OrderedDict[str, Handle] = OrderedDict()

    def __len__(self) -> int:
        return len(self._handles)

    def __contains__(self, path: object) -> bool:
        return path in self._handles

    def get(self, path: str, st: os.stat_result | None = None) -> Handle:
        """The open handle of ``path``, reopened if the path now names another file.

        ``st`` is a fresh ``os.stat(path)`` when the caller already has one.
        """
        handle = self._handles.get(path)
        if handle is not None:
            if st is None:
                st = os.stat(path)
            if st.st_ino == handle.ino and st.st_dev == handle.dev:
                self._handles.move_to_end(path)
                return handle
            self.discard(path)
        fd = os.open(path, _OPEN_FLAGS)
        return self.adopt(path, fd)

    def adopt(self, path: str, fd: int) -> Handle:
        """Cache an already open read-write descriptor for ``path``."""
        try:
            st = os.fstat(fd)
            if self.fadvise_random:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
        except BaseException:
            os.close(fd)
            raise
        self.discard(path)
        handle = Handle(fd, st.st_dev, st.st_ino)
        self._handles[path] = handle
        while len(self._handles) > self.capacity:
            _, oldest = self._handles.popitem(last=False)
            os.close(oldest.fd)
        return handle

    def discard(self, path: str) -> None:
        """Close and forget ``path``'s descriptor, if open."""
        handle = self._handles.pop(path, None)
        if handle is not None:
            os.close(handle.fd)

    def close(self) -> None:
        """Close every descriptor."""
        while self._handles:
            _, handle = self._handles.popitem()
            os.close(handle.fd)
