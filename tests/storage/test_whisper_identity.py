"""Byte identity of WhisperDatabase.write/create with whisper 1.1.10's update_many/create."""

from __future__ import annotations

import os
import random
import tempfile

import pytest
import whisper
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from carbon.config.settings import Settings
from carbon.storage.whisper_backend import WhisperDatabase

METHODS = sorted(whisper.aggregationMethods)
BASE_NOW = 1_700_000_000


@st.composite
def schemas(draw) -> list[tuple[int, int]]:
    """1-3 archives that whisper.validateArchiveList accepts, small enough to wrap often."""
    step = draw(st.sampled_from([1, 2, 5, 10, 60]))
    points = draw(st.integers(2, 40))
    archives = [(step, points)]
    for _ in range(draw(st.integers(0, 2))):
        prev_step, prev_points = archives[-1]
        step = prev_step * draw(st.integers(2, min(6, prev_points)))
        least = max(2, prev_step * prev_points // step + 1)
        archives.append((step, draw(st.integers(least, least + 30))))
    whisper.validateArchiveList(list(archives))
    return archives


values = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(-1000, 1000).map(float),
    st.sampled_from([0.0, -0.0, 1.0, -1.0]),
)


@st.composite
def batches(draw, archives: list[tuple[int, int]]) -> list[tuple[int, list]]:
    """Write batches: (seconds to advance now, points) with future, stale, duplicate,
    out-of-order and fractional timestamps."""
    first_step, first_points = archives[0]
    longest = max(s * p for s, p in archives)
    offsets = st.integers(-(first_step * first_points + 3 * first_step), longest * 13 // 10)
    result = []
    for _ in range(draw(st.integers(1, 5))):
        advance = draw(st.integers(0, 2 * longest))
        points = draw(st.lists(st.tuples(offsets, values, st.booleans()), min_size=0,
                               max_size=40))
        duplicates = draw(st.lists(st.tuples(st.integers(0, 1000), values), max_size=6))
        if points:
            points += [(points[i % len(points)][0], v, False) for i, v in duplicates]
        order = draw(st.permutations(range(len(points))))
        result.append((advance, [points[i] for i in order]))
    return result


@st.composite
def file_setups(draw, near_epoch: int = 300) -> tuple:
    """(archives, aggregation method, xFilesFactor, start time) of one file. Near the
    epoch, intervals of 0 occur: whisper never ends a run after one."""
    archives = draw(schemas())
    start = draw(st.sampled_from([BASE_NOW + 10_000, near_epoch])) - draw(st.integers(0, 300))
    return (archives, draw(st.sampled_from(METHODS)),
            draw(st.sampled_from([0.0, 0.1, 0.25, 0.5, 0.7, 1.0]) | st.floats(0, 1)), start)


@st.composite
def scenarios(draw):
    archives, method, xff, start = draw(file_setups())
    return archives, method, xff, start, draw(batches(archives))


def _materialise(now: int, points: list) -> list[tuple[float, float]]:
    """Points ``off`` seconds before ``now``; fractional ones as floats whisper truncates."""
    return [((now - off + 0.75) if frac else (now - off), v) for off, v, frac in points
            if now - off >= 0]


def _read(path: str) -> bytes:
    with open(path, "rb") as fh:
        return fh.read()


@settings(max_examples=int(os.environ.get("STORAGE_EXAMPLES", "600")), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(scenario=scenarios())
def test_update_many_byte_identity(tmp_path, scenario) -> None:
    archives, method, xff, start, plan = scenario
    with tempfile.TemporaryDirectory(dir=tmp_path) as root:
        db = WhisperDatabase.from_settings(Settings(LOCAL_DATA_DIR=os.path.join(root, "ours")))
        reference = os.path.join(root, "reference.wsp")
        whisper.create(reference, list(archives), xff, method)
        db.create("metric", list(archives), xff, method)
        ours = db.get_filesystem_path("metric")
        assert _read(ours) == _read(reference)
        now = start
        for advance, points in plan:
            now += advance
            datapoints = _materialise(now, points)
            whisper.update_many(reference, list(datapoints), now=now)
            db.write("metric", list(datapoints), now=now)
            assert _read(ours) == _read(reference), (archives, method, xff, now, datapoints)
        db.close()


@pytest.mark.parametrize("seed", range(4))
def test_realistic_schema_identity(make_db, tmp_path, seed: int) -> None:
    """Production-like retentions, many metrics, 50-point batches with late points; odd
    seeds with a 2-descriptor cache (most writes through transient descriptors)."""
    rng = random.Random(seed)
    archives = [(10, 360), (60, 1440), (300, 2016), (3600, 720)][: 2 + seed % 3]
    db = make_db(WHISPER_FD_CACHE_SIZE=2 if seed % 2 else 1024)
    now = BASE_NOW + rng.randrange(3600)
    names = ["host%d.cpu.%s" % (i, m) for i, m in enumerate(METHODS)]
    for name in names:
        whisper.create(str(tmp_path / (name + ".ref")), list(archives), 0.5,
                       name.rsplit(".", 1)[1])
        db.create(name, list(archives), 0.5, name.rsplit(".", 1)[1])
    for _ in range(30):
        now += rng.choice([10, 60, 300, 500])
        for name in names:
            points = [(now - 10 * k - rng.random() * 10, rng.uniform(-50, 50))
                      for k in range(50)]
            points += [(now - rng.randrange(20 * 86400), rng.random()) for _ in range(3)]
            rng.shuffle(points)
            whisper.update_many(str(tmp_path / (name + ".ref")), list(points), now=now)
            db.write(name, points, now=now)
    for name in names:
        assert _read(db.get_filesystem_path(name)) == _read(str(tmp_path / (name + ".ref")))


def test_future_run_longer_than_archive_matches(make_db, tmp_path) -> None:
    """A contiguous run of future points longer than the archive: whisper writes past the
    archive's end (into the next archive, even past the file's end); so must we."""
    db = make_db()
    reference = str(tmp_path / "ref.wsp")
    for archives in ([(1, 5), (5, 10)], [(1, 6)]):
        os.path.exists(reference) and os.unlink(reference)
        name = "spill%d" % len(archives)
        whisper.create(reference, list(archives), 0.0, "sum")
        db.create(name, list(archives), 0.0, "sum")
        now = BASE_NOW
        points = [(now + k, float(k)) for k in range(-5, 25)]
        for batch in (points, points[::3], [(now + 3, 9.0)]):
            whisper.update_many(reference, list(batch), now=now)
            db.write(name, batch, now=now)
            assert _read(db.get_filesystem_path(name)) == _read(reference)


def test_duplicate_timestamps_first_given_wins(make_db, tmp_path) -> None:
    """Within one call whisper keeps the earliest-given value of an exact duplicate, and
    the newest timestamp among those sharing an interval."""
    db = make_db()
    db.create("dup", [(60, 10), (600, 10)], 0.0, "average")
    now = BASE_NOW - BASE_NOW % 60
    db.write("dup", [(now - 120, 1.0), (now - 120, 2.0), (now - 31, 3.0), (now - 119, 4.0)],
             now=now)
    path = db.get_filesystem_path("dup")
    (_, _, step), series = whisper.fetch(path, now - 180, now, now=now)
    assert step == 60
    assert series[:2] == [4.0, 3.0]
    db.write("dup", [(now - 30, 7.0), (now - 30, 8.0)], now=now)
    assert whisper.fetch(path, now - 180, now, now=now)[1][:2] == [4.0, 7.0]


@pytest.mark.parametrize("variant", ["default", "sparse", "fallocate", "unsorted", "defaults"])
def test_create_byte_identity(make_db, tmp_path, variant: str) -> None:
    archives = [(10, 8640), (60, 2880), (3600, 24 * 400)]
    if variant == "unsorted":
        archives.reverse()
    given = list(archives)
    db = make_db(WHISPER_SPARSE_CREATE=variant == "sparse",
                 WHISPER_FALLOCATE_CREATE=variant == "fallocate")
    reference = str(tmp_path / "ref.wsp")
    xff, method = (None, None) if variant == "defaults" else (0.3, "max")
    whisper.create(reference, list(archives), xff, method, sparse=variant == "sparse",
                   useFallocate=variant == "fallocate")
    db.create("a.b.c", archives, xff, method)
    assert archives == given  # the caller's list is not sorted in place
    path = db.get_filesystem_path("a.b.c")
    assert _read(path) == _read(reference)
    if variant == "sparse":
        assert os.stat(path).st_blocks * 512 < os.stat(path).st_size
