"""Creating whisper files byte-identical to ``whisper.create``, one or a batch at a time.

``create_many`` creates a batch in one call of the C accelerator carbon.storage._whisper_create,
with the GIL released for the whole batch (a thread that makes four file-system calls a
file and has to win the GIL back after each one is starved by a busy thread), or with
the pure-Python ``create_one`` loop when the accelerator is not built. Both behave alike:
missing parent directories are made, and each file gets a ``NewFile`` (its descriptor),
None (made with its first points and closed: ``image``, ``keep``) or the exception for
that file alone; a file that fails half-way is removed.
"""

from __future__ import annotations

import errno
import os
from typing import Any, NamedTuple, Sequence

from carbon.storage.whisper_format import (
    POINT_SIZE, InvalidConfiguration, build_header, validate_archive_list,
)

try:
    import carbon.storage._whisper_create as native
except ImportError:  # the accelerator is optional
    native = None

#: a file to make: (path, header, total) or (path, header, total, first image, keep open)
FileItem = tuple[Any, ...]  # Any: the two shapes above, unpacked by position

__all__ = ["CreateOptions", "NewFile", "FileExists", "file_plan", "create_one", "create_many",
           "exists_many", "native"]

_ZEROES = bytes(16384)
# whisper's default fill: a body up to this size is written as zeroes (ext4 allocates a
# written page's block later, in writeback: for a one-page file less than fallocate costs
# the creating thread; measured with bench/create_floor.c, 4.3 KB files 1.5x faster, 17 KB
# even), a larger one is fallocated (a 103 KB body about 1.9x faster than writing it).
# The bytes are the same either way. The C accelerator uses the same value.
SMALL_BODY = 16384
# O_CLOEXEC is not on every platform
_FLAGS = os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)


class FileExists(InvalidConfiguration, FileExistsError):
    """The file to create is there already (what whisper.create raises, and a
    FileExistsError, so a caller that creates without looking first can tell)."""


class CreateOptions(NamedTuple):
    """How new files are filled and opened (the WHISPER_* settings)."""

    sparse: bool = False
    use_fallocate: bool = False
    lock: bool = False
    fadvise_random: bool = False
    autoflush: bool = False

    @property
    def mode(self) -> int:
        """The accelerator's fill mode: 2 fallocate, 1 sparse, 0 whisper's default."""
        return 2 if self.use_fallocate else 1 if self.sparse else 0


class NewFile(NamedTuple):
    """A created file's open read-write descriptor (the caller closes it; its identity
    is ``os.fstat``'s when someone needs it)."""

    fd: int


def file_plan(archives: Sequence[tuple[int, int]], xff: float | None,
              aggregation_method: str | None) -> tuple[bytes, int]:
    """(header bytes, file size) of a new file; None picks whisper's 0.5 / average.

    Raises what whisper.create raises for a bad archive list, method or xFilesFactor.
    """
    xff = 0.5 if xff is None else xff
    aggregation_method = "average" if aggregation_method is None else aggregation_method
    ordered = validate_archive_list(archives)
    header = build_header(ordered, xff, aggregation_method)
    return header, len(header) + sum(points for _, points in ordered) * POINT_SIZE


def create_one(path: str, header: bytes, total: int, options: CreateOptions,
               makedirs: bool = True, image: bytes | None = None,
               keep: bool = True) -> NewFile | None:
    """Create one file (what the accelerator does for each item), or raise. ``image``
    (the header, zeroes and first points: ``_whisper_writer.first_images``) is written
    instead of the header; without ``keep`` the descriptor is closed (None)."""
    if image is not None:
        header = image
    try:
        try:
            fd = os.open(path, _FLAGS, 0o666)
        except FileNotFoundError:
            if not makedirs:
                raise
            os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
            fd = os.open(path, _FLAGS, 0o666)
    except FileExistsError:
        raise FileExists("File %s already exists!" % path) from None
    try:
        if options.lock:
            import fcntl
            fcntl.flock(fd, fcntl.LOCK_EX)
        if options.fadvise_random:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
        remaining = total - len(header)
        # a body fallocated: the whole file first, then the header written into it (the
        # same bytes and blocks, less work for this thread than allocating around a
        # page just written)
        allocated = False
        if options.use_fallocate and remaining > 0:
            os.posix_fallocate(fd, 0, total)
            allocated = True
        elif not options.sparse and SMALL_BODY < remaining:
            allocated = _reserve_zeroes(fd, 0, total)
        _write_all(fd, header, 0)
        if allocated or remaining <= 0:
            pass  # zeroes already (or nothing left)
        elif options.sparse:
            _write_all(fd, b"\x00", total - 1)
        else:
            pos = len(header)
            while pos < total:
                chunk = _ZEROES[:min(len(_ZEROES), total - pos)]
                _write_all(fd, chunk, pos)
                pos += len(chunk)
        if options.autoflush:
            os.fsync(fd)
        if options.lock:
            import fcntl
            fcntl.flock(fd, fcntl.LOCK_UN)
    except BaseException:
        os.close(fd)
        os.unlink(path)
        raise
    if not keep:
        os.close(fd)
        return None
    return NewFile(fd)


def create_many(items: Sequence[FileItem], options: CreateOptions, makedirs: bool = True,
                use_native: bool = True) -> list[NewFile | None | Exception]:
    """Create files from (path, header, total[, image, keep]) items (see ``create_one``);
    per item a NewFile, None (made and closed) or its error.

    With the accelerator the whole batch is one call with the GIL released.
    """
    if native is None or not use_native or any("\0" in item[0] for item in items):
        return [_attempt(item, options, makedirs) for item in items]
    results = native.create_files(items, options.mode, options.lock, options.fadvise_random,
                                  options.autoflush, makedirs)
    return [NewFile(*result) if type(result) is tuple
            else None if result is None else _error(result, item[0])
            for result, item in zip(results, items, strict=True)]


def exists_many(paths: Sequence[str], use_native: bool = True) -> list[bool]:
    """``os.path.exists`` of each path; with the accelerator, one call without the GIL."""
    if native is None or not use_native or any("\0" in path for path in paths):
        return [os.path.exists(path) for path in paths]
    return [code == 0 for code in native.stat_files(paths)]


def _attempt(item: FileItem, options: CreateOptions, makedirs: bool
             ) -> NewFile | None | Exception:
    path, header, total, *rest = item
    try:
        return create_one(path, header, total, options, makedirs, *rest)
    except Exception as exc:
        return exc


def _error(code: int, path: str) -> Exception:
    """The exception create_one raises for ``code`` (``errno``) at ``path``."""
    if code == errno.EEXIST:
        return FileExists("File %s already exists!" % path)
    return OSError(code, os.strerror(code), path)


def _reserve_zeroes(fd: int, offset: int, length: int) -> bool:
    """posix_fallocate a zero-filled range; False where the filesystem cannot.

    whisper writes the zeroes itself; allocating them is byte-identical, reserves the
    same disk space and costs a fraction of the time (no 100 KB copies per file).
    """
    try:
        os.posix_fallocate(fd, offset, length)
    except OSError:
        return False
    return True


def _write_all(fd: int, data: bytes, offset: int) -> None:
    """pwrite all of ``data`` at ``offset`` (retrying short writes)."""
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, offset)
        view = view[written:]
        offset += written
