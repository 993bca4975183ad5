"""The writer with its creator thread, on real whisper files: new metrics are created in
batches while their points stay in the cache; throttling, failures, drain, deletion."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from carbon.cache.store import MetricCache
from carbon.cache.strategies import StrategyConfig, make_strategy
from carbon.config.schemas import SchemaFiles
from carbon.config.settings import Settings
from carbon.instrumentation.stats import Stats
from carbon.logs import CarbonLog
from carbon.storage.whisper_backend import WhisperConfig, WhisperDatabase
from carbon.writer.creator import Written
from carbon.writer.writer import PACE_QUIET_SECONDS, Writer, WriterConfig
from tests.support import read_whisper, wait_for

NOW = int(time.time()) // 60 * 60


class TagRecorder:
    """Stands in for the TagDB feed: records what the writer reports."""

    def __init__(self) -> None:
        self.new: list[str] = []
        self.seen: list[str] = []

    def created(self, metric: str) -> None:
        self.new.append(metric)

    def updated(self, metric: str) -> None:
        self.seen.append(metric)


class Harness:
    def __init__(self, root: Path, strategy: str = "sorted", retentions: str = "60s:1d",
                 database: type = WhisperDatabase, **overrides: object) -> None:
        (root / "conf").mkdir(parents=True, exist_ok=True)
        (root / "conf" / "storage-schemas.conf").write_text(
            "[default]\npattern = .*\nretentions = %s\n" % retentions)
        values = dict(LOCAL_DATA_DIR=str(root / "whisper"), LOG_CREATES=True,
                      MAX_UPDATES_PER_SECOND=float("inf"),
                      MAX_CREATES_PER_MINUTE=float("inf"))
        values.update(overrides)
        self.settings = Settings(**values)
        self.root = root
        self.log = CarbonLog(logdir=str(root / "log"))
        self.cache = MetricCache()
        self.stats = Stats()
        self.database = database.from_settings(self.settings)
        self.writer = Writer(self.cache, make_strategy(strategy, self.cache,
                                                       StrategyConfig.from_settings(self.settings)),
                             self.database, SchemaFiles(str(root / "conf")),
                             WriterConfig.from_settings(self.settings), self.stats, self.log)
        self.tags = TagRecorder()
        self.writer.tag_feed = self.tags

    def existing(self, metrics: list[str]) -> None:
        """Files for ``metrics`` (60s:1d), known to the writer as made."""
        for metric in metrics:
            self.database.create(metric, [(60, 1440)], None, None)
        self.writer.known.update(metrics)

    def add(self, metrics: list[str], count: int = 3, value: float = 1.0) -> None:
        self.cache.add_batch([(metric, float(NOW - 60 * k), value + k)
                              for metric in metrics for k in range(count, 0, -1)])

    def stored(self, metric: str) -> dict:
        return read_whisper(self.database.get_filesystem_path(metric), NOW - 3600, NOW + 60)

    def log_text(self, kind: str) -> str:
        path = self.root / "log" / ("%s.log" % kind)
        return path.read_text() if path.exists() else ""

    def close(self) -> None:
        self.writer.stop(5)
        self.database.close()
        self.log.close()


@pytest.fixture
def harness(tmp_path):
    made: list[Harness] = []

    def make(**overrides) -> Harness:
        made.append(Harness(tmp_path / ("h%d" % len(made)), **overrides))
        return made[-1]

    yield make
    for h in made:
        h.close()


def expected(count: int = 3, value: float = 1.0) -> dict:
    return {NOW - 60 * k: value + k for k in range(count, 0, -1)}


def test_points_of_a_metric_being_created_stay_in_the_cache(harness) -> None:
    # Passes stepped one by one, each started at once (no WRITER_MIN_PASS_SECONDS wait:
    # test_writer_min_pass_seconds_waits_between_passes covers it).
    h = harness(WRITER_MIN_PASS_SECONDS=0)
    h.database.create("old.one", [(60, 1440)], None, None)
    h.add(["new.one", "old.one"])
    size = h.cache.size
    # No threads: step by step. Metrics this writer has not seen go to the creator (which
    # looks for their files and makes the missing ones) and are skipped meanwhile.
    assert h.writer.write_some(1)
    assert h.writer.creator.busy == {"new.one", "old.one"}
    assert not os.path.exists(h.database.get_filesystem_path("new.one"))
    assert h.cache.get("new.one") == sorted(expected().items())  # carbonlink sees them
    assert h.cache.size == size  # and they count in MAX_CACHE_SIZE
    assert h.writer.write_some(1)  # only creates left: the creator handles a batch
    assert os.path.exists(h.database.get_filesystem_path("new.one"))
    # the new file was made with its points in its first write: on disk, out of the
    # cache; the file that existed has its points back in the cache, for the writer
    assert h.stored("new.one") == expected() and h.cache.get("new.one") == []
    assert h.cache.get("old.one") == sorted(expected().items())
    assert h.writer.write_some(1) and h.writer.write_some(1)
    assert h.stored("new.one") == expected() and h.stored("old.one") == expected()
    assert not h.cache and h.cache.size == 0 and not h.writer.creator.busy
    assert h.stats.get("creates") == 1 and h.tags.new == ["new.one"]
    assert "creating database metric new.one" in h.log_text("creates")
    assert "old.one" not in h.log_text("creates")
    # known files are written without the creator
    h.add(["old.one", "new.one"], count=1, value=9.0)
    assert h.writer.write_some(1) and not h.writer.creator.busy
    assert h.writer.write_some(1) and not h.cache
    assert h.stored("new.one")[NOW - 60] == 10.0 == h.stored("old.one")[NOW - 60]


@pytest.mark.parametrize("strategy", ["sorted", "max", "naive", "timesorted", "bucketmax"])
def test_many_new_metrics_with_writer_threads(harness, strategy: str) -> None:
    h = harness(strategy=strategy, WRITER_THREADS=2, LOG_CREATES=False)
    metrics = ["many.m%04d.x" % i for i in range(600)]
    h.writer.creator.batch_size = 64
    h.writer.start()
    h.add(metrics[:300])
    h.add(metrics[300:], count=5, value=7.0)
    h.add(metrics[:300], count=5, value=1.0)  # more points for the first ones
    wait_for(h.writer.drained, timeout=60, what="cache drained")
    for metric in metrics:
        assert h.stored(metric) == expected(5, 7.0 if metric in metrics[300:] else 1.0)
    assert h.stats.get("creates") == 600 and h.stats.get("errors") == 0
    assert sorted(h.tags.new) == metrics
    assert h.log_text("creates") == ""


class HeldWrites(WhisperDatabase):
    """The real backend whose batch writes wait for ``release`` once ``hold`` is set
    (``entered``: a writer thread has taken a batch's points and is writing them)."""

    def __init__(self, config: WhisperConfig) -> None:
        super().__init__(config)
        self.hold = False
        self.entered = threading.Event()
        self.release = threading.Event()

    def write_batch(self, items, now=None):
        if self.hold:
            self.entered.set()
            self.release.wait(30)
        return super().write_batch(items, now)


def test_drained_only_once_the_points_a_writer_thread_took_are_on_disk(harness) -> None:
    """A writer thread pops a batch's points (into ``cache.writing``) before it writes
    them: in that window the cache is empty and the creator idle, but the points are
    not on disk. ``drained`` (and ``drain``, which a stop that timed out leaves with a
    thread still writing) waits for them; an empty ``cache`` was the flaky test's (and
    ``drain``'s) notion of done."""
    h = harness(database=HeldWrites, WRITER_THREADS=2)
    h.database.create("held.one", [(60, 1440)], None, None)
    h.writer.known.add("held.one")
    h.database.hold = True
    h.add(["held.one"])
    h.writer.start()
    assert h.database.entered.wait(30)
    assert not h.cache and not h.writer.creator.busy  # looks drained ...
    assert h.stored("held.one") == {}  # ... while none of its points is on disk
    assert h.cache.get("held.one") == sorted(expected().items())  # carbonlink has them
    assert not h.writer.drained()
    h.writer.stop_event.set()  # as a stop whose join timed out: the thread still writes
    assert h.writer.alive()
    assert h.writer.drain(timeout=0.3) is False  # not done: the write is still held
    h.database.release.set()
    assert h.writer.drain(timeout=30)
    assert h.writer.drained() and h.stored("held.one") == expected()


def test_a_failed_create_drops_its_points_and_the_others_are_written(harness) -> None:
    h = harness()
    blocker = Path(h.database.data_dir) / "blocked"
    blocker.parent.mkdir(parents=True)
    blocker.write_bytes(b"a file where a directory should be")
    h.add(["fine.a", "blocked.metric", "fine.b"])
    h.writer.start()
    wait_for(h.writer.drained, what="cache drained")
    assert h.stored("fine.a") == expected() and h.stored("fine.b") == expected()
    assert h.stats.get("errors") == 1 and h.stats.get("creates") == 2
    h.writer.errors.flush()
    assert "Error creating blocked.metric" in h.log_text("console")
    assert blocker.read_bytes().startswith(b"a file")


def test_throttled_creates_keep_their_points_until_a_token_is_free(harness) -> None:
    h = harness(MAX_CREATES_PER_MINUTE=3)
    h.database.create("exists.already", [(60, 1440)], None, None)
    metrics = ["throttled.m%d" % i for i in range(6)]
    h.add(metrics + ["exists.already"])
    h.writer.start()
    wait_for(lambda: h.stats.get("creates") == 3 and h.stats.get("deferredCreates") >= 3,
             what="three creates and deferred ones")
    time.sleep(0.3)
    assert h.stats.get("creates") == 3  # no token in the next 20 s
    created = [m for m in metrics if os.path.exists(h.database.get_filesystem_path(m))]
    waiting = [m for m in metrics if m not in created]
    assert len(created) == 3 and len(waiting) == 3
    for metric in created:
        assert h.stored(metric) == expected()
    for metric in waiting:  # kept, unlike carbon 1.1.10
        assert h.cache.get(metric) == sorted(expected().items())
    assert h.cache.size == 9
    assert h.stored("exists.already") == expected()  # needs no token
    assert h.stats.get("errors") == 0
    # held aside while they wait: counted once each, not looked for again and again
    assert h.stats.get("deferredCreates") == 3
    assert len(h.writer.creator.waiting) == 3
    h.writer.create_limiter.set_rate(3, 100.0)  # tokens come back: the creator sees it
    wait_for(lambda: not h.cache, what="the waiting metrics written")
    for metric in waiting:
        assert h.stored(metric) == expected()
    assert h.stats.get("creates") == 6 and h.stats.get("deferredCreates") == 3


def test_drain_waits_for_pending_creates(harness) -> None:
    h = harness(LOG_CREATES=False)
    metrics = ["drain.m%03d" % i for i in range(300)]
    h.add(metrics)
    h.writer.start()
    h.writer.stop(5)  # as at SIGTERM: writer threads stopped first, maybe mid-create
    assert h.writer.drain(timeout=60)
    assert not h.writer.creator.alive()
    for metric in metrics:
        assert h.stored(metric) == expected()
    assert h.stats.get("creates") == 300


def test_a_file_deleted_after_a_write_is_created_again(harness) -> None:
    h = harness()
    h.add(["deleted.metric"])
    h.writer.start()
    wait_for(lambda: not h.cache and h.stored("deleted.metric"), what="first write")
    os.unlink(h.database.get_filesystem_path("deleted.metric"))
    h.add(["deleted.metric"], count=2, value=5.0)
    wait_for(lambda: not h.cache and h.stored("deleted.metric") == expected(2, 5.0),
             what="file created again with the new points")
    assert h.stats.get("creates") == 2 and h.stats.get("errors") == 0


def test_known_metrics_are_written_in_batches(harness) -> None:
    """One write_some call writes up to BATCH_SIZE known metrics through the backend's
    batch (the C update), with the per-metric stats and update log lines."""
    from carbon.writer.writer import BATCH_SIZE
    h = harness(LOG_UPDATES=True, LOG_CREATES=False)
    metrics = ["batch.m%03d" % i for i in range(BATCH_SIZE + 6)]
    h.existing(metrics)
    h.add(metrics, count=4)
    calls = []
    original = h.database.write_batch
    h.database.write_batch = lambda items, now=None: calls.append(len(items)) or original(items)
    assert h.writer.write_some() and h.writer.write_some()
    assert calls == [BATCH_SIZE, 6] and not h.cache and not h.cache.writing
    assert all(h.stored(metric) == expected(4) for metric in metrics)
    assert h.stats.get("committedPoints") == 4 * len(metrics)
    assert len(h.stats.samples["updateTimes"]) == len(metrics)
    assert h.log_text("updates").count("wrote 4 datapoints for batch.m") == len(metrics)


def test_a_failing_batch_call_still_stores_every_point(harness) -> None:
    h = harness()
    metrics = ["fail.m%d" % i for i in range(5)]
    h.existing(metrics)
    h.add(metrics)

    def broken(items, now=None):
        raise MemoryError("no room")

    h.database.write_batch = broken
    assert h.writer.write_some() and not h.cache
    assert all(h.stored(metric) == expected() for metric in metrics)


def test_known_files_are_bounded_by_writer_known_files(harness) -> None:
    h = harness(WRITER_KNOWN_FILES=2, LOG_CREATES=False)
    metrics = ["known.m%d" % i for i in range(5)]

    def written() -> bool:
        """Step the writer until every point is on disk (its passes start at most every
        WRITER_MIN_PASS_SECONDS)."""
        if h.cache or h.writer.creator.busy:
            h.writer.write_some()
        return not h.cache and not h.writer.creator.busy

    h.add(metrics)
    wait_for(written, timeout=30, what="every point written")
    assert not h.cache and h.stats.get("creates") == 5
    assert 0 < len(h.writer.known) <= 2 and len(h.database._paths) <= 2
    # forgotten files are looked for again, found (no second create) and written
    h.add(metrics, count=1, value=5.0)
    wait_for(written, timeout=30, what="every point written again")
    assert not h.cache and h.stats.get("creates") == 5
    assert all(h.stored(metric)[NOW - 60] == 6.0 for metric in metrics)
    assert len(h.writer.known) <= 2 and len(h.database._paths) <= 2


def test_without_a_create_limit_existing_files_are_found_by_their_create(harness) -> None:
    # No stat first: the create of an existing file fails (O_EXCL) without touching it.
    h = harness()
    h.database.create("kept.old", [(60, 1440), (3600, 48)], 0.2, "max")
    before = Path(h.database.get_filesystem_path("kept.old")).read_bytes()
    h.add(["kept.old", "made.new"])
    h.writer.start()
    wait_for(h.writer.drained, what="cache drained")
    assert h.stored("kept.old") == expected() and h.stored("made.new") == expected()
    after = Path(h.database.get_filesystem_path("kept.old")).read_bytes()
    assert after[:40] == before[:40] and len(after) == len(before)  # same header and size
    assert h.stats.get("creates") == 1 and h.stats.get("errors") == 0
    assert h.tags.new == ["made.new"]
    creates = h.log_text("creates")
    assert "creating database metric made.new" in creates and "kept.old" not in creates


def test_new_metrics_go_to_the_creator_a_batch_at_a_time(harness) -> None:
    """Metrics whose files are unknown are handed to the creator in batches of its batch
    size (one lock each, in the strategy's order), and its outcomes are taken back a
    write batch at a time; each stays busy until the writer has handled it."""
    from carbon.writer.writer import BATCH_SIZE
    h = harness(strategy="naive", LOG_CREATES=False)
    creator = h.writer.creator
    creator.batch_size = 64
    metrics = ["bulk.m%03d" % i for i in range(200)]
    h.add(metrics)
    handed: list[list[str]] = []
    submit_many = creator.submit_many
    creator.submit_many = lambda batch: handed.append(list(batch)) or submit_many(batch)
    assert h.writer.write_some()  # no threads: every new metric goes to the creator
    assert [len(batch) for batch in handed] == [64, 64, 64, 8]
    assert [m for batch in handed for m in batch] == list(creator.pending) == metrics
    assert creator.busy == set(metrics) and not h.writer.unsubmitted
    while creator.pending:
        assert creator.handle_batch() == 64 or not creator.pending
    assert len(creator.ready) == 200 and creator.busy == set(metrics)
    taken = creator.take_ready_many(3)
    assert [metric for metric, _ in taken] == metrics[:3]
    # made with their points (on disk, out of the cache): the writer only books them
    assert all(type(outcome) is Written and outcome.points == 3 for _, outcome in taken)
    assert not h.cache and all(h.stored(metric) == expected() for metric in metrics)
    assert metrics[0] in creator.busy  # until released
    creator.release(metrics[0])
    assert metrics[0] not in creator.busy
    creator.ready.extendleft(reversed(taken))  # back, for the writer
    creator.busy.add(metrics[0])
    takes: list[int] = []
    take_many = creator.take_ready_many
    creator.take_ready_many = lambda limit: takes.append(limit) or take_many(limit)
    while creator.ready or h.writer.returned:
        assert h.writer.write_some()
    assert takes and all(limit == BATCH_SIZE for limit in takes) and len(takes) <= 4
    assert not creator.busy and not creator.ready and not h.writer.returned
    assert all(h.stored(metric) == expected() for metric in metrics)
    assert h.stats.get("creates") == 200


@pytest.mark.parametrize("limited", [False, True])
def test_metrics_claimed_for_the_creator_are_handed_over_when_a_pick_fails(harness, limited
                                                                           ) -> None:
    """Without an update limit the writer takes a batch of picks at a time
    (``choose_many``), with one a pick at a time (``choose``)."""
    overrides = {"MAX_UPDATES_PER_SECOND": 1000.0} if limited else {}
    h = harness(strategy="naive", LOG_CREATES=False, **overrides)
    metrics = ["claim.m%d" % i for i in range(5)]
    h.add(metrics)
    choose, choose_many = h.writer.strategy.choose, h.writer.strategy.choose_many
    picks = []

    def failing() -> str | None:
        picks.append(1)
        if len(picks) == 3:
            raise RuntimeError("broken strategy")
        return choose()

    def failing_many(limit: int) -> list[str]:
        picks.append(1)
        if len(picks) == 2:
            raise RuntimeError("broken strategy")
        return choose_many(2)

    if limited:
        h.writer.strategy.choose = failing
    else:
        h.writer.strategy.choose_many = failing_many
    with pytest.raises(RuntimeError):
        h.writer.write_some()
    creator = h.writer.creator
    assert list(creator.pending) == metrics[:2] == sorted(creator.busy)  # not stranded
    h.writer.strategy.choose, h.writer.strategy.choose_many = choose, choose_many
    for _ in range(40):
        if not h.cache and not creator.busy:
            break
        h.writer.write_some()
    assert not h.cache and not creator.busy
    assert all(h.stored(metric) == expected() for metric in metrics)


def test_emptied_cache_and_creator_sets_give_their_tables_back(harness) -> None:
    """Once a burst of new metrics is written, the cache's dicts and the creator's busy
    set drop the tables sized for the burst (an emptied dict or set keeps them else)."""
    import sys
    h = harness(strategy="naive", LOG_CREATES=False)
    metrics = ["burst.m%05d" % i for i in range(3000)]
    h.add(metrics, count=1)
    assert sys.getsizeof(h.cache.data) > 50 * sys.getsizeof({})
    for _ in range(400):
        if not h.cache and not h.writer.creator.busy:
            break
        if not h.writer.write_some():
            h.writer.creator.handle_batch()
    assert not h.cache and h.stats.get("creates") == 3000
    assert sys.getsizeof(h.cache.data) == sys.getsizeof({})
    assert sys.getsizeof(h.cache.writing) == sys.getsizeof({})
    assert sys.getsizeof(h.writer.creator.busy) == sys.getsizeof(set())
    assert all(h.stored(metric) == expected(1) for metric in metrics[::300])


def test_a_new_file_takes_its_points_in_its_create_then_later_ones_as_whisper(
        harness, tmp_path) -> None:
    """A three-archive file made by the creator with points spanning archives in its
    create's write, then written again by the writer: byte for byte whisper 1.1.10's
    create + update_many with the same points."""
    import sys

    import whisper
    h = harness(retentions="60s:2h,300s:6h,900s:1d", LOG_CREATES=False)
    h.database.python_sums = sys.version_info >= (3, 12)
    reference = str(tmp_path / "reference.wsp")
    whisper.create(reference, [(60, 120), (300, 72), (900, 96)], 0.5, "average")
    start = int(time.time()) // 900 * 900 - 1800
    rounds = [[(start + 60 * k, 1.25 * k) for k in range(25)],  # archive 0, 300 and 900 s
              [(start + 60 * k, -0.5 * k) for k in range(20, 31)]]  # overlaps, new ones
    for number, points in enumerate(rounds):
        h.cache.add_batch([("spans.one", float(t), v) for t, v in points])
        whisper.update_many(reference, points)
        while h.cache or h.writer.creator.ready or h.writer.returned \
                or h.writer.creator.busy:
            h.writer.write_some()
        if number == 0:
            assert h.stats.get("creates") == 1 and h.stats.get("committedPoints") == 25
        with open(h.database.get_filesystem_path("spans.one"), "rb") as ours, \
                open(reference, "rb") as theirs:
            assert ours.read() == theirs.read(), number
    assert h.stats.get("committedPoints") == 36 and h.tags.seen.count("spans.one") == 2


class WatchedCreates(WhisperDatabase):
    """The real backend; while a batch is being created it records what carbonlink
    answers for its metrics and lets ``arrive`` points reach the cache meanwhile."""

    cache: MetricCache
    arrive: list = []

    def create_many(self, requests, points=None, now=None):
        self.seen = {request[0]: self.cache.get(request[0]) for request in requests}
        self.cache.add_batch(self.arrive)
        return super().create_many(requests, points, now)


def test_points_stay_visible_during_the_create_and_late_ones_are_written(
        harness) -> None:
    h = harness(database=WatchedCreates, LOG_CREATES=False)
    h.database.cache = h.cache
    h.database.arrive = [("late.one", float(NOW - 30), 7.0)]
    h.add(["late.one"])
    while h.cache or h.writer.creator.ready or h.writer.returned or h.writer.creator.busy:
        h.writer.write_some()
    # carbonlink answered the popped points while the file was being made
    assert h.database.seen == {"late.one": sorted(expected().items())}
    # the late point stayed cached and was written after the create, into its interval
    assert h.stored("late.one") == {**expected(), NOW - 60: 7.0}
    assert h.stats.get("committedPoints") == 4 and not h.cache.writing


def test_a_failed_create_with_points_keeps_them_on_a_full_disk(harness, tmp_path) -> None:
    """The points a create took go back to the cache when it fails: kept (and written
    later) when the disk is in trouble, dropped as carbon does for another error."""
    import errno

    class FullDisk(WhisperDatabase):
        full = True

        def create_many(self, requests, points=None, now=None):
            if self.full:
                return [OSError(errno.ENOSPC, "No space left on device")] * len(requests)
            return super().create_many(requests, points, now)

    h = harness(database=FullDisk, LOG_CREATES=False)
    h.add(["full.one"])
    h.writer.write_some()
    h.writer.write_some()
    h.writer.write_some()
    assert h.cache.get("full.one") == sorted(expected().items()) and not h.cache.writing
    assert h.stats.get("errors") == 1
    h.database.full = False
    h.writer.retry_at = 0.0
    while h.cache or h.writer.creator.ready or h.writer.returned or h.writer.creator.busy:
        h.writer.write_some()
    assert h.stored("full.one") == expected()


def test_with_an_update_limit_a_create_writes_no_points(harness) -> None:
    """A write made by a create would pay no update token: with MAX_UPDATES_PER_SECOND
    the creator leaves the points in the cache, for the writer at its rate."""
    h = harness(MAX_UPDATES_PER_SECOND=1000.0)
    h.add(["limited.one"])
    assert h.writer.write_some(1)  # handed to the creator
    assert h.writer.write_some(1)  # the creator makes the file
    assert os.path.exists(h.database.get_filesystem_path("limited.one"))
    assert h.cache.get("limited.one") == sorted(expected().items())
    while h.cache or h.writer.creator.ready or h.writer.returned or h.writer.creator.busy:
        h.writer.write_some()
    assert h.stored("limited.one") == expected()


class SlowFiles(WhisperDatabase):
    """The real backend; each batch's files are made 50 ms late, and while they are
    being made it records what carbonlink answers and whether the creator prepared
    another batch meanwhile."""

    cache: MetricCache

    def __init__(self, config: WhisperConfig) -> None:
        super().__init__(config)
        self.making = 0
        self.prepared_while_making = 0
        self.threads: set[str] = set()
        self.seen: dict = {}
        self.lock = threading.Lock()

    def prepare_create_many(self, requests, points=None, now=None):
        with self.lock:
            self.prepared_while_making += self.making > 0
        job = super().prepare_create_many(requests, points, now)
        run, metrics = job.run, [request[0] for request in requests]

        def slow_run() -> None:
            with self.lock:
                self.making += 1
            self.threads.add(threading.current_thread().name)
            self.seen.update((metric, self.cache.get(metric)) for metric in metrics)
            time.sleep(0.05)
            run()
            with self.lock:
                self.making -= 1
        job.run = slow_run
        return job


def _slow_files_started(harness, prefix: str, count: int, batch_size: int
                        ) -> tuple[Harness, list[str]]:
    """A writer over SlowFiles, ``count`` new metrics cached, its threads started."""
    h = harness(database=SlowFiles, LOG_CREATES=False)
    h.database.cache = h.cache
    h.writer.creator.batch_size = batch_size
    metrics = ["%s.m%03d.x" % (prefix, i) for i in range(count)]
    h.add(metrics)
    h.writer.start()
    return h, metrics


def test_the_creator_prepares_a_batch_while_another_one_s_files_are_made(harness) -> None:
    """Files are made on their own thread while the creator prepares the next batch; the
    points stay visible meanwhile and every one is stored once the batches are booked."""
    h, metrics = _slow_files_started(harness, "overlap", 320, batch_size=32)
    wait_for(h.writer.drained, timeout=60, what="cache drained")
    assert h.database.threads <= {"carbon-creator-files_0", "carbon-creator-files_1"}
    assert h.database.prepared_while_making >= 3
    assert h.database.seen == {metric: sorted(expected().items()) for metric in metrics}
    for metric in metrics:
        assert h.stored(metric) == expected()
    assert h.stats.get("creates") == 320 and h.stats.get("committedPoints") == 960
    assert h.stats.get("errors") == 0 and not h.cache.writing


def test_stopping_the_creator_books_the_batch_in_flight(harness) -> None:
    """A stop while a batch's files are being made waits for them and hands the batch's
    outcomes out; the metrics not started yet stay pending and are made afterwards."""
    h, metrics = _slow_files_started(harness, "stop", 160, batch_size=16)
    wait_for(lambda: h.database.making > 0, timeout=30, what="a batch in flight")
    h.writer.stop(10)
    creator = h.writer.creator
    assert not creator.alive() and not creator.inflight and creator.overlap is None
    assert creator.ready or creator.pending or h.writer.returned
    while h.cache or creator.ready or h.writer.returned or creator.busy:
        h.writer.write_some()
    for metric in metrics:
        assert h.stored(metric) == expected()
    assert h.stats.get("creates") == 160 and not h.cache.writing


class BrokenBooking(WhisperDatabase):
    """The real backend, whose first batch fails while it is booked."""

    failed = False

    def prepare_create_many(self, requests, points=None, now=None):
        job = super().prepare_create_many(requests, points, now)
        if not self.failed:
            self.failed = True

            def broken_finish():
                raise OSError(5, "Input/output error")
            job.finish = broken_finish
        return job


def test_a_batch_failing_while_booked_keeps_the_creator_running(harness) -> None:
    """An error from the backend while a batch made on the file thread is booked fails
    that batch's metrics (their points back to the cache, as for any failed create) and
    the creator goes on with the next batches. The error is EIO (the disk in trouble), so
    the failed batch's points stay cached and the writer's retry a second later finds its
    files (made before the booking failed) and writes them: the test waits for that drain
    rather than for the first 32 creates, which the retry's claim and take could follow
    between two of its checks (a CI failure)."""
    h = harness(database=BrokenBooking, LOG_CREATES=False)
    h.writer.creator.batch_size = 8
    metrics = ["booked.m%02d.x" % i for i in range(40)]
    h.add(metrics)
    h.writer.start()
    wait_for(h.writer.drained, timeout=30, what="every batch made, the failed one retried")
    assert h.writer.creator.alive() and h.database.failed
    assert h.stats.get("errors") == 8 and h.stats.get("creates") == 32
    assert not h.cache.writing
    for metric in metrics:
        assert h.stored(metric) == expected()


@pytest.mark.parametrize("strategy", ["sorted", "max", "naive", "timesorted", "bucketmax"])
def test_writer_min_pass_seconds_waits_between_passes(harness, strategy: str) -> None:
    """WRITER_MIN_PASS_SECONDS: points that arrive after a pass ended wait until that
    long after the pass began, then go in one update; without it they are written at
    once; a drain does not wait."""
    metrics = ["paced.m%d" % i for i in range(5)]
    for paced in (False, True):
        h = harness(strategy=strategy, WRITER_MIN_PASS_SECONDS=1.5 if paced else 0)
        h.existing(metrics)
        h.add(metrics, count=1)
        assert h.writer.write_some() and not h.cache  # the first pass
        h.add(metrics, count=3)  # arrives right after it
        assert h.writer.write_some() is (not paced)
        if not paced:
            continue
        assert h.cache.size == 3 * len(metrics)
        time.sleep(1.6)
        assert h.writer.write_some() and not h.cache
        assert all(h.stored(metric) == expected(3) for metric in metrics)
        h.add(metrics, count=2, value=7.0)  # within 1.5 s of that pass: a drain writes
        assert h.writer.write_some() is False and h.writer.drain(timeout=5)
        assert all(h.stored(metric)[NOW - 60] == 8.0 for metric in metrics)


def test_writer_min_pass_seconds_writes_a_burst_once_the_input_is_quiet(harness) -> None:
    """Pacing gathers points only while they come in: a pass waits while points keep
    arriving, and once none has come for PACE_QUIET_SECONDS the cache is written even
    though WRITER_MIN_PASS_SECONDS (here 60 s) has not passed."""
    metrics = ["quiet.m%d" % i for i in range(5)]
    h = harness(WRITER_MIN_PASS_SECONDS=60)
    h.existing(metrics)
    h.add(metrics, count=1)
    assert h.writer.write_some() and not h.cache  # the first pass: nothing to wait for
    step = PACE_QUIET_SECONDS / 4
    for _ in range(8):  # points keep coming for 2x the quiet time: the pass waits
        h.add(metrics, count=1)
        assert h.writer.write_some() is False
        time.sleep(step)
    assert h.cache.size == 8 * len(metrics)
    time.sleep(PACE_QUIET_SECONDS + 0.05)  # no point since: write now
    while h.writer.write_some():
        pass
    assert not h.cache
    assert all(h.stored(metric) == expected(1) for metric in metrics)


@pytest.mark.parametrize("rate,batch", [(400.0, 20), (10.0, 1)])
def test_limited_updates_are_paid_for_a_batch_at_a_time(harness, rate: float, batch: int
                                                        ) -> None:
    """Under MAX_UPDATES_PER_SECOND the writer waits for UPDATE_BATCH_SECONDS' worth of
    tokens at once and writes them as one batch (at the lowest rates: one), never faster
    than the rate; every point is stored."""
    h = harness(strategy="naive", MAX_UPDATES_PER_SECOND=rate)
    metrics = ["rated.m%03d" % i for i in range(int(rate * 0.75))]
    h.existing(metrics)
    h.add(metrics)
    sizes: list[int] = []
    write_batch = h.database.write_batch

    def counted(items):
        sizes.append(len(items))
        return write_batch(items)
    h.database.write_batch = counted
    limiter = h.writer.update_limiter
    assert limiter.take(rate)  # the bucket's first second, spent
    waits: list[float] = []
    take = limiter.take

    def recorded(cost: float = 1.0, blocking: bool = True) -> bool:
        if blocking:
            waits.append(cost)
        return take(cost, blocking)
    limiter.take = recorded  # type: ignore[method-assign]
    started = time.monotonic()
    deadline = started + 10
    while h.cache and time.monotonic() < deadline:
        h.writer.write_some()
    took = time.monotonic() - started
    # every wait was for a batch's tokens; a pass may take a few more free at once
    # (a slow pass lets the bucket refill), so batches are at least that big
    assert waits and set(waits) == {batch}
    assert sum(sizes) == len(metrics) and len(sizes) <= len(metrics) // batch + 2
    assert len(metrics) / took <= 1.1 * rate, "%d updates in %.2f s" % (len(metrics), took)
    for metric in metrics:
        assert h.stored(metric) == expected()
