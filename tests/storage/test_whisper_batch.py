"""WhisperDatabase.write_batch (the C update, GIL released) against whisper 1.1.10.

Points go in as the metric cache holds them (interleaved pairs in arrival order); the
reference gets what the cache would hand whisper (``dedupe_sorted``). Items the C path
leaves (None) are written by ``write``, as the writer does.
"""

from __future__ import annotations

import os
import random
import sys
import tempfile
from array import array

import pytest
import whisper
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from carbon.cache.store import dedupe_sorted
from carbon.config.settings import Settings
from carbon.storage import whisper_backend
from carbon.storage.whisper_backend import WhisperDatabase
from tests.storage.test_whisper_identity import BASE_NOW, METHODS, file_setups, values

pytestmark = pytest.mark.skipif(
    whisper_backend.update_native is None and not os.environ.get("CARBON_REQUIRE_NATIVE"),
    reason="the C accelerator is not built")


def _read(path: str) -> bytes:
    with open(path, "rb") as fh:
        return fh.read()


def _raw(points) -> array:
    flat = array("d")
    for stamp, value in points:
        flat.append(stamp)
        flat.append(value)
    return flat


def _store(db: WhisperDatabase, items: list[tuple[str, array]], now: int) -> list[bool]:
    """write_batch, then ``write`` for what it left; per item whether C wrote it."""
    times = db.write_batch(items, now=now)
    for (metric, raw), took in zip(items, times, strict=True):
        if took is None:
            db.write(metric, dedupe_sorted(raw), now=now)
    return [took is not None for took in times]


@st.composite
def ordered_batches(draw, archives):
    """Batches of points mostly in time order within the first archive (the C path),
    some shuffled or with a timestamp given again later (C sorts them, the last value
    of a timestamp winning), stale or fractional (left to ``write``)."""
    step, count = archives[0]
    longest = max(s * p for s, p in archives)
    result = []
    for _ in range(draw(st.integers(1, 6))):
        advance = draw(st.integers(0, 2 * longest))
        offsets = draw(st.lists(st.integers(-3 * step, step * count), max_size=40))
        kind = draw(st.sampled_from(["ordered"] * 6 + ["fractional", "shuffled", "stale",
                                                       "repeated"]))
        stamps = sorted(set(offsets), reverse=True)  # oldest first once turned into times
        points = [(off, draw(values)) for off in stamps]
        if kind == "shuffled":
            points = draw(st.permutations(points))
        elif kind == "repeated" and points:
            for off in draw(st.lists(st.sampled_from(stamps), min_size=1, max_size=5)):
                points.insert(draw(st.integers(0, len(points))), (off, draw(values)))
        elif kind == "stale" and points:
            points = [(longest + step, 1.0)] + points
        result.append((advance, points, kind == "fractional"))
    return result


@st.composite
def scenarios(draw):
    archives, method, xff, start = draw(file_setups(near_epoch=400))
    return (archives, method, xff, start, draw(ordered_batches(archives)),
            draw(st.booleans()))


