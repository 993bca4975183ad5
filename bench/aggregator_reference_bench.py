"""The same workload through carbon 1.1.10's AggregationProcessor, in-process.

For comparison with bench/aggregator_bench.py; run it with any Python, it runs itself
again in the reference venv (bench/common.reference_venv, installed on first use):

    python bench/aggregator_reference_bench.py [--points N] [--method sum]

The reference processes one point per generator call; buffers start a Twisted
LoopingCall each (scheduled on the reactor, which is never run here).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import reference_venv  # noqa: E402


def in_reference_venv() -> None:
    """Run this script again with the reference venv's Python, unless this is it."""
    venv = reference_venv()
    if Path(sys.prefix).resolve() == venv.resolve():
        return
    env = dict(os.environ, GRAPHITE_ROOT=os.environ.get("GRAPHITE_ROOT", "/tmp"))
    sys.exit(subprocess.run([str(venv / "bin" / "python"), __file__, *sys.argv[1:]],
                            env=env, cwd="/").returncode)


def main() -> None:
    in_reference_venv()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=1_000_000)
    parser.add_argument("--method", default="sum")
    parser.add_argument("--cache-max", type=int, default=0,
                        help="CACHE_METRIC_NAMES_MAX (0, the default, is an unbounded dict)")
    args = parser.parse_args()

    from carbon.aggregator.processor import AggregationProcessor
    from carbon.aggregator.rules import AggregationRule, RuleManager
    from carbon.conf import settings

    settings.FORWARD_ALL = True
    settings.LOG_AGGREGATOR_MISSES = False
    settings.CACHE_METRIC_NAMES_MAX = args.cache_max
    RuleManager.rules = [
        AggregationRule("<app>.*.requests", "<app>.all.requests", args.method, 60)]
    apps, hosts, start = 1000, 100, 1_700_000_020
    names = ["app%d.host%d.requests" % (a, h) for h in range(hosts) for a in range(apps)]
    points = [(names[i % len(names)], (float(start + (i * 120) // args.points), 1.0))
              for i in range(args.points)]
    proc = AggregationProcessor()
    t0 = time.perf_counter()
    passed = 0
    for metric, datapoint in points:
        for _ in proc.process(metric, datapoint):
            passed += 1
    elapsed = time.perf_counter() - t0
    print("reference carbon 1.1.10 method=%s points=%d CACHE_METRIC_NAMES_MAX=%d: "
          "%.0f points/s (%.2f s), forwarded %d"
          % (args.method, args.points, args.cache_max, args.points / elapsed, elapsed, passed))


if __name__ == "__main__":
    main()
