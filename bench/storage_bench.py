"""Points/s of WhisperDatabase.write against whisper.update_many (short run).

    python bench/storage_bench.py [--metrics 2000] [--batches 50 5 1] [--rounds 2]

Both writers get the same batches, one metric after another and each after an
existence check as carbon's writer does, into their own files of the same schema
(created outside the timing): for
each batch size, ``--rounds`` writes per metric of that many points, either with a
fixed phase per metric ("regular", as most clients send) or jittered within each
minute ("jittered": gaps and duplicate intervals). Every batch also carries one
point a few days old. Wall and CPU time are reported; the files are compared byte
for byte at the end.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import whisper  # noqa: E402

from carbon.config.settings import Settings  # noqa: E402
from carbon.storage.whisper_backend import WhisperDatabase  # noqa: E402

SCHEMA = [(60, 1440), (300, 2016), (3600, 720)]  # 1d of 1m, 7d of 5m, 30d of 1h


def make_plan(metrics: int, size: int, rounds: int, jitter: bool, start: int,
              rng: random.Random) -> list[tuple[int, list]]:
    """(now, [batch per metric]) for each round."""
    phases = [rng.randrange(60) for _ in range(metrics)]
    plan = []
    now = start
    for _ in range(rounds):
        now += size * 60
        batches = []
        for phase in phases:
            batch = [(now - 60 * k - (rng.randrange(60) if jitter else phase),
                      rng.uniform(0, 100)) for k in range(size)]
            batch.append((now - rng.randrange(86400, 6 * 86400), 1.0))
            batches.append(batch)
        plan.append((now, batches))
    return plan


def timed(run) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    run()
    return time.perf_counter() - wall, time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--metrics", type=int, default=2000)
    parser.add_argument("--batches", type=int, nargs="+", default=[50, 5, 1])
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    rng = random.Random(1)
    root = tempfile.mkdtemp(prefix="storage_bench_")
    try:
        names = ["bench.host%d.metric%d" % (i % 50, i) for i in range(args.metrics)]
        db = WhisperDatabase.from_settings(Settings(LOCAL_DATA_DIR=os.path.join(root, "ours")))
        refs = [os.path.join(root, "ref", name + ".wsp") for name in names]
        os.makedirs(os.path.join(root, "ref"))
        for name, path in zip(names, refs, strict=True):
            whisper.create(path, list(SCHEMA), 0.5, "average")
            db.create(name, SCHEMA, 0.5, "average")
        db.close()  # both start from closed files

        print("schema %s, %d metrics, %d rounds per row (+1 late point per batch)"
              % (SCHEMA, args.metrics, args.rounds))
        print("%-9s %5s %9s | %-8s %9s %9s | %-8s %9s %9s | %7s" % (
            "data", "batch", "points", "whisper", "pts/s", "cpu pts/s", "ours", "pts/s",
            "cpu pts/s", "speedup"))
        now = 1_700_000_000
        for jitter in (False, True):
            for size in args.batches:
                plan = make_plan(args.metrics, size, args.rounds, jitter, now, rng)
                now = plan[-1][0]
                total = sum(len(batch) for _, batches in plan for batch in batches)

                def reference(plan=plan):
                    for at, batches in plan:
                        for path, batch in zip(refs, batches, strict=True):
                            if os.path.exists(path):  # as carbon's writer checks first
                                whisper.update_many(path, batch, now=at)

                def ours(plan=plan):
                    for at, batches in plan:
                        for name, batch in zip(names, batches, strict=True):
                            if db.exists(name):
                                db.write(name, batch, now=at)

                ref_wall, ref_cpu = timed(reference)
                our_wall, our_cpu = timed(ours)
                print("%-9s %5d %9d | %8.2fs %9.0f %9.0f | %8.2fs %9.0f %9.0f | %6.2fx" % (
                    "jittered" if jitter else "regular", size, total, ref_wall,
                    total / ref_wall, total / ref_cpu, our_wall, total / our_wall,
                    total / our_cpu, ref_cpu / our_cpu))
        db.close()
        for name, path in zip(names, refs, strict=True):
            with open(path, "rb") as a, open(db.get_filesystem_path(name), "rb") as b:
                if a.read() != b.read():
                    raise SystemExit("files differ for %s" % name)
        print("all %d file pairs byte-identical" % len(names))
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
