"""Ingestion of a 3-host cluster on one machine against one host (the relay tier's cost).

    .venv/bin/python bench/cluster_ingest_bench.py [--metrics 2000] [--points 100]

Each layout is started with carbon-cluster (relay + one carbon-cache + render app +
agent per host) on 127.0.0.N. Three senders write metrics x points lines through the
relays (round-robin over the hosts' relays), each send confirmed by the relay closing
after reading it; the clock stops when every metric's last point is in its whisper file.
Order A B B A. The machine is shared: read the ratio, not the absolute rates.
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time
from pathlib import Path

import sys

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import whisper  # noqa: E402

from carbon.cluster.rebalance import owners, ring  # noqa: E402
from carbon.cluster.spec import load_cluster  # noqa: E402
from tests.cluster.clusterutil import cli, cluster_file, send_lines  # noqa: E402

STEP = 60
LAYOUTS = {"one host": {"a": "127.0.0.31"},
           "three hosts": {"a": "127.0.0.32", "b": "127.0.0.33", "c": "127.0.0.34"}}


def run(folder: Path, hosts: dict[str, str], metrics: int, points: int) -> float:
    folder.mkdir(parents=True)
    path = cluster_file(folder, hosts, extra="MAX_CACHE_SIZE = \"inf\"")
    started = cli("start", path)
    assert started.returncode == 0, started.stdout + started.stderr
    spec = load_cluster(str(path))
    try:
        base = int(time.time()) // STEP * STEP - (points + 5) * STEP
        names = ["ingest.g%02d.m%05d" % (n % 50, n) for n in range(metrics)]
        router = ring(spec)
        files = [Path(spec.host_dir(owners(router, spec, n)[0])) / "storage" / "whisper"
                 / (n.replace(".", "/") + ".wsp") for n in names]
        last = base + (points - 1) * STEP
        relays = [(h.address, h.relay_line_port) for h in spec.hosts]

        def sender(k: int) -> None:
            for p in range(k, points, 3):
                lines = ["%s %d %d\n" % (n, p, base + p * STEP) for n in names]
                send_lines(relays[p % len(relays)], lines)
        threads = [threading.Thread(target=sender, args=(k,)) for k in range(3)]
        started_at = time.monotonic()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        pending = list(files)
        while pending:
            pending = [f for f in pending if _count(f, base, last) < points]
            if pending:
                time.sleep(0.2)
        return time.monotonic() - started_at
    finally:
        cli("stop", path)


def _count(path: Path, first: int, last: int) -> int:
    try:
        _, values = whisper.fetch(str(path), first - STEP, last, last + STEP)
    except (OSError, whisper.WhisperException, ValueError):
        return 0
    return sum(v is not None for v in values)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--metrics", type=int, default=4000)
    parser.add_argument("--points", type=int, default=150)
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="ingest-bench-"))
    total = args.metrics * args.points
    results: dict[str, list[float]] = {k: [] for k in LAYOUTS}
    for n, layout in enumerate(["one host", "three hosts", "three hosts", "one host"]):
        seconds = run(base / ("run%d" % n), LAYOUTS[layout], args.metrics, args.points)
        results[layout].append(seconds)
        print("%s: %d points in %.1f s = %.0f points/s" % (layout, total, seconds,
                                                          total / seconds), flush=True)
    one = sum(results["one host"]) / 2
    three = sum(results["three hosts"]) / 2
    print("\n| layout | runs (s) | points/s (mean) |\n|---|---|---|")
    for layout, runs in results.items():
        print("| %s | %s | %.0f |" % (layout, ", ".join("%.1f" % r for r in runs),
                                     total / (sum(runs) / len(runs))))
    print("three hosts / one host throughput: %.2f" % (one / three))
    print("(run folders kept under %s)" % base)


if __name__ == "__main__":
    main()
