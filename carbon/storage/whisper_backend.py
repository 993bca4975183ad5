"""The whisper storage backend (DATABASE = whisper), byte-compatible with carbon 1.1.10.

Files are created exactly as ``whisper.create`` makes them and updated exactly as
``whisper.update_many`` would (see carbon.storage.whisper_writer), through a bounded
cache of open descriptors (carbon.storage.fdcache; WHISPER_FD_CACHE_SIZE, default 1024,
at most half the open-file limit; WHISPER_FD_CACHE_IDLE seconds, default 300) and
parsed headers shared by files of one schema. Nothing global is touched: the
WHISPER_* options apply to this instance only.

``write_batch`` updates many files in one call of the C accelerator
(carbon.storage._whisper_writer) with the GIL released, in the common case; the rest goes
through ``write`` (the Python writer), which is the specification.

Staleness: every write through a cached descriptor ``stat``s the path (~1 us; not the
first write after our own create) and reopens when the path names another file
(device, inode), e.g. after whisper-resize renamed a new file into place. The header
is re-read with every write, in the same ``pread`` as the first archive's base point,
so in-place edits (whisper-set-aggregation-method, whisper-set-xfilesfactor) are seen
at once; not by the first write after our own create, which knows the header it wrote
and that every archive is empty. Nothing is written to a replaced or deleted file.
``create_many`` can also write each new file's first points in its create.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from array import array
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any, Iterable, Iterator, Sequence

from carbon import tags
from carbon.config.settings import Settings
from carbon.plugins import STORAGE_BACKENDS
from carbon.storage.backend import Capabilities, CreateRequest, CreateResult, StorageBackend
from carbon.storage.fdcache import FdCache, Handle, effective_capacity
from carbon.storage.whisper_create import (
    CreateOptions, FileItem, create_many, exists_many, file_plan,
)
from carbon.storage.whisper_format import (
    AGGREGATION_METHODS, Header, aggregate, pack_metadata, parse_header,
    validate_archive_list,
)
from carbon.storage.whisper_points import prepare_points
from carbon.storage.whisper_writer import apply_update, read_header, remember_header

__all__ = ["WhisperConfig", "WhisperDatabase"]

log = logging.getLogger(__name__)

METADATA_KEYS = ("aggregationMethod",)

try:
    import fcntl
except ImportError:  # pragma: no cover - not on POSIX
    fcntl = None  # type: ignore[assignment]

try:  # optional C accelerator (setup.py builds it)
    import carbon.storage._whisper_writer as update_native
except ImportError:  # pragma: no cover - built without a compiler
    update_native = None


_CREATED_KEEP = 1024


@dataclass(frozen=True)
class WhisperConfig:
    """What a WhisperDatabase reads of carbon.conf, built once (``from_settings``); the
    defaults are carbon.config.defaults'."""

    data_dir: str  # LOCAL_DATA_DIR
    tag_hash_filenames: bool  # TAG_HASH_FILENAMES
    sparse_create: bool  # WHISPER_SPARSE_CREATE
    fallocate_create: bool  # WHISPER_FALLOCATE_CREATE
    autoflush: bool  # WHISPER_AUTOFLUSH
    lock_writes: bool  # WHISPER_LOCK_WRITES
    fadvise_random: bool  # WHISPER_FADVISE_RANDOM
    fd_cache_size: int  # WHISPER_FD_CACHE_SIZE (bounded by the open-file limit)
    fd_cache_idle: float  # WHISPER_FD_CACHE_IDLE
    known_files: int  # WRITER_KNOWN_FILES: metric -> path entries kept

    @classmethod
    def from_settings(cls, settings: Settings) -> WhisperConfig:
        data_dir = settings.get("LOCAL_DATA_DIR")  # a path key: derived by the loader
        if not data_dir:
            raise ValueError("LOCAL_DATA_DIR is not set")
        return cls(
            data_dir=str(data_dir),
            tag_hash_filenames=bool(settings["TAG_HASH_FILENAMES"]),
            sparse_create=bool(settings["WHISPER_SPARSE_CREATE"]),
            fallocate_create=bool(settings["WHISPER_FALLOCATE_CREATE"]),
            autoflush=bool(settings["WHISPER_AUTOFLUSH"]),
            lock_writes=bool(settings["WHISPER_LOCK_WRITES"]),
            fadvise_random=bool(settings["WHISPER_FADVISE_RANDOM"]),
            fd_cache_size=int(settings["WHISPER_FD_CACHE_SIZE"]),
            fd_cache_idle=float(settings["WHISPER_FD_CACHE_IDLE"]),
            known_files=max(1, int(settings["WRITER_KNOWN_FILES"])))


