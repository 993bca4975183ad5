"""The creator: finds and makes the files of metrics on its own thread, a batch at a time.

The writer hands over a metric whose file it does not know to exist (``submit``) and goes
on writing others. The metric's points stay in the cache (visible to carbonlink, counted
in MAX_CACHE_SIZE) and the metric is ``busy`` (the writer does not pick it) until the
creator has looked for its file and, if there is none and a create token is free
(MAX_CREATES_PER_MINUTE's limiter), created it. The outcome then waits in ``ready`` for
the writer: None (created), ``Written`` (created with its points), EXISTED or the
create's error.

A metric with no file and no create token (MAX_CREATES_PER_MINUTE) is held aside in
``waiting``, still busy, and reported once (``on_wait``): the creator takes it up again,
oldest first, when the limiter has a token for it, without the writer picking it again
in the meantime (carbon 1.1.10 drops such a metric's points instead).

Without a create limit a batch is created at once, an existing file's FileExistsError
meaning EXISTED (one lookup a file instead of a stat and then the create's own), where the
backend says a create finds the file (``found_by_create``). The storage backend's
``exists_many`` and ``create_many`` handle a whole batch in one call each that releases
the GIL for all of its file-system calls (carbon.storage.whisper_create); backends
without them are called once a metric (the defaults of carbon.storage.backend).

Without a create limit and an update limit, and with a backend whose ``capabilities`` say
it ``writes_on_create`` (whisper), the creator takes the batch's cached points
(``pop_raw_for_write``, still visible to carbonlink) and the backend writes them in each
file's create (one write: header, zeroes, points), reported ``Written``; points it could
not write that way go back to the cache, to be written by the writer as usual, and so do
the points of a file that existed or failed. Points arriving meanwhile stay in the cache.

On that path the creator thread overlaps batches (``overlaps_creates`` backends):
CREATE_THREADS threads make the batches' files (system calls only, the GIL released;
ext4 makes files of different directories in parallel), up to IN_FLIGHT batches handed
over per thread, while the creator prepares the next (schemas, first images) and books
the ones made, so the file system is not left waiting for Python. Batches are booked in
the order they were prepared; a batch's outcomes are handed out once its files are made.
"""

from __future__ import annotations

import threading
import time
from array import array
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable, Iterable, NamedTuple, Union

from carbon.cache.journal import Journal
from carbon.cache.store import MetricCache
from carbon.config.schemas import Schema, SchemaFiles
from carbon.config.settings import Settings
from carbon.logs import CarbonLog
from carbon.storage.backend import CreateJob, CreateRequest, CreateResult, StorageBackend
from carbon.writer.ratelimit import CreateTokens, RateLimiter, Unlimited

__all__ = ["Creator", "CreatorConfig", "EXISTED", "Outcome", "Written"]

EXISTED = "existed"
_NO_TOKEN = "no token"  # an outcome that is never handed out: the metric waits


#: (metric, storage schema, aggregation schema) of a metric to create
_Match = tuple[str, Schema, Schema]


class _InFlight(NamedTuple):
    """A batch whose files another thread is making (``_start_overlapped``)."""

    metrics: list[str]
    matched: list[_Match]
    points: list[array[float]]
    job: CreateJob
    made: Future[None]
    mark: int


class Written(NamedTuple):
    """A file created with the metric's points in it: how many, and the seconds its
    share of the create took (the points are on disk and out of the cache)."""

    points: int
    seconds: float


Outcome = Union[None, str, Exception, Written]

BATCH_SIZE = 256  # files a batch at most
# outcomes not yet taken by the writer: the creator waits beyond this (the writer may be
# busy handing over a burst of new metrics while the first batches' outcomes wait)
MAX_READY = 8192
IN_FLIGHT = 2  # batches handed to each file thread and not booked yet: one made, one next
MAX_TOKEN_WAIT = 1.0  # seconds the creator sleeps at most for a token (rate changes)


@dataclass(frozen=True)
class CreatorConfig:
    """What the Creator reads of carbon.conf, built once (``from_settings``, by
    ``WriterConfig``); the defaults are carbon.config.defaults'."""

    create_threads: int  # CREATE_THREADS
    log_creates: bool  # LOG_CREATES

    @classmethod
    def from_settings(cls, settings: Settings) -> CreatorConfig:
        return cls(create_threads=max(1, int(settings["CREATE_THREADS"])),
                   log_creates=bool(settings["LOG_CREATES"]))


def _plain(error: CreateResult) -> Outcome:
    """A create's result without points: None (created) or its error."""
    return None if isinstance(error, float) else error


