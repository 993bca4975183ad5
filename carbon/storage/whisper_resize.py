"""Bring a whisper file's header in line with the schema rules: unchanged, a header edit
in place, or a rewrite into new archives, as whisper 1.1.10's tools do it.

``compare`` decides; ``set_metadata`` edits the 16 metadata bytes as
whisper-set-aggregation-method.py / whisper-set-xfilesfactor.py do; ``rewrite`` makes
the new file beside the old one (``temp_path``) the way whisper-resize.py 1.1.10 does by
default (no ``--aggregate``): every old archive is fetched (coarsest first, each from
``now - retention + step`` to ``now``, with whisper's archive choice) and its points go
through ``update_many`` into the new file, so finer data lands last ("newest wins") and
is aggregated into the coarser archives with the file's aggregation method and
xFilesFactor. With the same ``now`` the new file's bytes are whisper-resize.py's.
``replace`` renames it into place (atomic: a reader sees the old or the new file).

Nothing here talks to a cache: carbon.cluster.resize holds the metric's writes around
``rewrite`` + ``replace``.
"""

from __future__ import annotations

import os
from array import array
from itertools import compress
from operator import eq
from typing import NamedTuple, Sequence

from carbon.storage.whisper_create import CreateOptions, create_one, file_plan
from carbon.storage.whisper_fetch import archive_ranges, choose_archive
from carbon.storage.whisper_format import (
    METADATA_SIZE, POINT_SIZE, Header, aggregate, pack_metadata, parse_header,
    read_header_from, run_struct,
)
from carbon.storage.whisper_points import prepare_points
from carbon.storage.whisper_writer import apply_update

try:  # optional C accelerator (setup.py builds it): the common update in one call
    import carbon.storage._whisper_writer as update_native
except ImportError:  # pragma: no cover - built without a compiler
    update_native = None

__all__ = ["UNCHANGED", "HEADER", "REWRITE", "Target", "Change", "compare", "read_header",
           "set_metadata", "rewrite", "replace", "temp_path", "TEMP_SUFFIX", "describe"]

UNCHANGED, HEADER, REWRITE = "unchanged", "header-only", "rewrite"
TEMP_SUFFIX = ".resize-tmp"  # beside the old file: ``a/b/c.wsp.resize-tmp``


class Target(NamedTuple):
    """What the schema rules give a metric: archives (seconds per point, points),
    xFilesFactor and aggregation method (None: whisper's 0.5 / average, as the cache
    creates files)."""

    archives: Sequence[tuple[int, int]]
    xff: float | None
    method: str | None


class Change(NamedTuple):
    """``compare``'s answer: the kind of change, the file's header and the target's
    header bytes and file size."""

    kind: str
    header: Header
    new_header: bytes
    new_size: int


def read_header(path: str) -> Header:
    """The parsed header of the whisper file at ``path``."""
    with open(path, "rb") as handle:
        return read_header_from(handle, path)


def compare(header: Header, target: Target) -> Change:
    """Whether a file with ``header`` already has ``target``'s header (UNCHANGED), differs
    only in aggregation method / xFilesFactor (HEADER) or needs new archives (REWRITE).
    Raises what whisper.create raises for a target it would refuse."""
    new_header, new_size = file_plan(target.archives, target.xff, target.method)
    if header.raw == new_header:
        return Change(UNCHANGED, header, new_header, new_size)
    new = parse_header(new_header, "<target>")
    same = [(a.step, a.points) for a in header.archives] == \
        [(a.step, a.points) for a in new.archives]
    return Change(HEADER if same else REWRITE, header, new_header, new_size)


def describe(header: Header) -> str:
    """A header in storage-schemas.conf terms: ``60:1440,3600:720 (average, xff 0.5)``."""
    return "%s (%s, xff %g)" % (",".join("%d:%d" % (a.step, a.points) for a in header.archives),
                                header.aggregation_method, header.xff)


