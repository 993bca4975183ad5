"""The cache journal: its C codec against the Python twin, replay, torn records,
retirement of segments once their points are in whisper, idempotent replay."""

from __future__ import annotations

import errno
import os
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from carbon.cache import journal as journal_module
from carbon.cache.journal import Journal, decode_py, encode_py, read_records
from carbon.cache.store import MetricCache
from carbon.cache.strategies import StrategyConfig, make_strategy
from carbon.config.schemas import SchemaFiles
from carbon.config.settings import Settings
from carbon.instrumentation.stats import Stats
from carbon.logs import CarbonLog
from carbon.storage.whisper_backend import WhisperDatabase
from carbon.writer.writer import Writer, WriterConfig

native_encode = journal_module._native_encode
native_decode = journal_module._native_decode
needs_native = pytest.mark.skipif(
    native_encode is None and not os.environ.get("CARBON_REQUIRE_NATIVE"),
    reason="the C accelerator is not built")

names = st.sampled_from(["a", "b.c", "d;x=1", "é.ü", "", "x" * 300])
numbers = st.one_of(st.floats(allow_nan=False), st.integers(-(2 ** 52), 2 ** 52))
batches = st.lists(st.tuples(names, numbers, numbers), max_size=40)


class Lines:
    """A log that keeps its lines."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def msg(self, text: str) -> None:
        self.lines.append(text)

    listener = msg


def make_journal(directory: Path, cache: MetricCache, **options: float) -> Journal:
    values = dict(segment_bytes=4096, max_bytes=float("inf"), fsync_interval=0.0)
    values.update(options)
    return Journal(str(directory), cache, Lines(), **values)


@needs_native
@settings(max_examples=200, deadline=None)
@given(batch=batches)
def test_c_codec_equals_python(batch) -> None:
    encoded = native_encode(batch)
    assert encoded == encode_py(batch)
    expected = [(m, float(t), float(v)) for m, t, v in batch]
    assert native_decode(encoded, len(batch)) == decode_py(encoded, len(batch)) == expected


@needs_native
@settings(max_examples=200, deadline=None)
@given(batch=batches, cut=st.integers(0, 50), extra=st.integers(-2, 2))
def test_c_decoder_rejects_what_python_rejects(batch, cut: int, extra: int) -> None:
    encoded = encode_py(batch)[cut:]
    count = len(batch) + extra

    def outcome(decoder):
        try:
            return decoder(encoded, count)
        except (ValueError, UnicodeDecodeError):
            return "error"

    assert outcome(native_decode) == outcome(decode_py)


def test_bad_items_raise_type_error() -> None:
    for codec in filter(None, (native_encode, encode_py)):
        with pytest.raises(TypeError):
            codec([("ok", 1.0, 2.0), (1, 1.0, 2.0)])


def test_replay_gives_back_every_point_and_stops_at_a_torn_record(tmp_path) -> None:
    cache = MetricCache()
    journal = make_journal(tmp_path, cache)
    assert journal.open() == 0
    batches = [[("m%d" % (i % 7), float(i), float(k)) for i in range(40)] for k in range(30)]
    for batch in batches:
        assert journal.append(batch)
        cache.add_batch(batch)
    assert len(journal.segments) > 3  # 4 KiB segments: rotated several times
    journal.close()
    fresh = MetricCache()
    again = make_journal(tmp_path, fresh)
    assert again.open() == 30 * 40
    assert {m: fresh.get(m) for m in fresh.names()} == {m: cache.get(m) for m in cache.names()}
    again.close()
    # A torn last record (a power loss mid-write) ends that segment's replay only.
    last = sorted(tmp_path.iterdir())[-2]  # the newest segment with records
    data = last.read_bytes()
    records, end = read_records(data)
    assert records and end == len(data)
    last.write_bytes(data[:-5])
    third = make_journal(tmp_path, MetricCache())
    assert third.open() == 30 * 40 - records[-1][1]
    assert any("unreadable record" in line for line in third.log.lines)
    third.close()


def bytes_on_disk(directory: Path) -> int:
    return sum(path.stat().st_size for path in directory.iterdir())


def test_segments_retire_only_once_their_metrics_are_written(tmp_path) -> None:
    cache = MetricCache()
    journal = make_journal(tmp_path, cache, segment_bytes=4096)
    journal.open()
    first = [("a.%d" % i, 1.0, 1.0) for i in range(200)]  # > one segment of records
    journal.append(first)
    cache.add_batch(first)
    journal.append([("b", 1.0, 1.0)])  # rotates: the snapshot holds a.* only
    cache.add_batch([("b", 1.0, 1.0)])
    assert len(journal.segments) == 2 and len(journal.snapshots) == 1
    assert journal.size == bytes_on_disk(tmp_path) > 4096  # the running total
    before = journal.mark()
    names = ["a.%d" % i for i in range(200)]
    cache.pop_raw_for_write(names)
    # Done with a mark taken before the snapshot would not prove anything: kept.
    journal.done(names, before - 1)
    assert len(journal.segments) == 2
    journal.done(names[:-1], before)
    assert len(journal.segments) == 2  # one metric of the snapshot still pending
    journal.done(names[-1:], before)
    assert len(journal.segments) == 1 and journal.retired == 1
    assert len(list(tmp_path.iterdir())) == 1
    assert journal.size == bytes_on_disk(tmp_path) > 0
    # An empty cache retires every closed segment on the next tick.
    cache.written(*names)
    journal.rotate()
    cache.pop_raw_for_write(["b"])
    cache.written("b")
    journal.tick()
    assert len(journal.segments) == 1 and not journal.snapshots
    journal.close(remove=True)
    assert not list(tmp_path.iterdir())


def test_replayed_segments_retire_without_newer_ones(tmp_path) -> None:
    """The snapshot taken after a replay covers the replayed segments only."""
    cache = MetricCache()
    journal = make_journal(tmp_path, cache)
    journal.open()
    journal.append([("old", 1.0, 1.0)])
    journal.close()
    replayed = MetricCache()
    again = make_journal(tmp_path, replayed)
    assert again.open() == 1
    assert again.size == bytes_on_disk(tmp_path) > 0  # the replayed segment counts
    newer = [("new.%d" % i, 1.0, 1.0) for i in range(200)]  # fills the new segment
    again.append(newer)
    replayed.add_batch(newer)
    again.append([("x", 1.0, 1.0)])  # rotates
    replayed.add_batch([("x", 1.0, 1.0)])
    mark = again.mark()
    replayed.pop_raw_for_write(["old"])
    again.done(["old"], mark)
    again.close()
    third = MetricCache()
    assert make_journal(tmp_path, third).open() == 201
    assert set(third.names()) == {"x"} | {name for name, _, _ in newer}


def test_over_its_bound_the_journal_says_so(tmp_path) -> None:
    cache = MetricCache()
    journal = make_journal(tmp_path, cache, max_bytes=10_000)
    journal.open()
    batch = [("m.%d" % i, 1.0, 2.0) for i in range(500)]
    journal.append(batch)
    assert journal.over_limit() and not journal.below_resume_mark()
    journal.close()


def test_replay_over_points_already_in_whisper_changes_no_byte(tmp_path) -> None:
    """Replaying points that were written already writes the same bytes again."""
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "storage-schemas.conf").write_text(
        "[all]\npattern = .*\nretentions = 10s:1h,60s:1d\n")
    conf = Settings(LOCAL_DATA_DIR=str(tmp_path / "whisper"), MAX_UPDATES_PER_SECOND=float("inf"),
                    MAX_CREATES_PER_MINUTE=float("inf"), LOG_UPDATES=False, LOG_CREATES=False)
    now = int(time.time()) // 60 * 60
    batch = [("idem.m%d" % m, float(now - 10 * k), float(m * k) + 0.5)
             for k in range(200, 0, -1) for m in range(20)]

    def write_all(cache: MetricCache) -> None:
        database = WhisperDatabase.from_settings(conf)
        writer = Writer(cache, make_strategy("sorted", cache, StrategyConfig.from_settings(conf)),
                        database, SchemaFiles(str(tmp_path / "conf")),
                        WriterConfig.from_settings(conf), Stats(),
                        CarbonLog(logdir=str(tmp_path / "log")))
        deadline = time.monotonic() + 60
        while (cache or writer.creator.ready or writer.creator.busy) \
                and time.monotonic() < deadline:
            writer.write_some()
        database.close()
        assert not cache

    cache = MetricCache()
    journal = make_journal(tmp_path / "journal", cache)
    journal.open()
    journal.append(batch)
    cache.add_batch(batch)
    journal.close()  # the writes below never tell it: every segment stays
    write_all(cache)
    files = sorted((tmp_path / "whisper").rglob("*.wsp"))
    before = {path: path.read_bytes() for path in files}
    assert len(before) == 20
    replayed = MetricCache()
    again = make_journal(tmp_path / "journal", replayed)
    assert again.open() == len(batch)
    write_all(replayed)
    assert {path: path.read_bytes() for path in files} == before
    again.close()


def test_a_refused_journal_write_is_kept_and_retried(tmp_path) -> None:
    """ENOSPC from the journal's own disk (/dev/full): the records wait in the backlog,
    in order, and are written by the next tick once the disk takes them."""
    cache = MetricCache()
    journal = make_journal(tmp_path, cache)
    journal.open()
    assert journal.append([("a", 1.0, 1.0)])
    segment_fd = journal.fd
    journal.fd = os.open("/dev/full", os.O_WRONLY)
    try:
        assert not journal.append([("b", 2.0, 2.0)])
        assert journal.write_error.errno == errno.ENOSPC and journal.backlog
        assert not journal.append([("c", 3.0, 3.0)])  # behind the first, in order
        assert not journal.below_resume_mark()
        journal.tick()
        assert journal.backlog
    finally:
        os.close(journal.fd)
    journal.fd = segment_fd
    journal.tick()
    assert not journal.backlog and journal.write_error is None
    journal.close()
    replayed = MetricCache()
    assert make_journal(tmp_path, replayed).open() == 3
    assert [replayed.get(name) for name in "abc"] == [[(1.0, 1.0)], [(2.0, 2.0)], [(3.0, 3.0)]]


def test_sink_pauses_receivers_while_the_journal_cannot_write(tmp_path) -> None:
    from carbon.cache.sink import CacheSink, CacheSinkConfig
    from carbon.flow import FlowControl

    class Transport:
        paused = False

        def pauseProducing(self) -> None:
            self.paused = True

        def resumeProducing(self) -> None:
            self.paused = False

    cache = MetricCache()
    journal = make_journal(tmp_path, cache)
    journal.open()
    flow = FlowControl()
    transport = Transport()
    flow.register(transport)
    stats = Stats()
    sink = CacheSink(cache, CacheSinkConfig.from_settings(Settings()), stats, flow, Lines(),
                     journal=journal)
    segment_fd = journal.fd
    journal.fd = os.open("/dev/full", os.O_WRONLY)
    try:
        sink.put_many([("m", 1.0, 1.0)])
    finally:
        os.close(journal.fd)
        journal.fd = segment_fd
    assert transport.paused and cache.get("m") == [(1.0, 1.0)]  # the batch in hand is kept
    assert stats.snapshot_and_reset()[0]["errors"] == 1
    sink.check_journal()
    assert not transport.paused and not journal.backlog
    journal.close()


def test_sync_closes_rotated_segments_and_clears_dirty(tmp_path) -> None:
    cache = MetricCache()
    journal = make_journal(tmp_path, cache, fsync_interval=1.0)
    journal.open()
    journal.append([("m.%d" % i, 1.0, 2.0) for i in range(200)])
    journal.append([("n", 1.0, 2.0)])  # rotates: the old descriptor waits for the sync
    (rotated,) = journal.unsynced
    assert journal.dirty
    journal.sync()
    assert not journal.unsynced and not journal.dirty
    with pytest.raises(OSError):
        os.fstat(rotated)  # closed by the sync
    journal.close()
