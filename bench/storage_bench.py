"""Points/s of WhisperDatabase.write against whisper.update_many (short run).

    python bench/storage_bench.py [--metrics 2000] [--points 50] [--rounds 2]

Both write the same batches (``--points`` per metric per write, a little out of
order, one late point each) into their own files of the same schema, one metric after
another as carbon's writer does; only the writes are timed. The files are compared
byte for byte at the end.
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


def make_batches(metrics: int, points: int, rounds: int, seed: int = 1) -> list[tuple[int, list]]:
    """(now, [per-metric point lists]) per round."""
    rng = random.Random(seed)
    now = 1_700_000_000
    plan = []
    for _ in range(rounds):
        now += points * 60
        per_metric = []
        for _ in range(metrics):
            batch = [(now - 60 * k - rng.randrange(60), rng.uniform(0, 100))
                     for k in range(points - 1)]
            batch.append((now - rng.randrange(86400, 7 * 86400), 1.0))
            rng.shuffle(batch)
            per_metric.append(batch)
        plan.append((now, per_metric))
    return plan


def run(metrics: int, points: int, rounds: int) -> list[tuple[str, int, float]]:
    root = tempfile.mkdtemp(prefix="storage_bench_")
    try:
        names = ["bench.host%d.metric%d" % (i % 50, i) for i in range(metrics)]
        db = WhisperDatabase(Settings(LOCAL_DATA_DIR=os.path.join(root, "ours")))
        ref_dir = os.path.join(root, "ref")
        os.makedirs(ref_dir)
        ref_paths = [os.path.join(ref_dir, name + ".wsp") for name in names]
        for name, path in zip(names, ref_paths, strict=True):
            whisper.create(path, list(SCHEMA), 0.5, "average")
            db.create(name, SCHEMA, 0.5, "average")
        db.close()  # start both from closed files
        plan = make_batches(metrics, points, rounds)
        total = sum(len(b) for _, per in plan for b in per)

        start = time.perf_counter()
        for now, per_metric in plan:
            for path, batch in zip(ref_paths, per_metric, strict=True):
                whisper.update_many(path, batch, now=now)
        ref_time = time.perf_counter() - start

        start = time.perf_counter()
        for now, per_metric in plan:
            for name, batch in zip(names, per_metric, strict=True):
                db.write(name, batch, now=now)
        our_time = time.perf_counter() - start
        db.close()

        for name, path in zip(names, ref_paths, strict=True):
            with open(path, "rb") as a, open(db.get_filesystem_path(name), "rb") as b:
                if a.read() != b.read():
                    raise SystemExit("files differ for %s" % name)
        return [("whisper.update_many", total, ref_time), ("WhisperDatabase.write", total,
                                                           our_time)]
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--metrics", type=int, default=2000)
    parser.add_argument("--points", type=int, nargs="+", default=[50, 5, 1])
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    print("schema %s, %d metrics, %d rounds; files compared byte for byte"
          % (SCHEMA, args.metrics, args.rounds))
    print("%-6s %-22s %9s %8s %12s %8s" % ("batch", "writer", "points", "seconds",
                                           "points/s", "speedup"))
    for points in args.points:
        rows = run(args.metrics, points, args.rounds)
        base = rows[0][2]
        for label, total, seconds in rows:
            print("%-6d %-22s %9d %8.2f %12.0f %7.1fx"
                  % (points, label, total, seconds, total / seconds, base / seconds))


if __name__ == "__main__":
    main()
