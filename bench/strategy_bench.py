"""Cost of one write-strategy pick as the cache grows (10k, 100k, 1M cached metrics):
ours vs carbon 1.1.10.

Runs carbon 1.1.10's own cache module in its venv (bench/common.reference_venv) and
ours in this interpreter, on the same cache contents (each metric holding 1-5 points).
A pick is the strategy's choice plus taking that metric's points out (carbon's
``drain_metric``; ours ``choose`` + ``MetricCache.pop``). Ours is timed over a full pass
(every metric once) for every strategy, so building a pass (a sort, a heap) is paid
inside the timing. The reference is timed over a full pass for ``sorted`` and
``naive``; its ``max`` rescans every metric on every pick (O(n) a pick, a full pass
O(n^2)), so only its first ``--picks`` picks are timed and a full pass is extrapolated
from them (n picks at the measured cost, an upper bound, since the cache shrinks as it
drains). Each side is timed twice in A B B A order and the mean is reported.

    python bench/strategy_bench.py [--sizes 10000,100000,1000000] [--picks 100]
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from common import abba, reference_venv  # noqa: E402

OURS_ONLY = ("timesorted", "bucketmax")  # strategies carbon 1.1.10 does not have
REFERENCE = r"""
import json, sys, time
from carbon.conf import settings
settings.LOG_CACHE_QUEUE_SORTS = False
from carbon import cache as ref
size, picks, name = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
strategy = {"max": ref.MaxStrategy, "sorted": ref.SortedStrategy, "naive": ref.NaiveStrategy}[name]
c = ref._MetricCache(strategy)
for i in range(size):
    for t in range(i % 5 + 1):
        c.store("m%d" % i, (t, 1.0))
started = time.perf_counter()
for _ in range(picks):
    c.drain_metric()
print(json.dumps((time.perf_counter() - started) / picks))
"""


def ours(size: int, name: str) -> float:
    """Seconds per pick of our strategy over a full pass."""
    from carbon.cache.store import MetricCache
    from carbon.cache.strategies import StrategyConfig, make_strategy
    from carbon.config.settings import Settings

    cache = MetricCache()
    cache.add_batch([("m%d" % i, float(t), 1.0) for i in range(size) for t in range(i % 5 + 1)])
    strategy = make_strategy(name, cache, StrategyConfig.from_settings(Settings()))
    choose, pop = strategy.choose, cache.pop
    started = time.perf_counter()
    for _ in range(size):
        pop(choose())
    took = time.perf_counter() - started
    assert not cache, "a full pass left metrics in the cache"
    return took / size


def reference(python: str, size: int, picks: int, name: str) -> float:
    """Seconds per pick of carbon 1.1.10's strategy, in its own venv."""
    out = subprocess.run([python, "-c", REFERENCE, str(size), str(picks), name],
                         capture_output=True, text=True, check=True, cwd="/",
                         env={"GRAPHITE_ROOT": "/tmp", "PATH": "/usr/bin:/bin"})
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--picks", type=int, default=100,
                        help="picks timed for carbon 1.1.10's max (an O(n) scan each)")
    parser.add_argument("--strategies", default="max,sorted,naive,timesorted,bucketmax")
    args = parser.parse_args()
    python = str(reference_venv() / "bin" / "python")
    sizes = [int(s) for s in args.sizes.split(",")]
    print("| strategy | cached metrics | carbon 1.1.10 us/pick | ours us/pick (full pass) "
          "| ours us/pick / log2(n) | ratio |")
    print("|---|---|---|---|---|---|")
    for name in args.strategies.split(","):
        for size in sizes:
            sides = ["ours"] if name in OURS_ONLY else abba("reference", "ours")
            picks = min(args.picks, size) if name == "max" else size
            times: dict[str, list[float]] = {"reference": [], "ours": []}
            for side in sides:
                if side == "reference":
                    times[side].append(reference(python, size, picks, name))
                else:
                    times[side].append(ours(size, name))
            mine = sum(times["ours"]) / len(times["ours"])
            if times["reference"]:
                ref = sum(times["reference"]) / len(times["reference"])
                label = "%.1f" % (ref * 1e6)
                if picks < size:
                    label += " (first %d picks; full pass ~%.0f s extrapolated)" % (
                        picks, ref * size)
                ratio = "%.1fx" % (ref / mine)
            else:
                label, ratio = "-", "-"
            print("| %s | %s | %s | %.2f | %.3f | %s |" % (
                name, format(size, ","), label, mine * 1e6, mine * 1e6 / math.log2(size),
                ratio), flush=True)


if __name__ == "__main__":
    main()