def set_metadata(path: str, change: Change) -> None:
    """Write the target's aggregation method and xFilesFactor into the file's metadata in
    place (the archives are the same), as whisper.setAggregationMethod does."""
    new = parse_header(change.new_header, path)
    raw = pack_metadata(new.aggregation_method, change.header.max_retention, new.xff,
                        len(change.header.archives))
    fd = os.open(path, os.O_WRONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        if os.pwrite(fd, raw, 0) != METADATA_SIZE:
            raise OSError("short write of %s's header" % path)
    finally:
        os.close(fd)


def temp_path(path: str) -> str:
    """Where the new file of ``path`` is made before it replaces it."""
    return path + TEMP_SUFFIX


def _fetch_all(image: bytes, header: Header, now: int) -> list[array[float]]:
    """whisper-resize.py's reads: for each archive, coarsest first, the points of
    ``whisper.fetch(path, now - retention + step, now)`` that are not None, as one
    ``array('d')`` of interleaved timestamps and values (in time order)."""
    info = header.info()
    result: list[array[float]] = []
    ordered = sorted(info["archives"], key=lambda a: a["secondsPerPoint"], reverse=True)

    def read(offset: int, size: int) -> bytes:
        return image[offset:offset + size]
    for wanted in ordered:
        start = now - wanted["retention"] + wanted["secondsPerPoint"]
        archive, start, end = choose_archive(info, start, now, now)
        if archive is None:  # whisper.fetch returned None: nothing to migrate
            result.append(array("d"))
            continue
        time_info, base, ranges = archive_ranges(archive, start, end, read, "<image>")
        if not base:
            result.append(array("d"))
            continue
        first, until, step = time_info
        data = b"".join(read(offset, size) for offset, size in ranges)
        # whisper-resize.py zips the fetch's time range with its values: the shorter wins
        count = min(len(data) // POINT_SIZE, (until - first) // step)
        flat = run_struct(count).unpack_from(data) if count else ()
        expected = range(first, first + count * step, step)
        stamps = flat[0::2]
        if stamps == tuple(expected):  # every slot holds its interval's point
            result.append(array("d", flat))
            continue
        # a slot holding another interval's point reads as None (as decode_values
        # has it) and is left out
        keep = list(map(eq, stamps, expected))
        times = array("d", compress(expected, keep))
        out = array("d", bytes(16 * len(times)))
        out[0::2] = times
        out[1::2] = array("d", compress(flat[1::2], keep))
        result.append(out)
    return result


def rewrite(path: str, change: Change, now: int, options: CreateOptions | None = None,
            image: bytes | None = None) -> str:
    """Make the new file of ``path`` at ``temp_path(path)`` (a leftover one is replaced)
    from the old file's data as whisper-resize.py does at time ``now``; returns the temp
    path. The old file is only read (``image``: its bytes, if already read)."""
    if image is None:
        with open(path, "rb") as handle:
            image = handle.read()
    header = parse_header(image, path)
    batches = _fetch_all(image, header, now)
    temp = temp_path(path)
    try:
        os.unlink(temp)
    except FileNotFoundError:
        pass
    options = options or CreateOptions(False, False, False, False, False)
    scratch = _scratch(change.new_size)
    if scratch is not None:
        # built in memory (many small reads and writes), then written in one go
        try:
            os.pwrite(scratch, change.new_header, 0)
            _fill(scratch, temp, change.new_header, batches, now)
            body = os.pread(scratch, change.new_size, 0)
        finally:
            os.close(scratch)
        made = create_one(temp, body, len(body), options._replace(use_fallocate=False),
                          makedirs=False, image=body)
    else:
        made = create_one(temp, change.new_header, change.new_size, options, makedirs=False)
    assert made is not None
    fd = made.fd
    try:
        if scratch is None:
            _fill(fd, temp, change.new_header, batches, now)
        st = os.stat(path)
        os.fchmod(fd, st.st_mode & 0o7777)
        if os.geteuid() == 0 and (st.st_uid, st.st_gid) != (0, 0):
            os.fchown(fd, st.st_uid, st.st_gid)
    except BaseException:
        os.close(fd)
        os.unlink(temp)
        raise
    os.close(fd)
    return temp


def _scratch(size: int) -> int | None:
    """A zero-filled in-memory file of ``size`` bytes (None where there is no memfd)."""
    create = getattr(os, "memfd_create", None)
    if create is None:
        return None
    fd = create("carbon-resize", getattr(os, "MFD_CLOEXEC", 0))
    os.ftruncate(fd, size)
    return fd


def _fill(fd: int, name: str, raw_header: bytes, batches: list[array[float]],
          now: int) -> None:
    """whisper-resize.py's ``update_many`` calls, one per old archive, into the new file
    (open at ``fd``, header written, archives empty)."""
    new = parse_header(raw_header, name)
    empty: bytes | None = raw_header  # every archive empty: nothing to read
    for flat in batches:
        if not flat:
            continue
        if not _native_update(name, fd, flat, now, empty):
            points = prepare_points(zip(flat[0::2], flat[1::2], strict=True))
            apply_update(fd, name, new, None, points, now)
        empty = None


def _native_update(path: str, fd: int, flat: array[float], now: int,
                   empty: bytes | None) -> bool:
    """update_many of time-ordered points (``flat``: interleaved timestamps and values)
    by the C accelerator, which writes the same bytes (tests/storage/
    test_whisper_batch.py); False when it leaves them to Python (points for coarser
    archives...), which then does the whole update again."""
    if update_native is None:
        return False
    item = (os.fsencode(path), fd, 0, 0, False, flat, empty)
    [(status, _)] = update_native.update_files([item], now, False, False, False, aggregate)
    return status == 0


def replace(temp: str, path: str, fsync: bool = True) -> None:
    """Rename the new file into place (readers see the old or the new file, never a mix);
    with ``fsync`` its data is on disk first, so a crash cannot leave a renamed file
    without its contents."""
    if fsync:
        fd = os.open(temp, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    os.rename(temp, path)