class Creator:
    """Submitted metrics -> one thread -> ``ready`` (metric, outcome).

    ``busy`` holds every metric claimed and not yet released after ``take_ready_many``;
    each has points in the cache (only the writer removes them).
    """

    def __init__(self, database: StorageBackend, schemas: SchemaFiles, config: CreatorConfig,
                 log: CarbonLog,
                 limiter: RateLimiter | None = None,
                 on_wait: Callable[[], None] = lambda: None,
                 cache: MetricCache | None = None, updates: RateLimiter | None = None) -> None:
        self.database = database
        self.capabilities = database.capabilities
        self.schemas = schemas
        self.config = config
        self.log = log
        # MAX_CREATES_PER_MINUTE's limiter (a rate-limiter plugin)
        self.tokens = CreateTokens(limiter if limiter is not None else Unlimited())
        self.on_wait = on_wait  # a metric starts waiting for a create token
        # the MetricCache whose points a create may write (None: never) while
        # MAX_UPDATES_PER_SECOND's limiter (``updates``) is unlimited (a write by the
        # create pays no update token), and the journal told when they are on disk
        # (set by the writer)
        self.cache = cache
        self.updates = updates if updates is not None else Unlimited()
        self.journal: Journal | None = None
        self.cond = threading.Condition()
        self.pending: deque[str] = deque()  # submitted, not looked for yet: oldest first
        self.waiting: deque[str] = deque()  # no file, no token yet: oldest first
        self.ready: deque[tuple[str, Outcome]] = deque()
        self.busy: set[str] = set()
        self.batch_size = BATCH_SIZE
        self.max_ready = MAX_READY
        self.stopping = False
        self.thread: threading.Thread | None = None
        self.overlap: ThreadPoolExecutor | None = None  # makes files (creator thread only)
        self.create_threads = config.create_threads
        self.inflight: deque[_InFlight] = deque()  # oldest first

    # -- writer side ------------------------------------------------------------------
    def claim(self, metric: str) -> None:
        """Mark ``metric`` busy now, to be handed over with ``submit_many`` soon (the
        writer gathers a batch; only the thread that submits and takes metrics changes
        ``busy``)."""
        self.busy.add(metric)

    def submit_many(self, metrics: list[str]) -> None:
        """Find or create the files of ``metrics`` (each ``claim``ed) soon, in order; one
        lock for all."""
        if not metrics:
            return
        with self.cond:
            self.pending.extend(metrics)
            self.cond.notify_all()

    def take_ready_many(self, limit: int) -> list[tuple[str, Outcome]]:
        """Up to ``limit`` handled metrics and their outcomes, oldest first, under one
        lock; each stays busy until the caller ``release``s it."""
        if not self.ready:
            return []
        with self.cond:
            ready = self.ready
            taken = [ready.popleft() for _ in range(min(limit, len(ready)))]
            if len(ready) < self.max_ready:
                self.cond.notify_all()
            return taken

    def release(self, metric: str) -> None:
        """A metric taken with ``take_ready_many`` is no longer busy (only the thread
        that submits and takes metrics changes ``busy``)."""
        self.release_many((metric,))

    def release_many(self, metrics: Iterable[str]) -> None:
        """``release`` of each metric."""
        busy = self.busy
        for metric in metrics:
            busy.discard(metric)
        if not busy:
            busy.clear()  # an emptied set keeps its table (sized for its peak) else

    def wait(self, timeout: float) -> None:
        """Block until an outcome is ready (at most ``timeout``); without the thread,
        handle a batch here."""
        if not self.alive():
            if not self.handle_batch() and self.waiting and not self.ready:
                time.sleep(min(timeout, max(self.tokens.seconds_until(), 0.0)))
            return
        with self.cond:
            if not self.ready and self.busy:
                self.cond.wait(timeout)

    def wake(self) -> None:
        """Look for create tokens now (the create rate changed)."""
        with self.cond:
            self.cond.notify_all()

    # -- creating ---------------------------------------------------------------------
    def handle_batch(self) -> int:
        """Handle up to ``batch_size`` pending metrics, else waiting ones a token is free
        for; returns how many metrics were handled (0: none, or no waiting one got a
        token after all)."""
        retried = False
        with self.cond:
            pending = self.pending
            batch = [pending.popleft() for _ in range(min(self.batch_size, len(pending)))]
            free = self.tokens.free() if not batch and self.waiting else 0.0
            if free >= 1.0:  # as many as there are tokens for (each is looked for again)
                retried = True
                while self.waiting and len(batch) < min(self.batch_size, free):
                    batch.append(self.waiting.popleft())
        if not batch:
            return 0
        started = self._start_overlapped(batch) if not retried else None
        if started is not None:
            inflight = self.inflight
            inflight.append(started)
            most = IN_FLIGHT * self.create_threads
            while inflight and (len(inflight) > most or inflight[0].made.done()):
                self._post_oldest()
            return len(batch)
        self._post_inflight()
        outcomes = self._outcomes(batch)
        done = [(metric, outcome) for metric, outcome in zip(batch, outcomes, strict=True)
                if outcome is not _NO_TOKEN]
        held = [metric for metric, outcome in zip(batch, outcomes, strict=True)
                if outcome is _NO_TOKEN]
        with self.cond:
            self.ready.extend(done)
            if retried:
                self.waiting.extendleft(reversed(held))  # they keep their turn
            else:
                self.waiting.extend(held)
            self.cond.notify_all()
        if not retried:
            for _ in held:
                self.on_wait()
            return len(batch)
        return len(done)

    def _outcomes(self, metrics: list[str]) -> list[Outcome]:
        if self.tokens.unlimited() and self._found_by_create(metrics):
            return self._create_or_find(metrics)
        try:
            found = self._exists(metrics)
        except Exception as exc:  # a broken backend must not stop the creator
            return [exc] * len(metrics)
        outcomes: list[Outcome] = [EXISTED if present else _NO_TOKEN for present in found]
        wanted = [index for index, present in enumerate(found)
                  if not present and self.tokens.take()]
        if wanted:
            errors = self._create([metrics[index] for index in wanted])
            for index, error in zip(wanted, errors, strict=True):
                outcomes[index] = _plain(error)
        return outcomes

    def _create_or_find(self, metrics: list[str]) -> list[Outcome]:
        """Without a create limit: create every file at once, an existing one reported
        EXISTED (its create fails without touching it): one file-system lookup a metric
        instead of a stat and then the create's own."""
        if not self._takes_points():
            errors = self._create(metrics, log_after=True)
            return [EXISTED if isinstance(error, FileExistsError) else _plain(error)
                    for error in errors]
        points, mark = self._take_points(metrics)
        errors = self._create(metrics, log_after=True, points=points)  # never raises
        return self._booked(metrics, points, errors, mark)

    def _found_by_create(self, metrics: list[str]) -> bool:
        """Whether the backend's create finds each metric's existing file."""
        return all(map(self.database.found_by_create, metrics))

    def _takes_points(self) -> bool:
        """Whether a create writes the cached points (no update limit: the write pays no
        update token; a backend that ``writes_on_create``)."""
        return self.cache is not None and self.capabilities.writes_on_create \
            and self.updates.unlimited

    def _take_points(self, metrics: list[str]) -> tuple[list[array[float]], int]:
        """The metrics' cached points for their creates (still visible to carbonlink),
        and the journal's mark for ``_booked`` (only where ``_takes_points``)."""
        assert self.cache is not None
        journal = self.journal
        mark = journal.mark() if journal is not None else 0
        return self.cache.pop_raw_for_write(metrics), mark

    def _start_overlapped(self, metrics: list[str]) -> _InFlight | None:
        """``_create_or_find`` with the cached points, its files made on the overlap
        thread; None where that path does not apply (no overlap thread, a create or
        update limit, a backend that finds files otherwise or cannot split a create)."""
        if self.overlap is None or not self.tokens.unlimited() or not self._takes_points() \
                or not self.capabilities.overlaps_creates \
                or not self._found_by_create(metrics):
            return None
        try:
            matched = self._matched(metrics)
        except Exception:  # a broken schema: the plain path reports it per metric
            return None
        points, mark = self._take_points(metrics)
        try:
            job = self.database.prepare_create_many(self._requests(matched), points)
        except Exception as exc:  # e.g. memory for the images: nothing made
            job = _Failed(exc, len(metrics))
        return _InFlight(metrics, matched, points, job, self.overlap.submit(job.run), mark)

    def _post_inflight(self) -> None:
        """Book every batch in flight, oldest first."""
        while self.inflight:
            self._post_oldest()

    def _post_oldest(self) -> None:
        """Wait for the oldest batch in flight's files, then hand its outcomes out."""
        inflight = self.inflight.popleft()
        inflight.made.result()  # run() keeps its errors for finish()
        try:
            errors = inflight.job.finish()
        except Exception as exc:  # a broken backend must not stop the creator
            errors = [exc] * len(inflight.metrics)
        if self.config.log_creates:
            self._log_made(inflight.matched, errors)
        outcomes = self._booked(inflight.metrics, inflight.points, errors, inflight.mark)
        with self.cond:
            self.ready.extend(zip(inflight.metrics, outcomes, strict=True))
            self.cond.notify_all()

    def _booked(self, metrics: list[str], points: list[array[float]],
                errors: list[CreateResult], mark: int) -> list[Outcome]:
        """Outcomes of a create that took the metrics' cached points: points on disk are
        done in the journal, the others go back to the cache."""
        cache, journal = self.cache, self.journal
        assert cache is not None  # points were taken from it
        outcomes: list[Outcome] = []
        written: list[str] = []
        for metric, raw, error in zip(metrics, points, errors, strict=True):
            if isinstance(error, float):
                written.append(metric)
                outcomes.append(Written(len(raw) >> 1, error))
                continue
            if raw:  # not on disk: back to the cache, for the writer
                cache.restore_raw(metric, raw)
            outcomes.append(EXISTED if isinstance(error, FileExistsError) else error)
        cache.written(*metrics)
        if journal is not None and written:
            journal.done(written, mark)
        return outcomes

    def _exists(self, metrics: list[str]) -> list[bool]:
        return self.database.exists_many(metrics)

    def _create(self, metrics: list[str], log_after: bool = False,
                points: list[array[float]] | None = None) -> list[CreateResult]:
        """Create the files (with ``points``: see ``WhisperDatabase.create_many``);
        LOG_CREATES lines before each create, or with ``log_after`` after them for the
        files created (an existing one is not logged)."""
        try:
            return self._create_all(metrics, log_after, points)
        except Exception as exc:  # a broken backend or schema must not stop the creator
            return [exc] * len(metrics)

    def _log_create(self, metric: str, storage: Schema, aggregation: Schema) -> None:
        """carbon's three LOG_CREATES lines for a metric and its matched schemas."""
        xff, method = aggregation.value
        self.log.creates("new metric %s matched schema %s" % (metric, storage.name))
        self.log.creates("new metric %s matched aggregation schema %s"
                         % (metric, aggregation.name))
        self.log.creates("creating database metric %s (archive=%s xff=%s agg=%s)"
                         % (metric, storage.value, xff, method))

    def _create_all(self, metrics: list[str], log_after: bool,
                    points: list[array[float]] | None = None) -> list[CreateResult]:
        matched = self._matched(metrics)
        log_creates = self.config.log_creates
        if log_creates and not log_after:
            for match in matched:
                self._log_create(*match)
        requests = self._requests(matched)
        create_many = self.database.create_many
        errors = create_many(requests) if points is None else create_many(requests, points)
        if log_creates and log_after:
            self._log_made(matched, errors)
        return errors

    def _log_made(self, matched: list[_Match], errors: list[CreateResult]) -> None:
        """LOG_CREATES lines after a batch's creates, for each file not found existing."""
        for match, error in zip(matched, errors, strict=True):
            if not isinstance(error, FileExistsError):
                self._log_create(*match)

    def _matched(self, metrics: list[str]) -> list[_Match]:
        """(metric, storage schema, aggregation schema) of each metric."""
        return [(metric, *self.schemas.for_metric(metric)) for metric in metrics]

    @staticmethod
    def _requests(matched: list[_Match]) -> list[CreateRequest]:
        """The backend's (metric, retentions, xff, method) create requests."""
        return [(metric, storage.value, *aggregation.value)
                for metric, storage, aggregation in matched]

    # -- thread -----------------------------------------------------------------------
    def run(self) -> None:
        try:
            self._run()
        finally:
            self._post_inflight()

    def _run(self) -> None:
        while True:
            with self.cond:
                while not self.stopping and len(self.ready) >= self.max_ready:
                    self.cond.wait()
                while not self.stopping and not self.pending and not self.inflight:
                    if not self.waiting:
                        self.cond.wait()
                        continue
                    wait = self.tokens.seconds_until()
                    if wait <= 0.0:
                        break
                    self.cond.wait(min(wait, MAX_TOKEN_WAIT))
                if self.stopping:
                    return
                idle = not self.pending and bool(self.inflight)
            if idle:  # nothing new to prepare: book the oldest batch in flight
                self._post_oldest()
            elif not self.handle_batch():
                time.sleep(0.05)  # no token after all (a limiter that cannot tell)

    def alive(self) -> bool:
        return self.thread is not None and self.thread.is_alive()

    def start(self) -> None:
        if self.alive():
            return
        self.stopping = False
        if self.capabilities.overlaps_creates:
            self.overlap = ThreadPoolExecutor(self.create_threads,
                                              thread_name_prefix="carbon-creator-files")
        self.thread = threading.Thread(target=self.run, name="carbon-creator", daemon=True)
        self.thread.start()

    def stop(self, timeout: float | None = None) -> None:
        """Stop after the batch in hand; pending metrics stay pending."""
        with self.cond:
            self.stopping = True
            self.cond.notify_all()
        if self.thread is not None:
            self.thread.join(timeout)
        if self.overlap is not None and not self.alive():
            self.overlap.shutdown()
            self.overlap = None


class _Failed:
    """A CreateJob stand-in for a batch whose preparation failed: every request fails."""

    def __init__(self, error: Exception, count: int) -> None:
        self.error, self.count = error, count

    def run(self) -> None:
        pass

    def finish(self) -> list[Exception | float | None]:
        return [self.error] * self.count
