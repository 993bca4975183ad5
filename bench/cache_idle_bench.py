"""Idle memory of a carbon-cache after bursts of new metrics, ours and carbon-cache 1.1.10.

One daemon gets --bursts bursts of --metrics new metrics each (2 full-precision points a
metric over 4 connections, names never seen before: ``burstK.hostNNN.metricNNNNNN``);
after each burst, once every point of a sample of the burst's files is on disk and the
daemon has used no CPU for a while, its resident size is read. If memory were kept per
known metric the idle RSS would climb with every burst; if it is the allocator's state
after the largest burst it levels off. Each daemon on its own fresh ext4 file system
(``--fresh-fs``, root) or in a temporary folder.

    python bench/cache_idle_bench.py --metrics 200000 --bursts 5
    python bench/cache_idle_bench.py --metrics 200000 --bursts 5 --no-reference
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import cache_bench as cb  # noqa: E402
from common import RunDirs, cpu_seconds, rss_kb, stop, wait_port  # noqa: E402

SAMPLE = 500  # files of each burst checked for both points before the RSS is read
QUIET_S = 2.0  # seconds without CPU use that count as idle


def burst_lines(burst: int, metrics: int, now: int, step: int, connections: int,
                rng: random.Random) -> tuple[list[bytes], list[str]]:
    """Two points a metric (oldest first), a metric's points on one connection."""
    names = ["burst%d.host%03d.metric%06d" % (burst, i % 100, i) for i in range(metrics)]
    shares = [names[i::connections] for i in range(connections)]
    out = []
    for share in shares:
        rows = ["".join("%s %r %d\n" % (n, rng.random() * 100, now - step * k) for n in share)
                for k in (2, 1)]
        out.append("".join(rows).encode())
    return out, names


def wait_written(pid: int, base: Path, names: list[str], now: int, timeout: float) -> float:
    """Seconds until a sample of ``names``' files hold both points and the daemon has been
    idle for QUIET_S (raises after ``timeout``)."""
    started = time.monotonic()
    sample = random.Random(5).sample(names, min(SAMPLE, len(names)))
    pending = {n: cb.whisper_path(base, n) for n in sample}
    last, quiet_since = cpu_seconds(pid), time.monotonic()
    while time.monotonic() - started < timeout:
        time.sleep(0.25)
        used = cpu_seconds(pid)
        if used != last:
            last, quiet_since = used, time.monotonic()
            continue
        if pending:
            for name, path in list(pending.items()):
                if cb.count_points(path, now, 2) == 2:
                    del pending[name]
            quiet_since = time.monotonic()
        elif time.monotonic() - quiet_since >= QUIET_S:
            return time.monotonic() - started
    raise RuntimeError("burst not written after %.0f s (%d sample files short)"
                       % (timeout, len(pending)))


def run(impl: str, args: argparse.Namespace, dirs: RunDirs) -> list[dict]:
    base, fs = cb.new_run(dirs, "cacheidle-", args.metrics * args.bursts)
    ports = cb.make_root(base, "sorted", "inf")
    proc = cb.start(impl, base)
    rows = []
    try:
        wait_port(ports["line"], proc)
        time.sleep(1.0)
        start_mb = rss_kb(proc.pid) / 1024
        step = cb.step()
        rng = random.Random(17)
        for burst in range(args.bursts):
            now = int(time.time()) // step * step
            shares, names = burst_lines(burst, args.metrics, now, step, args.connections, rng)
            cb.send_all(ports["line"], shares)
            took = wait_written(proc.pid, base, names, now, args.timeout)
            rows.append({"impl": impl, "burst": burst + 1,
                         "known": args.metrics * (burst + 1), "start_mb": start_mb,
                         "idle_mb": rss_kb(proc.pid) / 1024,
                         "peak_mb": rss_kb(proc.pid, "VmHWM") / 1024, "seconds": took})
            print("%-9s burst %d: %s known, idle RSS %.1f MB (started %.1f), peak %.1f MB, "
                  "%.1f s" % (impl, burst + 1, format(rows[-1]["known"], ","),
                              rows[-1]["idle_mb"], start_mb, rows[-1]["peak_mb"], took),
                  flush=True)
    finally:
        stop(proc)
        cb.finish(base, dirs, fs)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--metrics", type=int, default=200_000, help="new metrics a burst")
    parser.add_argument("--bursts", type=int, default=5)
    parser.add_argument("--retentions", default="60s:6h")
    parser.add_argument("--connections", type=int, default=4)
    parser.add_argument("--no-reference", action="store_true")
    parser.add_argument("--fresh-fs", action="store_true",
                        help="each daemon on its own new ext4 file system (root)")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds a burst")
    args = parser.parse_args()
    cb.SCHEMA["retentions"] = args.retentions
    cb.LOAD["fresh_fs"] = args.fresh_fs
    impls = ["ours"] if args.no_reference else ["ours", "reference"]
    rows: list[dict] = []
    with RunDirs() as dirs:
        for impl in impls:
            rows += run(impl, args, dirs)
    print("\n| known metrics | " + " | ".join(
        "%s idle RSS MB (peak)" % ("ours" if i == "ours" else cb.REFERENCE_NAME)
        for i in impls) + " |")
    print("| ---: |" + " ---: |" * len(impls))
    for burst in range(args.bursts):
        cells = ["%.1f (%.1f)" % (r["idle_mb"], r["peak_mb"])
                 for r in rows if r["burst"] == burst + 1]
        print("| %s | %s |" % (format(args.metrics * (burst + 1), ","), " | ".join(cells)))


if __name__ == "__main__":
    main()