@STORAGE_BACKENDS.register("whisper")
class WhisperDatabase(StorageBackend):
    """Whisper files under LOCAL_DATA_DIR, one per metric (``a.b.c`` -> ``a/b/c.wsp``).

    Thread-safe: the writer thread writes while the reactor may read or set metadata.

    ``create_many`` writes each new file's first points in its create, and
    ``prepare_create_many`` splits it: a subclass that overrides ``create_many`` declares
    its own ``capabilities`` (without, it gets none: it is called as ``create_many``).
    """

    plugin_name = "whisper"
    aggregation_methods = tuple(AGGREGATION_METHODS)
    capabilities = Capabilities(writes_on_create=True, overlaps_creates=True,
                                whisper_files=True)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "create_many" in cls.__dict__ and "capabilities" not in cls.__dict__:
            cls.capabilities = replace(cls.capabilities, writes_on_create=False,
                                       overlaps_creates=False)

    @classmethod
    def from_settings(cls, settings: Settings) -> WhisperDatabase:
        return cls(WhisperConfig.from_settings(settings))

    def __init__(self, config: WhisperConfig) -> None:
        self.config = config
        self.data_dir: str = config.data_dir
        self.tag_hash_filenames = config.tag_hash_filenames
        self.sparse_create = config.sparse_create
        self.fallocate_create = config.fallocate_create
        self.autoflush = config.autoflush
        self.lock_writes = config.lock_writes
        self.fadvise_random = config.fadvise_random
        # posix_fallocate / posix_fadvise are not on every platform
        if self.fallocate_create and not hasattr(os, "posix_fallocate"):
            log.error("WHISPER_FALLOCATE_CREATE is enabled but posix_fallocate is unavailable")
            self.fallocate_create = False
        if self.lock_writes and fcntl is None:
            log.error("WHISPER_LOCK_WRITES is enabled but fcntl is unavailable")
            self.lock_writes = False
        if self.fadvise_random and not hasattr(os, "posix_fadvise"):
            log.error("WHISPER_FADVISE_RANDOM is enabled but posix_fadvise is unavailable")
            self.fadvise_random = False
        self._fds = FdCache(effective_capacity(config.fd_cache_size), self.fadvise_random,
                            config.fd_cache_idle)
        self._headers: dict[bytes, Header] = {}  # parsed headers by their bytes (schemas)
        self._lock = threading.Lock()
        # metric -> (file, os.fsencode(file)), at most WRITER_KNOWN_FILES
        self._paths: dict[str, tuple[str, bytes]] = {}
        self.path_cache_size = config.known_files
        # just-created files' descriptors the fd cache did not keep, until their first write
        self._created: dict[str, Handle] = {}
        self.created_keep = min(_CREATED_KEEP, max(16, effective_capacity(1 << 30) // 4))
        self.create_options = CreateOptions(self.sparse_create, self.fallocate_create,
                                            self.lock_writes, self.fadvise_random,
                                            self.autoflush)
        self.native_create = True  # False: the pure-Python create loop (tests compare both)
        self.native_write = update_native is not None  # False: write_batch leaves all
        # sum-based aggregations through Python's sum() in write_batch (None: only where
        # sum() is not plain left-to-right addition; tests set True)
        self.python_sums: bool | None = None

    # -- paths -------------------------------------------------------------------------

    def get_filesystem_path(self, metric: str) -> str:
        """The .wsp file of ``metric`` (tagged series under ``_tagged/``)."""
        return self._path_forms(metric)[0]

    def _path_forms(self, metric: str) -> tuple[str, bytes]:
        """The metric's file as str and as the bytes the C accelerator takes."""
        forms = self._paths.get(metric)
        if forms is None:
            path = tags.filesystem_path(self.data_dir, metric, self.tag_hash_filenames)
            if len(self._paths) >= self.path_cache_size:
                self._paths.clear()
            forms = self._paths[metric] = (path, os.fsencode(path))
        return forms

    def exists(self, metric: str) -> bool:
        """True if the metric's file exists. With TAG_HASH_FILENAMES, a tagged series
        stored under its readable name is first renamed to its hashed name."""
        path = self.get_filesystem_path(metric)
        if os.path.exists(path):
            return True
        if self.tag_hash_filenames and ";" in metric:
            old = tags.filesystem_path(self.data_dir, metric, False)
            if os.path.exists(old):
                os.rename(old, path)
                return True
        return False

    def exists_many(self, metrics: Sequence[str]) -> list[bool]:
        """``exists`` of each metric, the file-system calls made in one batch."""
        found = exists_many([self.get_filesystem_path(metric) for metric in metrics],
                            use_native=self.native_create)
        if self.tag_hash_filenames:
            for index, metric in enumerate(metrics):
                if not found[index] and ";" in metric:
                    found[index] = self.exists(metric)
        return found

    def found_by_create(self, metric: str) -> bool:
        """Whether creating the metric's file tells whether it exists (a FileExistsError):
        not for a tagged series with TAG_HASH_FILENAMES, whose file may still be under its
        readable name (``exists`` renames it)."""
        return not (self.tag_hash_filenames and ";" in metric)

    # -- create / write ---------------------------------------------------------------

    def create(self, metric: str, retentions: Sequence[tuple[int, int]],
               xfilesfactor: float | None, aggregation_method: str | None) -> None:
        """Create the metric's file as whisper.create would (None picks 0.5 / average)."""
        error = self.create_many([(metric, retentions, xfilesfactor, aggregation_method)])[0]
        if isinstance(error, Exception):  # (a float only comes with points)
            raise error

    def create_many(self, requests: Sequence[CreateRequest],
                    points: Sequence[array[float] | None] | None = None, now: int | None = None
                    ) -> list[CreateResult]:
        """Create files for (metric, retentions, xff, method) requests in one batch
        (see carbon.storage.whisper_create); per request None or its error.

        With ``points`` (per request the metric's cached points, as ``write_batch``
        takes them) a file whose first update ``write_batch`` would make is created
        with those points in its first write (header, zeroes and points: the bytes
        that update would leave), and its entry is the seconds its share of the batch
        took instead of None; its descriptor is closed unless the descriptor cache has
        room (``now``: the update's clock, as ``write_batch``'s). Other new
        descriptors and their parsed headers are kept for the write that follows,
        which then needs no stat, open or header read.
        """
        job = self.prepare_create_many(requests, points, now)
        job.run()
        return job.finish()

    def prepare_create_many(self, requests: Sequence[CreateRequest],
                            points: Sequence[array[float] | None] | None = None,
                            now: int | None = None) -> CreateJob:
        """``create_many`` in three steps: this one (headers, first images), the job's
        ``run`` (the file-system calls alone: any thread, while this one prepares the
        next batch) and its ``finish`` (adopting descriptors: the preparing thread)."""
        started = time.time()
        errors: list[Exception | float | None] = [None] * len(requests)
        items: list[FileItem] = []
        where: list[int] = []
        # metrics share schemas: (retentions, xff, method) -> plan
        plans: dict[tuple[object, ...], tuple[bytes, int] | Exception] = {}
        for index, (metric, retentions, xff, method) in enumerate(requests):
            key = (tuple(retentions), xff, method)
            plan = plans.get(key)
            if plan is None:
                try:
                    plan = file_plan(retentions, xff, method)
                except Exception as exc:
                    plan = exc
                plans[key] = plan
            if isinstance(plan, Exception):
                errors[index] = plan
                continue
            items.append((self.get_filesystem_path(metric), *plan))
            where.append(index)
        images: list[bytes | None] = [None] * len(items)
        if items and points is not None and self.native_write:
            images = self._first_images(items, [points[index] for index in where],
                                        int(time.time()) if now is None else now)
            with self._lock:
                room = self._fds.room()
            full = []
            for (path, header, total), image in zip(items, images, strict=True):
                keep = image is None or room > 0
                room -= image is not None and keep
                full.append((path, header, total, image, keep))
            items = full
        return CreateJob(self, errors, items, where, images, time.time() - started)

    def _book_created(self, job: CreateJob) -> list[Exception | float | None]:
        """``CreateJob.finish``: per request its error, the seconds a file made with its
        points took, or None; new descriptors adopted."""
        errors = job.errors
        if not job.items:
            return errors
        results = job.results
        if isinstance(results, Exception):
            for index in job.where:
                errors[index] = results
            return errors
        assert results is not None  # finish() ran run() first
        took = job.seconds / len(job.items)
        with self._lock:
            for index, item, image, result in zip(job.where, job.items, job.images, results,
                                                  strict=True):
                if isinstance(result, Exception):
                    errors[index] = result
                    continue
                if image is not None:
                    errors[index] = took
                if result is not None:
                    self._adopt_new(item[0], item[1], result.fd, image is None)
        return errors

    def _first_images(self, items: list[FileItem], points: list[array[float] | None], now: int
                      ) -> list[bytes | None]:
        """Per new file, its first bytes with ``points`` written (or None: no points,
        or an update ``write_batch`` would leave to ``write``)."""
        images: list[bytes | None] = [None] * len(items)
        wanted = [index for index, pairs in enumerate(points) if pairs is not None and pairs]
        if not wanted:
            return images
        options = () if self.python_sums is None else (self.python_sums,)
        made = update_native.first_images(
            [(items[index][1], items[index][2], points[index]) for index in wanted],
            now, aggregate, *options)
        for index, image in zip(wanted, made, strict=True):
            images[index] = image
        return images

    def _adopt_new(self, path: str, raw: bytes, fd: int, fresh: bool) -> None:
        """Keep a new file's descriptor and parsed header for its next write (``fresh``:
        nothing written since the create, so its first write needs no read)."""
        handle = self._fds.adopt_new(path, fd)
        header = self._headers.get(raw)
        if header is None:
            header = parse_header(raw, path)
            remember_header(self._headers, header)
        handle.header = header
        handle.fresh = fresh
        if not handle.cached:
            if not fresh:
                self._fds.release(handle)  # written already: nothing waits for it
                return
            old = self._created.pop(path, None)
            if old is not None:
                self._fds.release(old)
            self._created[path] = handle
            while len(self._created) > self.created_keep:
                self._fds.release(self._created.pop(next(iter(self._created))))

    def write_batch(self, items: Sequence[tuple[str, array[float]]],
                    now: int | None = None) -> list[float | None]:
        """Write many metrics' cached points in one call that releases the GIL
        (carbon.storage._whisper_writer), in the common case.

        ``items`` are (metric, points) with points as the metric cache holds them: an
        ``array('d')`` of interleaved timestamp, value pairs, not to be resized until
        this returns. Per item the seconds its update took, or None when it was left
        to ``write`` (points for coarser archives or two in one second, an unusual
        header, a replaced or missing file, an I/O error: ``write`` then does the whole
        update, or raises, as it would have). A written item stored all its points.
        """
        if not items or not self.native_write:
            return [None] * len(items)
        if now is None:
            now = int(time.time())
        calls = []
        handles: list[Handle | None] = []
        where: list[int] = []
        with self._lock:
            try:
                for index, (metric, points) in enumerate(items):
                    path, fs_path = self._path_forms(metric)
                    if "\0" in path:
                        continue  # ``write`` raises the error such a path gets
                    handle, check = self._batch_handle(path)
                    where.append(index)
                    handles.append(handle)
                    # a file made by us and not written since: header known, archives
                    # empty (nothing to read) -- unless writers share files under
                    # WHISPER_LOCK_WRITES: another one (a rebalance's merge) may have
                    # written points since the create, so the update reads the file
                    empty = handle.header.raw if (handle and handle.fresh and handle.header
                                                  and not self.lock_writes) else None
                    calls.append((fs_path, handle.fd if handle else -1,
                                  handle.dev if handle else 0, handle.ino if handle else 0,
                                  check, points, empty))
                options = () if self.python_sums is None else (self.python_sums,)
                results = update_native.update_files(
                    calls, now, self.lock_writes, self.autoflush, self.fadvise_random,
                    aggregate, *options)
            finally:
                for handle in dict.fromkeys(handles):  # a metric given twice: one release
                    if handle is not None:
                        handle.in_use = False
                        self._fds.release(handle)
        taken: list[float | None] = [None] * len(items)
        for index, (status, seconds), handle in zip(where, results, handles, strict=True):
            if handle is not None:
                handle.fresh = False  # written (or maybe in part): read it from now on
            if not status:
                taken[index] = seconds
        return taken

    def _batch_handle(self, path: str) -> tuple[Handle | None, bool]:
        """A descriptor of ``path`` for write_batch, marked in use (an eviction while the
        batch is gathered leaves it open until ``release``), and whether the C update
        must check that the path still names its file; None: C opens it for the write
        (the fd cache would not keep it) or ``write`` will say why it cannot."""
        handle = self._created.pop(path, None)
        check = False
        if handle is None:
            handle = self._fds.peek(path)
            if handle is not None:
                check = not handle.fresh
                if check:
                    handle.identify()
            elif self._fds.has_room():
                try:
                    handle = self._fds.get(path)
                except OSError:
                    handle = None
        if handle is not None:
            handle.in_use = True
        return handle, check

    def write(self, metric: str, datapoints: Iterable[tuple[float, float]],
              now: int | None = None) -> int:
        """Store ``datapoints`` (all cached points of the metric) as update_many would.

        Returns how many points were older than the file's largest retention (and so,
        as in whisper, not stored). ``now`` defaults to the current time.
        """
        points = prepare_points(datapoints)
        if not points:
            return 0
        path = self.get_filesystem_path(metric)
        with self._lock:
            handle = self._created.pop(path, None) or self._fds.take_fresh(path)
            if handle is None:
                handle = self._fds.get(path)
            fd = handle.fd
            ok = False
            try:
                with self._changing(fd):
                    header, base0 = read_header(fd, path, handle.header, self._headers)
                    handle.header = header
                    handle.fresh = False
                    if now is None:
                        now = int(time.time())
                    dropped = apply_update(fd, path, header, base0, points, now)
                ok = True
            finally:
                self._done(path, handle, ok)
        return dropped

    @contextmanager
    def _changing(self, fd: int) -> Iterator[None]:
        """Around a change of a file: WHISPER_LOCK_WRITES's flock, and WHISPER_AUTOFLUSH's
        fsync once the change is made."""
        if self.lock_writes:
            fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            yield
            if self.autoflush:
                os.fsync(fd)
        finally:
            if self.lock_writes:
                fcntl.flock(fd, fcntl.LOCK_UN)

    def _done(self, path: str, handle: Handle, ok: bool) -> None:
        """Release a handle after use; after a failure, also forget the cached one."""
        if not ok and handle.cached:
            self._fds.discard(path)
        else:
            self._fds.release(handle)

    def forget(self, metrics: Iterable[str]) -> None:
        """Close the descriptors held for ``metrics``' files (a resize replaced them)."""
        with self._lock:
            for metric in metrics:
                path = self.get_filesystem_path(metric)
                handle = self._created.pop(path, None)
                if handle is not None:
                    self._fds.release(handle)
                self._fds.discard(path)

    # -- metadata ---------------------------------------------------------------------

    def info(self, metric: str) -> dict[str, Any]:
        """The metric's header as ``whisper.info`` reports it."""
        path = self.get_filesystem_path(metric)
        with self._lock:
            handle = self._fds.get(path)
            ok = False
            try:
                header, _ = read_header(handle.fd, path, handle.header, self._headers)
                handle.header = header
                ok = True
            finally:
                self._done(path, handle, ok)
        return header.info()

    def get_metadata(self, metric: str, key: str) -> Any:
        """The value of metadata ``key``; only 'aggregationMethod' exists (ValueError else)."""
        if key not in METADATA_KEYS:
            raise ValueError('Unsupported metadata key "%s"' % key)
        return self.info(metric)["aggregationMethod"]

    def set_metadata(self, metric: str, key: str, value: Any) -> Any:
        """Set metadata ``key`` (only 'aggregationMethod'); returns the old value."""
        if key not in METADATA_KEYS:
            raise ValueError('Unsupported metadata key "%s"' % key)
        path = self.get_filesystem_path(metric)
        with self._lock:
            created = self._created.pop(path, None)
            if created is not None:  # its first write would take the old header as known
                self._fds.release(created)
            handle = self._fds.get(path)
            handle.fresh = False
            fd = handle.fd
            ok = False
            try:
                with self._changing(fd):
                    header, _ = read_header(fd, path, handle.header, self._headers)
                    packed = pack_metadata(value, header.max_retention, header.xff,
                                           len(header.archives))
                    os.pwrite(fd, packed, 0)
                    handle.header = None
                ok = True
            except ValueError:
                ok = True  # a refused value: nothing was written, the descriptor is fine
                raise
            finally:
                self._done(path, handle, ok)
        return header.aggregation_method

    # -- misc -------------------------------------------------------------------------

    def validate_archive_list(self, archive_list: Sequence[tuple[int, int]]) -> None:
        """Raise ValueError if whisper would refuse this archive list."""
        validate_archive_list(archive_list)

    @property
    def descriptor_capacity(self) -> int:
        """Descriptors this backend may hold open at once (cache plus fresh files)."""
        return self._fds.capacity + self.created_keep

    @property
    def open_files(self) -> int:
        """How many descriptors are cached right now."""
        return len(self._fds)

    def close(self) -> None:
        """Close every cached descriptor (the backend stays usable; they reopen on demand)."""
        with self._lock:
            for handle in self._created.values():
                self._fds.release(handle)
            self._created.clear()
            self._fds.close()


class CreateJob:
    """A batch of creates ``prepare_create_many`` made ready: ``run`` makes the files,
    ``finish`` (after ``run``, on the preparing thread) books them."""

    def __init__(self, database: WhisperDatabase, errors: list[Exception | float | None],
                 items: list[FileItem], where: list[int], images: list[bytes | None],
                 seconds: float) -> None:
        self.database = database
        self.errors = errors  # per request; the schema errors already in
        self.items = items  # (path, header, total[, image, keep]) of the files to make
        self.where = where  # each item's request
        self.images = images
        self.seconds = seconds  # preparing and making them, for the Written outcomes
        self.results: list[Any] | Exception | None = None

    def run(self) -> None:
        """The file-system calls (carbon.storage.whisper_create.create_many); touches no
        state of the database."""
        if not self.items:
            return
        started = time.time()
        try:
            self.results = create_many(self.items, self.database.create_options,
                                       use_native=self.database.native_create)
        except Exception as exc:  # a broken item fails its batch, never the thread
            self.results = exc
        self.seconds += time.time() - started

    def finish(self) -> list[Exception | float | None]:
        """Per request None (created), the seconds its share took (created with its
        points) or its error."""
        if self.items and self.results is None:
            self.run()
        return self.database._book_created(self)
