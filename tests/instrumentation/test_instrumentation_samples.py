"""Samples (update times, bulk query sizes) become carbon's derived self-metrics without
keeping one value per update."""

from __future__ import annotations

import tracemalloc

import pytest

from carbon.instrumentation.reporter import cache_extra
from carbon.instrumentation.stats import Stats


def derived(stats: Stats) -> dict[str, float]:
    counters, samples = stats.snapshot_and_reset()
    out: dict[str, float] = {}
    cache_extra(counters, samples, out.__setitem__)
    return out


def test_derived_metrics_are_carbons_means_and_counts() -> None:
    stats = Stats()
    times = [0.002, 0.004, 0.009]
    for took in times:
        stats.append("updateTimes", took)
    stats.increment("committedPoints", 12)
    for size in (3, 5):
        stats.append("cacheBulkQuerySize", size)
    got = derived(stats)
    assert got["avgUpdateTime"] == pytest.approx(sum(times) / len(times))
    assert got["pointsPerUpdate"] == 4
    assert got["updateOperations"] == 3
    assert got["committedPoints"] == 12
    assert got["cache.bulk_queries_average_size"] == 4
    # the next interval starts empty: no average without updates, zero operations
    empty = derived(stats)
    assert "avgUpdateTime" not in empty and "cache.bulk_queries_average_size" not in empty
    assert empty["updateOperations"] == 0


def test_an_interval_of_many_updates_keeps_constant_memory() -> None:
    stats = Stats()
    stats.append("updateTimes", 0.001)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(100_000):
            stats.append("updateTimes", 0.001)
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert grown < 10_000  # a list of the values would hold ~3 MB
    assert derived(stats)["updateOperations"] == 100_001
