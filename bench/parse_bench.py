"""The plaintext parse and the relay's whole-read route of the same lines, in-process.

A buffer of N plaintext lines (M names, full-precision values written with every digit
as ``repr`` writes them, 10-digit timestamps; ``--values integers`` for small integers,
a labelled extra) is cut into reads of 256 KiB of complete lines. Timed, each best of
``--repeat`` passes over the whole buffer:

- parse: ``carbon.formats.plaintext.parse_lines`` over every read's lines;
- route: ``carbon.relay.chunks.ChunkRouter.route`` of every read (consistent hashing to
  3 destinations, line protocol, every name already known).

``--trees`` runs the same measurement in each named checkout (built in place, imported
through PYTHONPATH) in the order given, so two builds compare in one run: for example
``--trees .,../old,.`` (A B A). Each tree runs in its own process.

    python bench/parse_bench.py [--lines 1000000 --names 100000 --repeat 5]
        [--values full|integers] [--trees .]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

READ = 256 * 1024
DESTINATIONS = ["127.0.0.1:2004:a", "127.0.0.1:2104:b", "127.0.0.1:2204:c"]


def make_reads(lines: int, names: int, values: str, seed: int = 1) -> list[bytes]:
    """``lines`` plaintext lines cut into reads of about READ bytes, each whole lines."""
    rng = random.Random(seed)
    metric = [b"servers.host%05d.cpu.metric%d" % (i // 10, i % 10) for i in range(names)]
    if values == "full":
        value = [repr(rng.uniform(0, 100)).encode() for _ in range(4096)]
    else:
        value = [b"%d" % rng.randrange(1000) for _ in range(4096)]
    data = b"".join(b"%s %s %d\n" % (metric[i % names], value[i % 4096], 1700000000 + i // names)
                    for i in range(lines))
    reads, start = [], 0
    while start < len(data):
        end = data.rfind(b"\n", start, start + READ) + 1 if start + READ < len(data) else len(data)
        reads.append(data[start:end])
        start = end
    return reads


def best_of(repeat: int, run) -> float:
    """The shortest of ``repeat`` timed calls of ``run``."""
    took = []
    for _ in range(repeat):
        started = time.perf_counter()
        run()
        took.append(time.perf_counter() - started)
    return min(took)


def measure(args: argparse.Namespace) -> dict:
    """Seconds per pass of parse and route in this process's carbon."""
    import carbon
    from carbon.config.settings import Settings
    from carbon.formats.plaintext import parse_lines
    from carbon.relay.chunks import ChunkRouter
    from carbon.relay.index import RouteIndex
    from carbon.routers import make_router, parse_destinations

    reads = make_reads(args.lines, args.names, args.values)
    split = [chunk.split(b"\n")[:-1] for chunk in reads]

    def parse() -> None:
        for lines in split:
            parse_lines(lines)

    router = make_router(Settings(RELAY_METHOD="consistent-hashing", DESTINATIONS=DESTINATIONS))
    chunks = ChunkRouter(RouteIndex(router, parse_destinations(DESTINATIONS), args.names * 2),
                         router, args.names * 2)

    def route() -> None:
        for chunk in reads:
            if chunks.route(chunk, 0) is None:
                raise SystemExit("the C path declined a read")

    route()  # learn every name
    return {"tree": str(Path(carbon.__file__).resolve().parent.parent),
            "parse_s": best_of(args.repeat, parse), "route_s": best_of(args.repeat, route)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=1_000_000)
    parser.add_argument("--names", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--values", choices=["full", "integers"], default="full")
    parser.add_argument("--trees", default=".",
                        help="comma-separated checkouts to measure, in this order")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(args)))
        return
    print("%d lines, %d names, %s values, best of %d passes; loadavg %s" % (
        args.lines, args.names, args.values, args.repeat, open("/proc/loadavg").read().strip()))
    print("%-40s %12s %12s %12s %12s" % ("tree", "parse s", "parse Ml/s", "route s", "route Ml/s"))
    for tree in args.trees.split(","):
        env = dict(os.environ, PYTHONPATH=str(Path(tree).resolve()))
        out = subprocess.run([sys.executable, __file__, "--child", "--lines", str(args.lines),
                              "--names", str(args.names), "--repeat", str(args.repeat),
                              "--values", args.values], env=env, check=True,
                             capture_output=True, text=True).stdout
        row = json.loads(out)
        print("%-40s %12.4f %12.3f %12.4f %12.3f" % (
            row["tree"], row["parse_s"], args.lines / row["parse_s"] / 1e6, row["route_s"],
            args.lines / row["route_s"] / 1e6))
    print("loadavg %s" % open("/proc/loadavg").read().strip())


if __name__ == "__main__":
    main()
