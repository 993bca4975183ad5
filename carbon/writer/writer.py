"""The writer: drains the cache into the storage backend on its own thread."""

from __future__ import annotations

import errno
import os
import threading
import time
from collections import deque
from array import array
from dataclasses import dataclass
from typing import cast

from carbon.cache.store import MetricCache, dedupe_sorted
from carbon.cache.strategies import Strategy
from carbon.cache.journal import Journal
from carbon.config.schemas import SchemaFiles
from carbon.config.settings import Settings
from carbon.instrumentation.stats import Stats
from carbon.logs import CarbonLog, IntervalLog
from carbon.storage.backend import StorageBackend
from carbon.storage.whisper_format import (METADATA_SIZE, CorruptWhisperFile, header_size,
                                           parse_header)
from carbon.writer.creator import Creator, CreatorConfig, Outcome, Written
from carbon.writer.ratelimit import make_limiter
from carbon.writer.schemacheck import SchemaCheck
from carbon.writer.tagfeed import TagFeed

INF = float("inf")
BATCH_SIZE = 64  # metrics a write batch at most
# Errors that mean the disk (not the file) is in trouble: the points are kept and the
# writer waits DISK_RETRY_SECONDS before it tries again.
DISK_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EROFS})
DISK_RETRY_SECONDS = 1.0
# WRITER_MIN_PASS_SECONDS gathers points only while they come in: after this long without
# a new point the cache is written at once.
PACE_QUIET_SECONDS = 0.2
# Under MAX_UPDATES_PER_SECOND a writer waits for this long's worth of update tokens at
# once (one at the lowest rates, at most a batch), not for one token an update: the rate
# is the same, and a pass's fixed cost (choosing, the journal, counting) is paid once a
# batch instead of once an update (at the default 500 a second: batches of 25).
UPDATE_BATCH_SECONDS = 0.05
MAX_TORN_HEADER = 65536  # a file shorter than a header this long is an interrupted create


def disk_trouble(error: BaseException) -> bool:
    """Whether ``error`` says the file system cannot take writes now (full, failing)."""
    return isinstance(error, OSError) and error.errno in DISK_ERRNOS


@dataclass(frozen=True)
class WriterConfig:
    """What the Writer (and its Creator) read of carbon.conf, built once
    (``from_settings``); the defaults are carbon.config.defaults'. A SIGHUP puts the
    running limiters' new rates in place and a new config (``CacheDaemon.reload``)."""

    rate_limiter: str  # RATE_LIMITER
    max_updates_per_second: float  # MAX_UPDATES_PER_SECOND
    # MAX_UPDATES_PER_SECOND_ON_SHUTDOWN, else MAX_UPDATES_PER_SECOND: the drain's rate
    max_updates_per_second_on_shutdown: float
    max_creates_per_minute: float  # MAX_CREATES_PER_MINUTE
    threads: int  # WRITER_THREADS
    known_files: int  # WRITER_KNOWN_FILES
    min_pass_seconds: float  # WRITER_MIN_PASS_SECONDS
    max_cache_size: float  # MAX_CACHE_SIZE (pacing stops at half of it)
    log_updates: bool  # LOG_UPDATES
    creator: CreatorConfig

    @classmethod
    def from_settings(cls, settings: Settings) -> WriterConfig:
        updates = float(settings["MAX_UPDATES_PER_SECOND"])
        return cls(
            rate_limiter=settings["RATE_LIMITER"],
            max_updates_per_second=updates,
            max_updates_per_second_on_shutdown=float(
                settings["MAX_UPDATES_PER_SECOND_ON_SHUTDOWN"] or updates),
            max_creates_per_minute=float(settings["MAX_CREATES_PER_MINUTE"]),
            threads=max(1, int(settings["WRITER_THREADS"])),
            known_files=max(1, int(settings["WRITER_KNOWN_FILES"])),
            min_pass_seconds=float(settings["WRITER_MIN_PASS_SECONDS"] or 0),
            max_cache_size=float(settings["MAX_CACHE_SIZE"]),
            log_updates=bool(settings["LOG_UPDATES"]),
            creator=CreatorConfig.from_settings(settings))


