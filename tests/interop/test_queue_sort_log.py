"""LOG_CACHE_QUEUE_SORTS: the same console lines as carbon 1.1.10's own cache code writes.

The reference's lines come from its cache module (carbon.cache, run in its venv and
drained the way its writer drains: while the cache holds a metric, take one); ours from a
writer with its threads, the way carbon-cache runs it.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.writer.test_writer_creator import NOW, Harness
from tests.interop.reference import carbon_venv, run_reference
from tests.support import wait_for

REFERENCE = r"""
import json, sys
from carbon.conf import settings
settings.LOG_CACHE_QUEUE_SORTS = True
settings.MIN_TIMESTAMP_LAG = 0
from carbon import log
lines = []
log.msg = lambda message, **kw: lines.append(message)
from carbon import cache
request = json.load(sys.stdin)
strategy = {"sorted": cache.SortedStrategy, "timesorted": cache.TimeSortedStrategy,
            "naive": cache.NaiveStrategy, "max": cache.MaxStrategy}[request["strategy"]]
metric_cache = cache._MetricCache(strategy)
for cycle in request["cycles"]:
    for metric, stamp, value in cycle:
        metric_cache.store(metric, (stamp, value))
    while metric_cache:
        metric_cache.drain_metric()
    lines.append("-- cycle --")
print(json.dumps(lines))
"""

CYCLES = [[("sorts.m%d" % i, NOW - 60 * k, float(k)) for i in range(5) for k in range(1, i + 2)],
          [("sorts.m%d" % i, NOW, 1.0) for i in range(3)],
          [("sorts.m%d" % i, NOW + 60, 1.0) for i in range(4)]]


def shape(lines: list[str]) -> list[str]:
    """Lines with their seconds blanked (the counts stay)."""
    return [re.sub(r"in [0-9.]+ seconds", "in S seconds", line) for line in lines]


def ours(root: Path, strategy: str) -> list[str]:
    """Console lines of our writer threads draining the same cycles, as carbon-cache runs
    them (batches of metrics, a creator thread)."""
    h = Harness(root, strategy=strategy, LOG_CACHE_QUEUE_SORTS=True, LOG_CREATES=False)
    h.writer.strategy.log = h.log
    out: list[str] = []
    try:
        h.writer.start()
        seen = 0
        for cycle in CYCLES:
            h.cache.add_batch(cycle)
            wait_for(h.writer.drained, what="drained")
            lines = [line.split(" :: ", 1)[1] for line in h.log_text("console").splitlines()]
            out += lines[seen:] + ["-- cycle --"]
            seen = len(lines)
    finally:
        h.close()
    return out


@pytest.mark.parametrize("strategy", ["sorted", "timesorted", "naive", "max"])
def test_queue_sort_lines_match_carbon(tmp_path: Path, strategy: str) -> None:
    reference = run_reference(carbon_venv(), REFERENCE, {"strategy": strategy,
                                                         "cycles": CYCLES})
    got = ours(tmp_path, strategy)
    assert shape(got) == shape(reference)
    if strategy in ("sorted", "timesorted"):
        assert "Sorted 5 cache queues in S seconds" in shape(reference)
        assert "Queue consumed in S seconds" in shape(reference)

