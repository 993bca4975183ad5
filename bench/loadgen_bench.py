"""The playground's load generator against a discarding sink: is it ever the bottleneck?

    python bench/loadgen_bench.py [--seconds 3] [--metrics 10000]

Runs ``tools/loadgen`` flat out (plaintext over 1 connection, pickle over 4) and at a set
rate into ``carbon.playground.discard`` (a sink that only counts bytes and lines), each
as its own process, and prints one row each: points sent, lines the sink counted (for
plaintext), points a second, and the generator's CPU seconds (user + system, its
interpreter start included).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run(label: str, args: list[str], connections: int) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    sink = subprocess.Popen([sys.executable, "-m", "carbon.playground.discard",
                             "--connections", str(connections), "--timeout", "120"],
                            stdout=subprocess.PIPE, text=True, env=env)
    assert sink.stdout is not None
    port = int(sink.stdout.readline())
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.monotonic()
    gen = subprocess.run([sys.executable, str(ROOT / "tools" / "loadgen"), "--port", str(port),
                          "--connections", str(connections), "--json", "--quiet", *args],
                         capture_output=True, text=True, env=env, timeout=120)
    wall = time.monotonic() - began
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    counted = json.loads(sink.stdout.readline())
    sink.wait(30)
    result = json.loads(gen.stdout)
    return {"load": label, "sent": result["sent"], "sink_lines": counted["lines"],
            "seconds": result["elapsed"], "points_per_s": result["sent"] / result["elapsed"],
            "cpu_s": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
            "wall_s": wall}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--metrics", type=int, default=10000)
    args = parser.parse_args()
    span = ["--duration", str(args.seconds), "--metrics", str(args.metrics)]
    rows = [
        run("plaintext, flat out, 1 connection", span + ["--rate", "0"], 1),
        run("pickle, flat out, 4 connections",
            span + ["--rate", "0", "--protocol", "pickle"], 4),
        run("plaintext, 100,000 points/s to 100,000 metrics",
            ["--duration", str(args.seconds), "--metrics", "100000", "--rate", "100000"], 1),
    ]
    print("| load | sent | sink counted lines | points/s | generator CPU s | wall s |")
    print("|---|---|---|---|---|---|")
    for row in rows:
        counted = "-" if "pickle" in row["load"] else "%d" % row["sink_lines"]
        print("| %s | %d | %s | %r | %r | %r |" % (
            row["load"], row["sent"], counted, row["points_per_s"], row["cpu_s"],
            row["wall_s"]))


if __name__ == "__main__":
    main()