class _Unavailable:
    """Metrics the writer cannot take now: with the creator, in flight or paused (a
    resize is replacing their files) (live sets)."""

    __slots__ = ("busy", "in_flight", "paused")

    def __init__(self, busy: set[str], in_flight: set[str], paused: set[str]) -> None:
        self.busy, self.in_flight, self.paused = busy, in_flight, paused

    def __contains__(self, metric: object) -> bool:
        return metric in self.busy or metric in self.in_flight or metric in self.paused

    def __bool__(self) -> bool:
        return bool(self.busy or self.in_flight or self.paused)


class Writer:
    """Writes metrics chosen by the write strategy, in batches of up to BATCH_SIZE that
    the storage backend may write in one call (WhisperDatabase.write_batch).

    MAX_UPDATES_PER_SECOND and MAX_CREATES_PER_MINUTE are rate-limiter plugins.
    Unlike carbon 1.1.10, a create that has to wait for a token keeps its points
    in the cache instead of dropping them. Files are created by a ``Creator`` thread
    in batches while the writer goes on with other metrics.
    """

    def __init__(self, cache: MetricCache, strategy: Strategy, database: StorageBackend,
                 schemas: SchemaFiles, config: WriterConfig, stats: Stats, log: CarbonLog
                 ) -> None:
        self.cache = cache
        self.strategy = strategy
        self.database = database
        self.schemas = schemas
        self.config = config
        self.stats = stats
        self.log = log
        limiter = config.rate_limiter
        self.update_limiter = make_limiter(limiter, config.max_updates_per_second)
        per_minute = config.max_creates_per_minute
        self.create_limiter = make_limiter(limiter, per_minute / 60.0 if per_minute != INF
                                           else INF, capacity=per_minute)
        self.errors = IntervalLog(log.msg, "write errors")
        self.disk_errors = IntervalLog(log.msg, "writes refused by the disk (points kept)",
                                       samples=1)
        self.retry_at = 0.0  # monotonic time before which a disk in trouble is left alone
        self.stop_event = threading.Event()
        self.tag_feed: TagFeed | None = None
        # Several threads overlap file-system calls (creates above all); one metric is
        # never written by two threads at once.
        self.thread_count = config.threads
        self.choose_lock = threading.Lock()
        self.in_flight: set[str] = set()
        self.held: list[str] = []  # chosen (in flight) while no update token was free
        self.spare = 0  # update tokens paid for and not used yet
        self.update_rate = config.max_updates_per_second  # the limiter's, set_update_rate
        self.threads: list[threading.Thread] = []
        # Files are looked for and made on the creator's thread, a batch at a time, so a
        # write never waits for a create; ``known`` metrics have files (no stat needed:
        # a file deleted since shows as FileNotFoundError on write).
        self.creator = Creator(database, schemas, config.creator, log, self.create_limiter,
                               self._create_waits, cache, self.update_limiter)
        self.known: set[str] = set()
        # creator outcomes taken in one go and not handled yet (still busy), and metrics
        # claimed for the creator and not handed over yet (both under choose_lock)
        self.returned: deque[tuple[str, Outcome]] = deque()
        self.unsubmitted: list[str] = []
        self.known_limit = config.known_files
        # Metrics whose files a resize is replacing (``pause``/``resume``, under
        # choose_lock): their points stay in the cache (and visible to carbonlink) until
        # the new file is in place, so none is written into a file about to be replaced.
        self.paused: set[str] = set()
        # carbon.writer.schemacheck.SchemaCheck: existing files against the schema rules
        self.schema_check: SchemaCheck | None = None
        strategy.skip = _Unavailable(self.creator.busy, self.in_flight, self.paused)
        # WRITER_MIN_PASS_SECONDS: a pass over the cache starts at most this often, so
        # while points pour in a metric is written with more of them at a time (fewer
        # whisper updates a point); 1 s by default (0: off), never while draining, with
        # the cache half full, or once the input has gone quiet (``_paced``).
        self.min_pass = config.min_pass_seconds
        self.pace_below = config.max_cache_size / 2
        self.pacing = self.min_pass > 0
        self.seen_received = -1  # cache.received when _paced last saw it change
        self.received_at = 0.0

    @property
    def journal(self) -> Journal | None:
        """carbon.cache.journal.Journal, told what is on disk (by the creator too)."""
        return self.creator.journal

    @journal.setter
    def journal(self, journal: Journal | None) -> None:
        self.creator.journal = journal

    # -- one step -------------------------------------------------------
    def _choose(self) -> tuple[str | bool, bool]:
        """(choice, submitted): the next metric to write, else True if a creator outcome
        was handled (choose again) or False (nothing to write now); and whether metrics
        were handed to the creator on the way.

        A metric back from the creator comes first; others come from the strategy,
        skipping metrics other threads hold or the creator has. A metric whose file is
        not known to exist goes to the creator, and the choice goes on.
        """
        if self.held:
            return self.held.pop(), False
        creator = self.creator
        returned = self.returned
        if not returned and creator.ready:
            returned.extend(creator.take_ready_many(BATCH_SIZE))
        if returned:
            if type(returned[0][1]) is Written:
                self._book_written()
                return True, False
            metric, outcome = returned.popleft()
            creator.release(metric)
            if isinstance(outcome, Exception):  # (neither None, EXISTED nor Written)
                self._create_failed(metric, outcome)
                return True, False
            if outcome is None:
                self._created(metric)
            self._known(metric)
            if outcome is not None and self.schema_check is not None:
                self.schema_check.offer(metric)  # an existing file: does it follow the rules?
            if metric in self.paused:
                return True, False  # its points wait in the cache for ``resume``
            return metric, False
        submitted = False
        skipped = 0
        known, busy, in_flight, data = self.known, creator.busy, self.in_flight, self.cache.data
        paused = self.paused
        while skipped <= len(in_flight) + len(busy) + len(paused):
            if len(data) <= len(busy):
                break  # every metric left is with the creator
            chosen = self.strategy.choose()
            if chosen is None:
                break
            if chosen in in_flight or chosen in busy or chosen in paused:
                skipped += 1
                continue
            if chosen not in known:
                self._claim(chosen)
                submitted = True
                continue
            return chosen, submitted
        return False, submitted

    def _book_written(self) -> None:
        """The metrics at the front of ``returned`` whose files were made with their
        points (``Written``): released, counted (creates, committedPoints,
        updateTimes), known, logged (LOG_CREATES is the creator's; LOG_UPDATES here) and
        given to the tag feed; all at once, on the writer's thread, while the creator's
        thread makes the next files."""
        returned = self.returned
        written: list[tuple[str, Written]] = []
        while returned and type(returned[0][1]) is Written:
            metric, outcome = returned.popleft()
            written.append((metric, cast(Written, outcome)))
        self.creator.release_many(metric for metric, _ in written)
        stats = self.stats
        stats.increment("creates", len(written))
        stats.increment("committedPoints", sum(outcome.points for _, outcome in written))
        stats.append_many("updateTimes", [outcome.seconds for _, outcome in written])
        self._known_many([metric for metric, _ in written])
        feed = self.tag_feed
        if feed is not None:
            for metric, _ in written:
                feed.created(metric)
                feed.updated(metric)
        if self.config.log_updates:
            for metric, outcome in written:
                self._log_update(metric, outcome.points, outcome.seconds, 0.0)

    def _claim(self, metric: str) -> None:
        """Claim a metric with no known file for the creator, handed over a batch at a
        time (``_submit``)."""
        self.creator.claim(metric)
        self.unsubmitted.append(metric)
        if len(self.unsubmitted) >= self.creator.batch_size:
            self._submit()

    def _submit(self) -> None:
        """Hand the metrics claimed for the creator over, in one call."""
        if self.unsubmitted:
            self.creator.submit_many(self.unsubmitted)
            self.unsubmitted = []

    def _take(self, limit: int, paid: int) -> tuple[list[str], bool]:
        """Up to ``limit`` metrics to write (now in flight), and whether something other
        than a write was done. With MAX_UPDATES_PER_SECOND every metric taken costs one
        update token: the first ``paid`` ones paid for by the caller (``_pay``), each
        further one a token free at once. A token buys a write only: handing metrics to the
        creator or taking back a deferred create costs none, a metric chosen when no
        token is free is held for the next call, and a paid token left unused is kept
        (``spare``): otherwise creates waiting for tokens (shutdown) would eat the
        update rate."""
        limiter = self.update_limiter
        limited = not limiter.unlimited
        if not limited and not self.held and not self.returned and not self.creator.ready:
            return self._take_many(limit)
        taken: list[str] = []
        did = False
        with self.choose_lock:
            tokens = paid
            try:
                while len(taken) < limit:
                    choice, submitted = self._choose()
                    did = did or submitted
                    if choice is True:
                        did = True
                        continue
                    if choice is False:
                        break
                    if limited:
                        if tokens:
                            tokens -= 1
                        elif not limiter.take(blocking=False):
                            self.in_flight.add(choice)
                            self.held.append(choice)
                            break
                    self.in_flight.add(choice)
                    taken.append(choice)
            finally:
                self.spare += tokens
                self._submit()  # what this call claimed for the creator
            return taken, did

    def _take_many(self, limit: int) -> tuple[list[str], bool]:
        """``_take`` without an update limit and with no creator outcome to handle: the
        strategy's next metrics in one call (``choose_many``), those without a known
        file claimed for the creator, the rest taken, as ``_choose`` one at a time
        would."""
        creator = self.creator
        busy, in_flight, paused, known = creator.busy, self.in_flight, self.paused, self.known
        with self.choose_lock:
            if self.held or self.returned or creator.ready:  # another thread's, meanwhile
                return [], True
            if len(self.cache.data) <= len(busy):
                return [], False  # every metric left is with the creator
            taken: list[str] = []
            submitted = False
            # a strategy leaves out what the writer cannot take (``skip``); one that
            # does not gets this many more rounds that take and claim nothing
            idle = 2 + (len(in_flight) + len(busy) + len(paused)) // limit
            try:
                while len(taken) < limit and idle:
                    chosen = self.strategy.choose_many(limit - len(taken))
                    if not chosen:
                        break
                    free = [metric for metric in chosen if metric not in in_flight and
                            metric not in busy and metric not in paused]
                    got = [metric for metric in free if metric in known]
                    if len(got) < len(free):
                        for metric in free:
                            if metric not in known:
                                self._claim(metric)
                        submitted = True
                    elif not got:
                        idle -= 1
                    in_flight.update(got)
                    taken.extend(got)
            finally:
                self._submit()  # what this call claimed for the creator
            return taken, submitted

    def _spare_tokens(self, limit: int) -> int:
        """Use up to ``limit`` tokens earlier calls paid for and did not use."""
        with self.choose_lock:
            used = min(self.spare, limit)
            self.spare -= used
            return used

    def _pay(self, limit: int) -> tuple[int, bool, float]:
        """Update tokens for a write of up to ``limit`` metrics: (how many, whether they
        were kept from earlier calls, seconds waited). New ones are UPDATE_BATCH_SECONDS
        of the rate at once (at least one, at most ``limit``), waited for in one
        ``take``."""
        kept = self._spare_tokens(limit)
        if kept:
            return kept, True, 0.0
        rate = self.update_rate
        want = max(1, min(limit, int(rate * UPDATE_BATCH_SECONDS))) if rate != INF else 1
        started = time.time()
        self.update_limiter.take(want)
        return want, False, time.time() - started

    def set_update_rate(self, rate: float) -> None:
        """MAX_UPDATES_PER_SECOND now (a reload, or the shutdown rate)."""
        self.update_rate = rate
        self.update_limiter.set_rate(rate, rate)

    def _known(self, metric: str) -> None:
        """Remember that ``metric``'s file exists (at most WRITER_KNOWN_FILES: forgotten
        all at once)."""
        if len(self.known) >= self.known_limit:
            self.known.clear()
        self.known.add(metric)

    def _known_many(self, metrics: list[str]) -> None:
        """``_known`` of each metric (one set update while they fit)."""
        if len(self.known) + len(metrics) > self.known_limit:
            for metric in metrics:
                self._known(metric)
        else:
            self.known.update(metrics)

    def _create_waits(self) -> None:
        """A new metric waits for a create token (its points stay cached)."""
        self.stats.increment("deferredCreates")

    def _created(self, metric: str) -> None:
        self.stats.increment("creates")
        if self.tag_feed is not None:
            self.tag_feed.created(metric)

    def _create_failed(self, metric: str, error: Exception) -> None:
        """As carbon: the points of a metric whose file cannot be created are dropped,
        unless the disk is full or failing: then they stay for a later try."""
        self.stats.increment("errors")
        if disk_trouble(error):
            self._disk_trouble("Error creating %s: %s" % (metric, error))
            return
        mark = self.journal.mark() if self.journal is not None else 0
        self.cache.pop(metric)
        if self.journal is not None:
            self.journal.done([metric], mark)
        self.errors.record("Error creating %s: %s" % (metric, error))

    def _disk_trouble(self, message: str) -> None:
        self.retry_at = time.monotonic() + DISK_RETRY_SECONDS
        self.disk_errors.record(message)

    def _paced(self) -> bool:
        """Whether passes wait WRITER_MIN_PASS_SECONDS now: while points come in. Not
        with the cache at half its bound, nor once no point has come in for
        PACE_QUIET_SECONDS (nothing more to gather: what is cached is written now, so a
        burst is on disk as soon as it ends). A drain turns pacing off."""
        if self.cache.size >= self.pace_below:
            return False
        received, now = self.cache.received, time.monotonic()
        if received != self.seen_received:
            self.seen_received, self.received_at = received, now
            return True
        return now - self.received_at < PACE_QUIET_SECONDS

    def write_some(self, limit: int = BATCH_SIZE) -> bool:
        """Write up to ``limit`` metrics, as one batch where the backend takes batches.
        Returns False when there was nothing to do."""
        creator = self.creator
        if self.retry_at and time.monotonic() < self.retry_at:
            return False  # the disk refused writes a moment ago
        if self.pacing:
            self.strategy.min_pass = self.min_pass if self._paced() else 0.0
        if not creator.ready and not self.returned:
            if not self.cache:
                return False
            if len(self.cache) <= len(creator.busy):
                creator.wait(0.05)  # only creates in progress: wait for one
                return True
        # Wait for the update token before taking a metric, so points waiting on the rate
        # limit stay in the cache (and visible to carbonlink) rather than in a thread.
        paid, kept_tokens, waited = 0, False, 0.0
        if not self.update_limiter.unlimited:
            paid, kept_tokens, waited = self._pay(limit)
        metrics, busy = self._take(limit, paid)
        if not metrics:
            if kept_tokens and not busy:
                return False  # kept tokens and still nothing to write: idle
            return busy
        journal = self.journal
        mark = journal.mark() if journal is not None else 0
        try:
            kept = self._write(metrics, self.cache.pop_raw_for_write(metrics), waited)
        finally:
            self.cache.written(*metrics)
            self.in_flight.difference_update(metrics)
        if journal is not None:
            journal.done([metric for metric in metrics if metric not in kept] if kept
                         else metrics, mark)
        return True

    def _write(self, metrics: list[str], taken: list[array[float]], waited: float
               ) -> set[str]:
        """Store each metric's points: the backend's batch call where it has one, then
        ``write`` for what the batch left. Returns the metrics whose points went back
        to the cache."""
        times: list[float | None] = [None] * len(metrics)
        try:
            times = self.database.write_batch(list(zip(metrics, taken, strict=True)))
        except Exception as exc:  # the metric-by-metric path below still stores them
            self.errors.record("batch write: %s" % exc)
        committed = 0
        kept: set[str] = set()
        # without a tag feed or LOG_UPDATES a write is only counted: at once, below
        plain = self.tag_feed is None and not self.config.log_updates
        update_times: list[float] = []
        for metric, raw, took in zip(metrics, taken, times, strict=True):
            if took is None:
                if self.retry_at and time.monotonic() < self.retry_at and len(raw):
                    self.cache.restore_raw(metric, raw)  # the disk refused the last one
                    kept.add(metric)
                    continue
                count, took = self._store_one(metric, raw)
                if took is None:
                    if count < 0:
                        kept.add(metric)
                    continue
            else:
                count = len(raw) >> 1
            if not count:
                continue
            committed += count
            if plain:
                update_times.append(took)
            else:
                self._committed(metric, count, took, waited)
            waited = 0.0
        if committed:
            self.stats.increment("committedPoints", committed)
        if update_times:
            self.stats.append_many("updateTimes", update_times)
        return kept

    def _committed(self, metric: str, count: int, took: float, waited: float) -> None:
        """``count`` points of ``metric`` are on disk (``took`` seconds, after waiting
        ``waited`` for a token): the tag feed, updateTimes and LOG_UPDATES."""
        if not count:
            return
        if self.tag_feed is not None:
            self.tag_feed.updated(metric)
        self.stats.append("updateTimes", took)
        if self.config.log_updates:
            self._log_update(metric, count, took, waited)

    def _log_update(self, metric: str, count: int, took: float, waited: float) -> None:
        """carbon's LOG_UPDATES line for one write (with the wait for a token if any)."""
        if waited > 0.001:
            self.log.updates("wrote %d datapoints for %s in %.5f seconds after waiting "
                             "%.5f seconds" % (count, metric, took, waited))
        else:
            self.log.updates("wrote %d datapoints for %s in %.5f seconds"
                             % (count, metric, took))

    def _store_one(self, metric: str, raw: array[float]) -> tuple[int, float | None]:
        """One metric through the backend's ``write``: (points, seconds), seconds None
        when nothing was written, and then points -1 when they went back to the cache."""
        points = dedupe_sorted(raw)
        if not points:
            return 0, None
        try:
            started = time.time()
            self.database.write(metric, points)
            took = time.time() - started
        except FileNotFoundError:
            # deleted since we knew it: keep the points, the creator makes it again
            self.known.discard(metric)
            self.cache.restore_raw(metric, raw)
            return -1, None
        except Exception as exc:  # a broken file must not stop the writer
            self.stats.increment("errors")
            if disk_trouble(exc):
                self._disk_trouble("Error writing to %s: %s" % (metric, exc))
                self.cache.restore_raw(metric, raw)
                return -1, None
            if self._torn_create(metric):
                self.known.discard(metric)  # looked for (and made) again by the creator
                self.cache.restore_raw(metric, raw)
                return -1, None
            self.errors.record("Error writing to %s: %s" % (metric, exc))
            return 0, None
        return len(points), took

    def _torn_create(self, metric: str) -> bool:
        """Whether the file is a create the process died in, now mended: one without its
        whole header is removed (to be made again); one whose body stops short of what
        its header gives is extended with zeroes, as the create would have filled it."""
        path = self.database.get_filesystem_path(metric)
        if path is None:  # a backend without files
            return False
        try:
            with open(path, "rb") as handle:
                raw = handle.read(MAX_TORN_HEADER)
                size = os.fstat(handle.fileno()).st_size
            need = header_size(raw)
            if size < METADATA_SIZE or size < need <= MAX_TORN_HEADER:
                os.unlink(path)
                self.log.msg("Removed %s: %d bytes left by an interrupted create"
                             % (path, size))
                return True
            header = parse_header(raw[:need], path)
            end = max((archive.end for archive in header.archives), default=need)
            if size >= end:
                return False
            os.truncate(path, end)
        except (OSError, CorruptWhisperFile):
            return False
        self.log.msg("Extended %s from %d to %d bytes: its create was interrupted"
                     % (path, size, end))
        return True

    # -- resize ---------------------------------------------------------
    def pause(self, metrics: list[str]) -> list[str]:
        """Stop writing ``metrics`` (their points stay in the cache) until ``resume``;
        returns those still being written or created now: the pause holds once a later
        call returns none of them."""
        with self.choose_lock:
            self.paused.update(metrics)
            busy, in_flight = self.creator.busy, self.in_flight
            return [metric for metric in metrics if metric in in_flight or metric in busy]

    def resume(self, metrics: list[str]) -> None:
        """Write ``metrics`` again, into the files now at their paths: the storage
        backend forgets descriptors it holds for them (a file it had just created and
        not written yet is not checked for replacement otherwise)."""
        with self.choose_lock:
            self.database.forget(metrics)
            self.paused.difference_update(metrics)

    # -- thread ---------------------------------------------------------
    def run(self) -> None:
        while not self.stop_event.is_set():
            try:
                busy = self.write_some()
            except Exception as exc:
                self.errors.record("writer: %s" % exc)
                busy = False
            if not busy:
                self.stop_event.wait(0.05)

    def start(self) -> None:
        self.creator.start()
        for number in range(self.thread_count):
            thread = threading.Thread(target=self.run, name="carbon-writer-%d" % number,
                                      daemon=True)
            self.threads.append(thread)
            thread.start()

    def stop(self, timeout: float | None = None) -> None:
        """Stop the writer threads and the creator (pending creates stay pending)."""
        self.stop_event.set()
        for thread in self.threads:
            thread.join(timeout)
        self.creator.stop(timeout)

    def alive(self) -> bool:
        return any(thread.is_alive() for thread in self.threads)

    def drained(self) -> bool:
        """Every point given to the cache is on disk (or dropped) and booked: none cached,
        none taken by a writer thread or the creator and still being written
        (``cache.writing``), no metric with the creator or its outcome unhandled. (An
        empty ``cache`` alone is not that: a writer thread pops a batch's points before
        it writes them.)"""
        creator = self.creator
        return self.cache.is_empty() and not creator.busy and not creator.ready \
            and not self.returned

    def drain(self, timeout: float = INF) -> bool:
        """Speed up to the shutdown rate and block until the cache is empty."""
        self.pacing = False
        self.strategy.min_pass = 0.0
        rate = self.config.max_updates_per_second_on_shutdown
        self.set_update_rate(rate)
        self.create_limiter.set_rate(rate, rate)
        self.creator.wake()
        self.log.msg("Carbon shutting down.  Changed the update rate to: %s" % rate)
        deadline = time.monotonic() + timeout
        self.creator.start()
        try:
            # a writer thread still alive (its stop timed out) may be writing points it
            # took: done only when they are on disk, not when the cache looks empty
            while not self.drained() and time.monotonic() < deadline:
                if not self.alive():
                    if not self.write_some():
                        time.sleep(0.02)  # the disk refused writes: it gets a moment
                else:
                    time.sleep(0.02)
        finally:
            self.creator.stop(5.0)
        return self.drained()
