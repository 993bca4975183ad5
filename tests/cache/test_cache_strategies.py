"""Cache storage, last-write-wins, and every write strategy."""

from __future__ import annotations

import sys

import pytest

from carbon.cache.store import MetricCache, dedupe_sorted
from carbon.cache.strategies import MaxStrategy, StrategyConfig, make_strategy
from carbon.config.settings import Settings
from carbon.plugins import WRITE_STRATEGIES


def test_last_write_wins_and_sorted_pop():
    cache = MetricCache()
    cache.add_batch([("a", 20, 1.0), ("a", 10, 2.0), ("a", 20, 3.0), ("b", 5, 4.0)])
    assert cache.size == 4 and len(cache) == 2
    assert cache.get("a") == [(10, 2.0), (20, 3.0)]
    assert cache.pop("a") == [(10, 2.0), (20, 3.0)]
    assert cache.size == 1 and "a" not in cache


def test_restore_keeps_newer_points_newer():
    cache = MetricCache()
    assert cache.add_batch([("a", i, i) for i in range(4)]) == 4
    assert cache.add_batch([("b", 1, 1)]) == 1
    points = cache.pop("a")
    cache.add_batch([("a", 100, 9.0)])
    cache.restore("a", points)
    assert cache.get("a")[-1] == (100, 9.0) and cache.size == 6


@pytest.mark.parametrize("name", ["sorted", "max", "naive", "timesorted", "bucketmax"])
def test_each_strategy_visits_every_metric_once_per_pass(name):
    cache = MetricCache()
    cache.add_batch([("m%d" % i, 1000 - i, 1.0) for i in range(50)])
    cache.add_batch([("m7", t, 1.0) for t in range(2000, 2010)])
    strategy = make_strategy(name, cache, StrategyConfig.from_settings(Settings()))
    seen = []
    while cache:
        metric = strategy.choose()
        seen.append(metric)
        cache.pop(metric)
    assert sorted(seen) == sorted("m%d" % i for i in range(50))
    assert strategy.choose() is None
    if name in ("sorted", "max", "bucketmax"):
        assert seen[0] == "m7"  # the metric with most points goes first
    if name == "timesorted":
        assert seen[0] == "m49"  # the oldest point first


@pytest.mark.parametrize("name", ["sorted", "max", "naive", "timesorted", "bucketmax"])
def test_choose_many_gives_what_choose_gives_none_twice(name):
    """The writer's batch of picks: the same metrics in the same order as ``choose`` one
    at a time, what ``skip`` holds left out, and no metric twice in one answer when a
    new pass begins."""
    def filled() -> MetricCache:
        cache = MetricCache()
        cache.add_batch([("m%d" % i, 1000 - i, 1.0) for i in range(50)])
        cache.add_batch([("m%d" % (i * 3), t, 1.0)
                         for i in range(10) for t in range(2000, 2000 + i)])
        return cache
    config = StrategyConfig.from_settings(Settings())
    one, many = filled(), filled()
    first, second = make_strategy(name, one, config), make_strategy(name, many, config)
    first.skip = second.skip = {"m5", "m11"}
    singles = []
    while (metric := first.choose()) is not None:
        singles.append(metric)
        one.pop(metric)
    batches = []
    while batch := second.choose_many(7):
        assert len(batch) <= 7 and len(set(batch)) == len(batch)
        batches.append(batch)
        for metric in batch:
            many.pop(metric)
    assert [metric for batch in batches for metric in batch] == singles
    assert set(singles) == {"m%d" % i for i in range(50)} - {"m5", "m11"}
    # a pass that ends inside an answer: the answer ends there; the metrics still cached
    # come again from the next pass, in a later answer
    cache = MetricCache()
    cache.add_batch([("n%d" % i, 1, 1.0) for i in range(5)])
    strategy = make_strategy(name, cache, config)
    assert len(strategy.choose_many(3)) == 3
    rest = strategy.choose_many(3)
    assert len(rest) == len(set(rest)) <= 3
    again = strategy.choose_many(10)
    assert len(again) == len(set(again)) and set(again) <= {"n%d" % i for i in range(5)}


def test_max_strategy_does_not_rescan_per_pick():
    cache = MetricCache()
    n = 100_000
    cache.add_batch([("m%d" % i, 1, 1.0) for i in range(n)])
    strategy = MaxStrategy(cache, StrategyConfig.from_settings(Settings()))
    for _ in range(n):
        cache.pop(strategy.choose())
    # One snapshot (heap) for the whole pass, not one O(n) scan per pick.
    assert strategy.passes == 1 and not cache


def test_max_strategy_most_points_first_ties_in_arrival_order():
    cache = MetricCache()
    cache.add_batch([("z", 1, 1.0), ("b", 1, 1.0), ("b", 2, 1.0), ("a", 1, 1.0),
                     ("y", 1, 1.0), ("y", 2, 1.0), ("y", 3, 1.0)])
    strategy = MaxStrategy(cache, StrategyConfig.from_settings(Settings()))
    order = []
    while cache:
        order.append(strategy.choose())
        cache.pop(order[-1])
    assert order == ["y", "b", "z", "a"]  # carbon's max(): the first of equals wins


def test_strategies_are_registered_plugins():
    assert {"sorted", "max", "naive", "timesorted", "bucketmax"} <= set(WRITE_STRATEGIES.names())


def test_cache_is_compact():
    cache = MetricCache()
    cache.add_batch([("metric.%d" % (i % 100), float(i), float(i)) for i in range(10_000)])
    per_metric = sum(sys.getsizeof(a) for a in cache.data.values())
    assert per_metric / 10_000 < 24  # about 16 bytes a point plus array headers


def test_points_being_written_stay_visible_until_written():
    cache = MetricCache()
    cache.add_batch([("a", 10, 1.0), ("a", 20, 2.0)])
    taken = dedupe_sorted(cache.pop_raw_for_write(["a"])[0])  # as the writer
    assert taken == [(10, 1.0), (20, 2.0)] and cache.size == 0 and "a" not in cache
    cache.add_batch([("a", 20, 5.0), ("a", 30, 3.0)])
    # carbonlink sees what is on its way to disk plus newer points; newer values win
    assert cache.get("a") == [(10, 1.0), (20, 5.0), (30, 3.0)]
    cache.written("a")
    assert cache.get("a") == [(20, 5.0), (30, 3.0)]