@settings(max_examples=int(os.environ.get("STORAGE_EXAMPLES", "600")), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(scenario=scenarios())
def test_batch_byte_identity(tmp_path, scenario) -> None:
    archives, method, xff, start, plan, python_sums = scenario
    with tempfile.TemporaryDirectory(dir=tmp_path) as root:
        db = WhisperDatabase.from_settings(Settings(LOCAL_DATA_DIR=root))
        # C sums add left to right: whisper's own results only before Python 3.12, where
        # sum() compensates, so from 3.12 the Python sums are always used (the default)
        db.python_sums = python_sums or sys.version_info >= (3, 12)
        try:
            _check_plan(db, archives, method, xff, start, plan)
        finally:
            db.close()


def _check_plan(db, archives, method, xff, start, plan) -> None:
    reference = db.get_filesystem_path("metric") + ".ref"
    db.create("metric", list(archives), xff, method)
    whisper.create(reference, list(archives), xff, method)
    now = start
    for advance, points, fractional in plan:
        now += advance
        given = [(now - off + (0.5 if fractional else 0), v) for off, v in points
                 if now - off >= 0]
        raw = _raw(given)
        whisper.update_many(reference, dedupe_sorted(raw), now=now)
        _store(db, [("metric", raw)], now)
        assert _read(db.get_filesystem_path("metric")) == _read(reference), \
            (archives, method, xff, now, given)


def test_common_writes_take_the_c_path(make_db, tmp_path) -> None:
    """Production-like schemas, every aggregation method, many metrics a batch (a
    2-descriptor cache: most through transient descriptors): every write is C's, and the
    files equal whisper's, including the first writes into empty lower archives."""
    archives = [(10, 360), (60, 1440), (300, 2016), (3600, 720)]
    rng = random.Random(7)
    db = make_db(WHISPER_FD_CACHE_SIZE=2)
    names = ["h%d.%s" % (i, m) for i in range(3) for m in METHODS]
    for name in names:
        method = name.split(".")[1]
        db.create(name, archives, 0.3, method)
        whisper.create(db.get_filesystem_path(name) + ".ref", archives, 0.3, method)
    now = BASE_NOW - BASE_NOW % 3600 + 3590
    used = []
    for _ in range(12):
        now += rng.choice([10, 60, 300, 500])
        items = []
        for name in names:
            stamps = sorted({now - 10 * k - rng.randrange(10) for k in range(50)})
            items.append((name, _raw((t, rng.uniform(-50, 50)) for t in stamps)))
            whisper.update_many(db.get_filesystem_path(name) + ".ref",
                                dedupe_sorted(items[-1][1]), now=now)
        used += _store(db, items, now)
    assert all(used)
    for name in names:
        path = db.get_filesystem_path(name)
        assert _read(path) == _read(path + ".ref"), name


@pytest.mark.parametrize("options", [{"WHISPER_LOCK_WRITES": True},
                                     {"WHISPER_AUTOFLUSH": True},
                                     {"WHISPER_FADVISE_RANDOM": True}])
def test_options(make_db, options) -> None:
    db = make_db(**options)
    db.create("a.b", [(60, 100), (600, 20)], 0.5, "average")
    path = db.get_filesystem_path("a.b")
    whisper.create(path + ".ref", [(60, 100), (600, 20)], 0.5, "average")
    now = BASE_NOW - BASE_NOW % 600
    raw = _raw((now - 60 * k, float(k)) for k in range(20, 0, -1))
    assert _store(db, [("a.b", raw)], now) == [True]
    whisper.update_many(path + ".ref", dedupe_sorted(raw), now=now)
    assert _read(path) == _read(path + ".ref")


def test_left_to_write(make_db) -> None:
    """What C does not take comes back as None and nothing of it was written."""
    db = make_db()
    now = BASE_NOW - BASE_NOW % 60
    for name in ("stale", "dups", "nan", "fresh"):
        db.create(name, [(60, 10), (600, 10)], 0.0, "sum")
    before = _read(db.get_filesystem_path("stale"))
    items = [("stale", _raw([(now - 3000, 1.0), (now - 60, 2.0)])),
             ("dups", _raw([(now - 60.5, 1.0), (now - 60.25, 2.0)])),
             ("nan", _raw([(now - 60, 1.0), (float("nan"), 2.0)])),
             ("missing", _raw([(now - 60, 1.0)])),
             ("fresh", _raw([(now - 60, 1.0)]))]
    assert [t is not None for t in db.write_batch(items, now=now)] == \
        [False, False, False, False, True]
    assert _read(db.get_filesystem_path("stale")) == before
    with pytest.raises(FileNotFoundError):
        db.write("missing", [(now - 60, 1.0)], now=now)


def test_points_out_of_time_order_take_the_c_path(make_db) -> None:
    """Points the cache holds out of time order (a backfill, a late sender) or with a
    timestamp given twice are sorted in C, the later arrival winning as in the cache's
    ``dedupe_sorted``, and written as whisper writes those sorted points."""
    db = make_db()
    now = BASE_NOW - BASE_NOW % 600
    given = {"late": [(now - 60, 1.0), (now - 240, 2.0), (now - 120, 3.0), (now - 600, 4.0)],
             "again": [(now - 120, 1.0), (now - 60, 2.0), (now - 120, 5.0), (now - 60, 6.0)],
             "reversed": [(now - 60 * k, float(k)) for k in range(1, 9)]}
    for name in given:
        db.create(name, [(60, 10), (600, 10)], 0.0, "sum")
        whisper.create(db.get_filesystem_path(name) + ".ref", [(60, 10), (600, 10)], 0.0,
                       "sum")
    items = [(name, _raw(points)) for name, points in given.items()]
    assert [t is not None for t in db.write_batch(items, now=now)] == [True, True, True]
    for name, raw in items:
        path = db.get_filesystem_path(name)
        whisper.update_many(path + ".ref", dedupe_sorted(raw), now=now)
        assert _read(path) == _read(path + ".ref"), name
    (start, end, step), stored = whisper.fetch(db.get_filesystem_path("again"), now - 300,
                                               now, now=now)
    found = dict(zip(range(start, end, step), stored, strict=True))
    assert (found[now - 180], found[now - 120], found[now - 60]) == (None, 5.0, 6.0)


def test_replaced_file_is_left_to_write(make_db, tmp_path) -> None:
    """A cached descriptor whose path now names another file (whisper-resize renames a
    new file into place): C leaves it, ``write`` reopens and writes the new file."""
    db = make_db()
    now = BASE_NOW - BASE_NOW % 60
    db.create("r", [(60, 10)], 0.0, "sum")
    path = db.get_filesystem_path("r")
    assert _store(db, [("r", _raw([(now - 60, 1.0)]))], now) == [True]  # fd now cached
    whisper.create(str(tmp_path / "new.wsp"), [(60, 20)], 0.0, "sum")
    os.rename(str(tmp_path / "new.wsp"), path)
    assert _store(db, [("r", _raw([(now, 2.0)]))], now) == [False]
    assert whisper.fetch(path, now - 120, now + 60, now=now)[1] == [None, 2.0]
    assert _store(db, [("r", _raw([(now + 60, 3.0)]))], now + 60) == [True]


def test_no_descriptor_leaks(make_db) -> None:
    db = make_db(WHISPER_FD_CACHE_SIZE=2)
    now = BASE_NOW - BASE_NOW % 60
    names = ["leak.m%d" % i for i in range(20)]
    for name in names:
        db.create(name, [(60, 10)], 0.0, "sum")
    before = len(os.listdir("/proc/self/fd"))
    for round_ in range(3):
        items = [(name, _raw([(now + 60 * round_, 1.0)])) for name in names]
        items.append(("leak.missing", _raw([(now, 1.0)])))
        assert sum(t is not None for t in db.write_batch(items, now=now + 60 * round_)) == 20
    assert len(os.listdir("/proc/self/fd")) <= before
    db.close()


def test_plain_sum_constant_matches_the_interpreter() -> None:
    """The C sums run natively only where sum() of floats adds left to right."""
    assert whisper_backend.update_native.PLAIN_SUM == (sys.version_info < (3, 12))


def test_many_archives(make_db) -> None:
    """A header longer than the first read (8 archives) is read whole."""
    archives = [(2 ** i, 20 + i) for i in range(8)]
    db = make_db(WHISPER_FD_CACHE_SIZE=1)
    db.create("deep", archives, 0.0, "max")
    path = db.get_filesystem_path("deep")
    whisper.create(path + ".ref", archives, 0.0, "max")
    now = BASE_NOW - BASE_NOW % 128
    for round_ in range(3):
        raw = _raw((now + round_ * 7 - k, float(k * round_)) for k in range(15, 0, -1))
        assert _store(db, [("deep", raw)], now + round_ * 7) == [True]
        whisper.update_many(path + ".ref", dedupe_sorted(raw), now=now + round_ * 7)
        assert _read(path) == _read(path + ".ref")


@pytest.mark.parametrize("idle", [0.0, 300.0])
def test_descriptors_stay_open_for_the_whole_batch(make_db, idle: float) -> None:
    """With a tiny fd cache whose descriptors count as idle at once, opening one file of
    a batch evicts another file's descriptor of the same batch: it must stay open (and
    its number not be reused) until the batch is written, and every file gets its own
    points."""
    db = make_db(WHISPER_FD_CACHE_SIZE=3, WHISPER_FD_CACHE_IDLE=idle)
    now = BASE_NOW - BASE_NOW % 60
    names = ["evict.m%02d" % i for i in range(12)]
    for name in names:
        db.create(name, [(60, 30)], 0.0, "sum")
    for round_ in range(4):
        stamp = now + 60 * round_
        items = [(name, _raw([(stamp, float(i + 100 * round_))]))
                 for i, name in enumerate(names)]
        # reverse order every other round: cached and uncached files interleave
        _store(db, items if round_ % 2 else items[::-1], stamp)
    for i, name in enumerate(names):
        series = whisper.fetch(db.get_filesystem_path(name), now - 60, now + 180,
                               now=now + 240)[1]
        assert series == [float(i + 100 * r) for r in range(4)], name
    db.close()


def test_locked_writes_read_a_fresh_file_another_writer_filled(make_db) -> None:
    """WHISPER_LOCK_WRITES: a file the cache has just created (header only) that another
    writer honouring the lock filled meanwhile (a rebalance's merge anchors the archive
    at its own oldest point) is read before the cache's first write, so both writers'
    points stay where whisper reads them (assuming it empty put the cache's point in the
    first slot, re-anchoring the archive: the merged points read as missing)."""
    db = make_db(WHISPER_LOCK_WRITES=True)
    now = BASE_NOW - BASE_NOW % 60
    db.create("fresh.merged", [(60, 100)], 0.5, "average")
    path = db.get_filesystem_path("fresh.merged")
    older = [(now - 60 * k, float(k)) for k in range(10, 4, -1)]
    whisper.update_many(path, older, now=now)  # the other writer, before the cache's first
    assert _store(db, [("fresh.merged", _raw([(now - 60, 1.0)]))], now) == [True]
    (start, _end, step), got = whisper.fetch(path, now - 660, now, now=now)
    stored = {start + i * step: v for i, v in enumerate(got) if v is not None}
    assert stored == dict(older) | {now - 60: 1.0}
