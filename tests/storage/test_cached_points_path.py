"""The cache -> writer fast paths: ``dedupe_sorted`` (SortedPoints columns), the column
path of ``prepare_points`` and the consecutive-run path of the writer give what the
plain paths give, and files stay byte-identical to whisper.update_many."""

from __future__ import annotations

import os
import tempfile
from array import array

import whisper
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from carbon.cache.store import MetricCache, SortedPoints, dedupe_sorted
from carbon.config.settings import Settings
from carbon.storage.whisper_backend import WhisperDatabase
from carbon.storage.whisper_points import consecutive_intervals, prepare_points

NOW = 1_700_000_000

stamps = st.one_of(
    st.integers(NOW - 4000, NOW + 100).map(float),
    st.floats(NOW - 4000, NOW + 100, allow_nan=False),  # fractional: int() collisions
    st.integers(0, 30).map(float),  # near the epoch: interval 0
)
pairs = st.lists(st.tuples(stamps, st.floats(allow_nan=False) | st.just(float("nan"))),
                 max_size=60)


def _flat(points: list) -> array:
    return array("d", [x for pair in points for x in pair])


@settings(max_examples=400, deadline=None)
@given(points=pairs, ordered=st.booleans())
def test_dedupe_sorted_matches_the_dict_path(points, ordered) -> None:
    if ordered:
        points = sorted(dict(points).items())
    raw = _flat(points)
    result = dedupe_sorted(raw)
    reference = sorted(dict(zip(raw[::2], raw[1::2], strict=True)).items())
    assert [(repr(t), repr(v)) for t, v in result] == \
        [(repr(t), repr(v)) for t, v in reference]
    if isinstance(result, SortedPoints):
        assert repr(list(zip(*result.columns, strict=True))) == repr(list(result))
        assert list(result.columns[0]) == sorted(set(result.columns[0]))


@settings(max_examples=400, deadline=None)
@given(points=pairs)
def test_prepare_points_columns_path_matches_the_plain_path(points) -> None:
    deduped = dedupe_sorted(_flat(sorted(dict(points).items())))
    assert repr(prepare_points(deduped)) == repr(prepare_points(list(deduped)))


@settings(max_examples=300, deadline=None)
@given(points=st.lists(st.tuples(st.integers(-50, 50), st.floats(allow_nan=False)),
                       min_size=2, max_size=40), step=st.sampled_from([1, 10, 60]))
def test_consecutive_intervals_only_for_exact_runs(points, step) -> None:
    points = sorted((abs(t), v) for t, v in points)
    found = consecutive_intervals(points, step)
    stamps = [t for t, _ in points]
    exact = stamps[0] > 0 and stamps == list(range(stamps[0], stamps[0] + step * len(stamps),
                                                   step)) and stamps[0] % step == 0
    assert (found is not None) == exact
    assert found is None or found == stamps


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batches=st.lists(st.tuples(pairs, st.booleans()), min_size=1, max_size=4),
       archives=st.sampled_from([[(1, 300)], [(10, 60), (60, 100)], [(60, 100)]]),
       method=st.sampled_from(["average", "sum", "last", "max"]))
def test_cache_to_file_is_byte_identical(tmp_path, batches, archives, method) -> None:
    with tempfile.TemporaryDirectory(dir=tmp_path) as root:
        db = WhisperDatabase.from_settings(Settings(LOCAL_DATA_DIR=os.path.join(root, "ours")))
        reference = os.path.join(root, "reference.wsp")
        whisper.create(reference, archives, 0.5, method)
        db.create("m", archives, 0.5, method)
        cache = MetricCache()
        for points, ordered in batches:
            if ordered:  # in time order, as points usually come: the fast paths
                points = sorted(dict(points).items())
            cache.add_batch([("m", t, v) for t, v in points])
            taken = dedupe_sorted(cache.pop_raw_for_write(["m"])[0])  # as the writer
            whisper.update_many(reference, list(taken), now=NOW)
            if taken:
                db.write("m", taken, now=NOW)
            cache.written("m")
            with open(reference, "rb") as ref, open(db.get_filesystem_path("m"), "rb") as new:
                assert new.read() == ref.read()
        db.close()
