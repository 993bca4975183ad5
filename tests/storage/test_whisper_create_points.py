"""New files made with their first points in the create's own write
(``WhisperDatabase.create_many(requests, points)``), against whisper 1.1.10: the file
must equal ``whisper.create`` + ``update_many`` byte for byte, then and after later
writes; what the create cannot write that way is left for the writer (entry None).
"""

from __future__ import annotations

import os
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
from tests.storage.test_whisper_batch import _raw, _read, _store, ordered_batches
from tests.storage.test_whisper_identity import BASE_NOW, file_setups

pytestmark = pytest.mark.skipif(
    whisper_backend.update_native is None and not os.environ.get("CARBON_REQUIRE_NATIVE"),
    reason="the C accelerator is not built")

FILLS = {  # carbon.conf options -> whisper.create's keywords (the same bytes)
    "default": ({}, {}),
    "fallocate": ({"WHISPER_FALLOCATE_CREATE": True}, {"useFallocate": True}),
    "sparse": ({"WHISPER_SPARSE_CREATE": True}, {"sparse": True}),
}


def _create_with(db: WhisperDatabase, metric: str, archives, xff, method, raw: array,
                 now: int):
    """create_many with points, at ``now`` (the C update's clock)."""
    return db.create_many([(metric, list(archives), xff, method)], [raw], now=now)[0]


@settings(max_examples=int(os.environ.get("STORAGE_EXAMPLES", "300")), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(setup=file_setups(near_epoch=400), data=st.data(),
       fill=st.sampled_from(sorted(FILLS)), keep=st.booleans())
def test_created_with_points_equals_whisper(tmp_path, setup, data, fill, keep) -> None:
    archives, method, xff, start = setup
    plan = data.draw(ordered_batches(archives))
    options, whisper_options = FILLS[fill]
    with tempfile.TemporaryDirectory(dir=tmp_path) as root:
        db = WhisperDatabase.from_settings(Settings(LOCAL_DATA_DIR=root, WHISPER_FD_CACHE_SIZE=1,
                                      **options))
        db.python_sums = sys.version_info >= (3, 12)
        if not keep:  # a full descriptor cache: the create closes the descriptor
            db.create("other", [(60, 10)], None, None)
        try:
            path = db.get_filesystem_path("metric")
            reference = os.path.join(root, "reference.wsp")
            whisper.create(reference, list(archives), xff, method, **whisper_options)
            now = start
            for number, (advance, points, fractional) in enumerate(plan):
                now += advance
                given_ = [(now - off + (0.5 if fractional else 0), v) for off, v in points
                          if now - off >= 0]
                raw = _raw(given_)
                whisper.update_many(reference, dedupe_sorted(raw), now=now)
                if number == 0:
                    entry = _create_with(db, "metric", archives, xff, method, raw, now)
                    assert entry is None or type(entry) is float
                    if entry is None:  # left to the writer, on the file just made
                        _store(db, [("metric", raw)], now)
                else:
                    _store(db, [("metric", raw)], now)
                assert _read(path) == _read(reference), (archives, method, xff, now, given_)
        finally:
            db.close()


def _reference(db: WhisperDatabase, metric: str) -> str:
    """Where whisper's own copy of ``metric``'s file goes (beside the data folder)."""
    folder = os.path.join(os.path.dirname(db.data_dir), "reference")
    os.makedirs(folder, exist_ok=True)
    return os.path.join(folder, metric + ".wsp")


def _points(now: int, step: int, count: int) -> array:
    return _raw((now - step * k, 1.5 * k) for k in range(count, 0, -1))


@pytest.mark.parametrize("fill", sorted(FILLS))
def test_points_spanning_archives_in_a_small_file(make_db, fill: str) -> None:
    """A three-archive file of 2.2 KB: the first points fill archive 0 and propagate
    into both lower archives, all in the create's one write; later points as usual."""
    archives = [(10, 60), (60, 60), (300, 60)]
    db = make_db(**FILLS[fill][0])
    db.python_sums = True  # the image's sums through Python's sum(), with the GIL held
    path, ref = db.get_filesystem_path("small.one"), _reference(db, "small.one")
    whisper.create(ref, archives, 0.3, "average", **FILLS[fill][1])
    now = BASE_NOW - BASE_NOW % 300 + 290
    first = _points(now, 10, 40)  # 400 s: several 60 s and 300 s intervals
    whisper.update_many(ref, dedupe_sorted(first), now=now)
    assert type(_create_with(db, "small.one", archives, 0.3, "average", first, now)) is float
    assert _read(path) == _read(ref)
    body = _read(path)[16 + 3 * 12:]
    assert body.count(bytes(12)) < 180 - 40  # the points are there
    for later in (now + 70, now + 400):
        more = _points(later, 10, 12)
        whisper.update_many(ref, dedupe_sorted(more), now=later)
        assert _store(db, [("small.one", more)], later) == [True]
        assert _read(path) == _read(ref)


def test_what_the_image_cannot_hold_is_left_to_the_writer(make_db) -> None:
    """A large file whose lower archives start past the create's one write (20 KiB):
    made plainly (entry None) and written by write_batch, equal to whisper."""
    archives = [(10, 2000), (60, 1440)]  # archive 1 starts at 24 KB
    db = make_db()
    path, ref = db.get_filesystem_path("large.one"), _reference(db, "large.one")
    whisper.create(ref, archives, 0.5, "max")
    now = BASE_NOW - BASE_NOW % 60 + 50
    first = _points(now, 10, 30)
    whisper.update_many(ref, dedupe_sorted(first), now=now)
    assert _create_with(db, "large.one", archives, 0.5, "max", first, now) is None
    assert os.path.getsize(path) == os.path.getsize(ref)
    assert _store(db, [("large.one", first)], now) == [True]
    assert _read(path) == _read(ref)


def test_single_archive_large_file_takes_its_points(make_db) -> None:
    """The 100k bench's schema (10s:1d, 103 KB, fallocated): the points ride in the
    header's write, the body is fallocated, the file equals whisper's."""
    archives = [(10, 8640)]
    db = make_db()
    path, ref = db.get_filesystem_path("bench.m"), _reference(db, "bench.m")
    whisper.create(ref, archives, 0.5, "average")
    now = BASE_NOW - BASE_NOW % 10
    first = _points(now, 10, 5)
    whisper.update_many(ref, dedupe_sorted(first), now=now)
    assert type(_create_with(db, "bench.m", archives, 0.5, "average", first, now)) is float
    assert _read(path) == _read(ref)
    assert db.open_files == 1  # room in the descriptor cache: kept for the next write


def test_an_existing_file_is_left_untouched(make_db) -> None:
    db = make_db()
    path = db.get_filesystem_path("there.one")
    os.makedirs(os.path.dirname(path))
    with open(path, "wb") as handle:
        handle.write(b"not whisper")
    now = BASE_NOW
    entry = _create_with(db, "there.one", [(10, 60)], 0.5, "average", _points(now, 10, 3),
                         now)
    assert isinstance(entry, FileExistsError)
    assert _read(path) == b"not whisper"
