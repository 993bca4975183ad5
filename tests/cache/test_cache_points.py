"""MetricCache storage: the C batch append (carbon.cache._store) against its Python twin."""

from __future__ import annotations

import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from carbon.cache import store
from carbon.cache.store import MetricCache, add_points_py

native = store._native_add_batch
pytestmark = pytest.mark.skipif(
    native is None and not os.environ.get("CARBON_REQUIRE_NATIVE"),
    reason="the C accelerator is not built")

names = st.sampled_from(["a", "b.c", "d;x=1", "é.ü", ""])
numbers = st.one_of(st.floats(allow_nan=True, allow_infinity=True),
                    st.integers(-(2 ** 52), 2 ** 52))
batches = st.lists(st.tuples(names, numbers, numbers), max_size=60)


@settings(max_examples=300, deadline=None)
@given(first=batches, second=batches)
def test_c_append_equals_python(first, second) -> None:
    ours: dict = {}
    twin: dict = {}
    assert native(ours, first) == add_points_py(twin, first) == len(first)
    assert native(ours, second) == add_points_py(twin, second) == len(second)
    assert ours == twin
    assert all(type(points) is bytearray for points in ours.values())


def test_cache_round_trip_and_counts() -> None:
    cache = MetricCache()
    assert cache.add_batch([("m", 20.0, 1.0), ("n", 5, 2), ("m", 10.0, 3.0)]) == 3
    assert cache.size == 3 and cache.count("m") == 2 and dict(cache.counts()) == {"m": 2, "n": 1}
    assert dict(cache.oldest()) == {"m": 10.0, "n": 5.0}
    assert cache.get("m") == [(10.0, 3.0), (20.0, 1.0)]
    assert cache.add_batch([("m", 30.0, 4.0), ("n", 6.0, 5.0)]) == 2
    assert cache.size == 5
    taken = cache.pop_raw_for_write(["m"])[0]
    assert list(taken) == [20.0, 1.0, 10.0, 3.0, 30.0, 4.0] and cache.size == 2
    assert cache.get("m") == [(10.0, 3.0), (20.0, 1.0), (30.0, 4.0)]  # still visible
    cache.add_batch([("m", 10.0, 9.0)])
    assert cache.get("m") == [(10.0, 9.0), (20.0, 1.0), (30.0, 4.0)]  # newer wins
    cache.restore_raw("m", taken)  # put back before the newer point
    cache.written("m")
    assert cache.pop("m") == [(10.0, 9.0), (20.0, 1.0), (30.0, 4.0)] and cache.size == 2


@pytest.mark.parametrize("bad", [[("m", 1.0)], [(1, 1.0, 2.0)], [("m", "x", 1.0)],
                                 [["m", 1.0, 2.0]]])
def test_bad_items_raise_type_error(bad) -> None:
    data: dict = {}
    with pytest.raises(TypeError):
        native(data, [("ok", 1.0, 2.0)] + bad)
    assert list(data) == ["ok"]
