"""In-process throughput of the aggregate stage.

1,000,000 points from 100,000 input names (1,000 apps x 100 hosts) into 1,000
aggregates, in batches like a receiver's socket reads. Run:

    python bench/aggregator_bench.py [--points N] [--method sum]

bench/aggregator_reference_bench.py runs the same workload through carbon 1.1.10.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from carbon.aggregator.buffers import BufferManager
from carbon.aggregator.processor import AggregationConfig, AggregationProcessor
from carbon.aggregator.rules import parse_rules
from carbon.config.settings import Settings
from carbon.instrumentation.stats import Stats
from carbon.rewrite import PRE, RewriteProcessor, parse_rewrite_rules


def make_batches(points: int, apps: int, hosts: int, batch_size: int, start: int):
    names = ["app%d.host%d.requests" % (a, h) for h in range(hosts) for a in range(apps)]
    batches, batch = [], []
    for i in range(points):
        batch.append((names[i % len(names)], float(start + (i * 120) // points), 1.0))
        if len(batch) == batch_size:
            batches.append(batch)
            batch = []
    if batch:
        batches.append(batch)
    return batches


def run(points: int, method: str, batch_size: int, forward_all: bool) -> None:
    apps, hosts, start = 1000, 100, 1_700_000_020
    batches = make_batches(points, apps, hosts, batch_size, start)
    settings = Settings(FORWARD_ALL=forward_all)
    stats = Stats()
    rules = parse_rules("<app>.all.requests (60) = %s <app>.*.requests\n" % method,
                        cache_size=settings.AGGREGATION_RULE_CACHE_SIZE)
    proc = AggregationProcessor(rules, BufferManager.from_settings(settings),
                                AggregationConfig.from_settings(settings), stats)

    first = len(batches) * apps * hosts // points if points >= apps * hosts else len(batches)
    t0 = time.perf_counter()
    passed = 0
    for batch in batches[:first]:
        passed += len(proc.process(batch))
    t1 = time.perf_counter()
    for batch in batches[first:]:
        passed += len(proc.process(batch))
    t2 = time.perf_counter()
    out = proc.flush(start + 180, force=True)
    t3 = time.perf_counter()

    cold = sum(len(b) for b in batches[:first])
    print("method=%s points=%d names=%d aggregates=%d batch=%d FORWARD_ALL=%s"
          % (method, points, apps * hosts, apps, batch_size, forward_all))
    print("  first pass (every name new, regex match): %10.0f points/s" % (cold / (t1 - t0)))
    if points > cold:
        print("  warm (cached names):                      %10.0f points/s"
              % ((points - cold) / (t2 - t1)))
    print("  overall process():                        %10.0f points/s  (%.2f s)"
          % (points / (t2 - t0), t2 - t0))
    print("  flush: %d aggregates in %.1f ms; forwarded %d" % (len(out), (t3 - t2) * 1e3, passed))

    rewrite = RewriteProcessor(parse_rewrite_rules("[pre]\n^app = application\n"), PRE)
    t4 = time.perf_counter()
    for batch in batches:
        rewrite.process(batch)
    t5 = time.perf_counter()
    print("  rewrite:pre (1 rule, cached):             %10.0f points/s" % (points / (t5 - t4)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=1_000_000)
    parser.add_argument("--method", default="sum")
    parser.add_argument("--batch-size", type=int, default=500)
    parser.add_argument("--no-forward-all", action="store_true")
    args = parser.parse_args()
    run(args.points, args.method, args.batch_size, not args.no_forward_all)


if __name__ == "__main__":
    main()
