"""Cost of one write-strategy pick at 10k and 100k cached metrics: ours vs carbon 1.1.10.

Runs carbon 1.1.10's own cache module in its venv (bench/common.reference_venv) and
ours in this interpreter, on the same cache contents (each metric holding 1-5 points),
timing the same number of picks on both sides (a full pass, every metric once; for
``max``, whose reference pick is an O(n) scan, the first ``--picks``). Each side is
timed twice in A B B A order and the mean is reported.

    python bench/strategy_bench.py [--sizes 10000,100000] [--picks 2000]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from common import abba, reference_venv  # noqa: E402

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


def ours(size: int, picks: int, name: str) -> float:
    from carbon.cache.store import MetricCache
    from carbon.cache.strategies import make_strategy

    cache = MetricCache()
    cache.add_batch([("m%d" % i, float(t), 1.0) for i in range(size) for t in range(i % 5 + 1)])
    strategy = make_strategy(name, cache)
    started = time.perf_counter()
    for _ in range(picks):
        cache.pop(strategy.choose())
    return (time.perf_counter() - started) / picks


def reference(python: str, size: int, picks: int, name: str) -> float:
    """Seconds per pick of carbon 1.1.10's strategy, in its own venv."""
    out = subprocess.run([python, "-c", REFERENCE, str(size), str(picks), name],
                         capture_output=True, text=True, check=True, cwd="/",
                         env={"GRAPHITE_ROOT": "/tmp", "PATH": "/usr/bin:/bin"})
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--picks", type=int, default=200)
    args = parser.parse_args()
    python = str(reference_venv() / "bin" / "python")
    print("| strategy | cached metrics | carbon 1.1.10 us/pick | ours us/pick | ratio |")
    print("|---|---|---|---|---|")
    for name in ("max", "sorted", "naive"):
        for size in (int(s) for s in args.sizes.split(",")):
            # a full pass (every metric once); the reference's max is too slow for that, so
            # both sides are timed over the first picks (each costs the reference the same
            # O(n) scan).
            picks = min(args.picks, size) if name == "max" else size
            times: dict[str, list[float]] = {"reference": [], "ours": []}
            for side in abba("reference", "ours"):
                if side == "reference":
                    times[side].append(reference(python, size, picks, name))
                else:
                    times[side].append(ours(size, picks, name))
            ref = sum(times["reference"]) / len(times["reference"])
            mine = sum(times["ours"]) / len(times["ours"])
            print("| %s | %s | %.1f | %.1f | %.0fx |" % (name, format(size, ","), ref * 1e6,
                                                      mine * 1e6, ref / mine))


if __name__ == "__main__":
    main()
