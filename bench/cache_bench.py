"""carbon-cache side by side with reference carbon-cache 1.1.10.

N points over M metrics (default 500,000 over 10,000: 50 each) with schema
10s:1d (--retentions, --aggregation to change it), fed over one TCP connection;
measures the time from the start of sending to the last whisper write (the files'
largest mtime, once every point is checked readable), points/s, daemon CPU seconds
and peak RSS, for each write strategy.
Then resident bytes per cached point with writes paused. Start it ~60 s after
anything deleted many files (see RunDirs in bench/common.py). A run in which points are
still missing after 600 s fails (no points/s is computed for it) and the benchmark exits
non-zero. Ours and the reference alternate (A B B A over the strategies they share).

    python bench/cache_bench.py [--points 500000 --metrics 10000] [--no-reference]
    python bench/cache_bench.py --metrics 100000 --strategies sorted \\
        --reference-strategies sorted --rounds 2 --no-memory   # ref, ours, ours, ref
    python bench/cache_bench.py --journal-ab --strategies sorted --no-reference --no-memory

``--journal-ab`` runs ours without and with the cache journal (CACHE_JOURNAL), in the order
off, on, on, off, for each strategy, and prints the journal's cost.
"""

from __future__ import annotations

import argparse
import os
import pickle
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path

import whisper

from carbon.carbonlink.client import cache_query

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (ROOT, RunDirs, abba, cpu_seconds, free_port, reference_venv,  # noqa: E402
                    rss_kb, stop, wait_port)

SCHEMA = {"retentions": "10s:1d", "aggregation": ""}
WRITER_THREADS = {"value": 0}
JOURNAL = {"value": True}  # CACHE_JOURNAL for ours
PREFILL = {"value": False}  # files made before the timed load: updates only
PROTOCOL = {"value": "line"}  # or "pickle"


def schemas_text() -> str:
    return "[bench]\npattern = .*\nretentions = %s\n" % SCHEMA["retentions"]


def make_root(base: Path, strategy: str, updates: str) -> dict:
    (base / "conf").mkdir(parents=True)
    ports = {"line": free_port(), "pickle": free_port(), "query": free_port()}
    (base / "conf" / "storage-schemas.conf").write_text(schemas_text())
    if SCHEMA["aggregation"]:
        (base / "conf" / "storage-aggregation.conf").write_text(
            "[bench]\npattern = .*\nxFilesFactor = 0.1\naggregationMethod = %s\n"
            % SCHEMA["aggregation"])
    (base / "conf" / "carbon.conf").write_text("\n".join([
        "[cache]",
        "STORAGE_DIR = %s" % (base / "storage"),
        "LOCAL_DATA_DIR = %s" % (base / "storage" / "whisper"),
        "LINE_RECEIVER_INTERFACE = 127.0.0.1", "LINE_RECEIVER_PORT = %d" % ports["line"],
        "PICKLE_RECEIVER_INTERFACE = 127.0.0.1", "PICKLE_RECEIVER_PORT = %d" % ports["pickle"],
        "CACHE_QUERY_INTERFACE = 127.0.0.1", "CACHE_QUERY_PORT = %d" % ports["query"],
        "MAX_UPDATES_PER_SECOND = %s" % updates, "MAX_CREATES_PER_MINUTE = inf",
        "MAX_CACHE_SIZE = inf", "CACHE_WRITE_STRATEGY = %s" % strategy,
        "LOG_UPDATES = False", "LOG_CREATES = False", "LOG_CACHE_HITS = False",
        "LOG_CACHE_QUEUE_SORTS = False", "CARBON_METRIC_INTERVAL = 0", "ENABLE_TAGS = False",
        "USER = ", "CACHE_JOURNAL = %s" % JOURNAL["value"],
        *(["WRITER_THREADS = %d" % WRITER_THREADS["value"]] if WRITER_THREADS["value"] else []),
        ""]))
    return ports


def start(impl: str, base: Path) -> subprocess.Popen:
    log = open(base / "daemon.log", "w")
    if impl == "reference":
        venv = reference_venv()
        cmd = [str(venv / "bin" / "python"), str(venv / "bin" / "carbon-cache.py"),
               "--config", str(base / "conf" / "carbon.conf"), "--nodaemon", "start"]
    else:
        cmd = [sys.executable, "-m", "carbon.daemon", "carbon-cache",
               "--config", str(base / "conf" / "carbon.conf"), "--nodaemon", "start"]
    env = {"GRAPHITE_ROOT": str(base), "PATH": "/usr/bin:/bin"}
    if impl != "reference":
        env["PYTHONPATH"] = str(ROOT)
    return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=str(base))


def payload(points: int, metrics: int, now: int) -> tuple[bytes, list[str]]:
    per_metric = points // metrics
    names = ["bench.host%03d.metric%05d" % (i % 100, i) for i in range(metrics)]
    if PROTOCOL["value"] == "pickle":  # as carbon-relay sends: 500 points a message
        flat = [(n, (now - 10 * k, float(k))) for k in range(per_metric, 0, -1)
                for n in names]
        messages = []
        for start in range(0, len(flat), 500):
            body = pickle.dumps(flat[start:start + 500], protocol=2)
            messages.append(struct.pack("!L", len(body)) + body)
        return b"".join(messages), names
    chunks = []
    for k in range(per_metric, 0, -1):  # time-major, oldest first
        stamp = now - 10 * k
        chunks.append("".join("%s %d %d\n" % (n, k, stamp) for n in names))
    return "".join(chunks).encode(), names


def whisper_path(base: Path, name: str) -> str:
    return str(base / "storage" / "whisper" / (name.replace(".", "/") + ".wsp"))


def count_points(path: str, now: int, per_metric: int) -> int:
    try:
        _, values = whisper.fetch(path, now - 10 * (per_metric + 2), now)
    except (OSError, whisper.WhisperException):
        return 0
    return sum(1 for v in values if v is not None)


def settle() -> None:
    """Write back what earlier runs left dirty (the reference writes ~1 GB of zeroes when it
    creates 10,000 files), so the kernel's writeback does not land in the next run."""
    os.sync()
    time.sleep(1.0)


class Busy:
    """Whether a process used CPU lately (``check`` every ~50 ms)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.last = cpu_seconds(pid)
        self.idle_checks = 0

    def check(self) -> bool:
        """False once the process used no CPU over two consecutive checks."""
        now = cpu_seconds(self.pid)
        self.idle_checks = self.idle_checks + 1 if now == self.last else 0
        self.last = now
        return self.idle_checks < 2


def run_throughput(impl: str, strategy: str, points: int, metrics: int,
                   dirs: RunDirs) -> dict:
    """One run; ``missing`` > 0 (files without every point after 600 s) marks it failed
    and leaves its rate None."""
    settle()
    base = dirs.new("cachebench-")
    ports = make_root(base, strategy, "inf")
    proc = start(impl, base)
    try:
        wait_port(ports["line"], proc)
    except RuntimeError:
        print((base / "daemon.log").read_text()[-3000:])
        raise
    now = int(time.time()) // 10 * 10
    data, names = payload(points, metrics, now)
    per_metric = points // metrics
    if PREFILL["value"]:
        prefill(base, ports, names, now - 10 * (per_metric + 10))
    cpu_before = cpu_seconds(proc.pid)
    wall_started = time.time()
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", ports[PROTOCOL["value"]])) as sock:
        sock.sendall(data)
    sent = time.monotonic() - started
    pending = {n: whisper_path(base, n) for n in names}
    deadline = started + 600
    busy = Busy(proc.pid)
    while pending and time.monotonic() < deadline:
        # Verify the files only once the daemon has been idle for 0.1 s: reading 10,000
        # files takes a core, which would compete with the daemon while it still writes.
        if busy.check():
            time.sleep(0.05)
            continue
        for name, path in list(pending.items()):
            if count_points(path, now, per_metric) == per_metric:
                del pending[name]
        if pending:  # idle but not done (e.g. between the writer's passes): wait for it
            time.sleep(0.05)
            busy = Busy(proc.pid)
    elapsed = time.monotonic() - started
    # The last whisper write, from the files' mtimes: the polling above finds completion
    # late by up to one verification pass (~0.5 s of fetches over 10,000 files), which
    # would weigh more on the faster daemon.
    # a failed run (points missing) keeps its CPU and memory figures but gets no rate
    written = None if pending else \
        max(os.stat(whisper_path(base, n)).st_mtime for n in names) - wall_started
    result = {"impl": impl, "strategy": strategy, "journal": JOURNAL["value"],
              "seconds": written, "send_s": sent, "poll_s": elapsed,
              "points_s": None if written is None else points / written,
              "cpu_s": cpu_seconds(proc.pid) - cpu_before,
              "peak_rss_mb": rss_kb(proc.pid, "VmHWM") / 1024, "missing": len(pending)}
    stop(proc)
    return result


def prefill(base: Path, ports: dict, names: list[str], stamp: int) -> None:
    """One point a metric, before the timed load (outside the window it checks), and
    wait until every file is there and the daemon is idle."""
    with socket.create_connection(("127.0.0.1", ports["line"])) as sock:
        sock.sendall("".join("%s 1 %d\n" % (name, stamp) for name in names).encode())
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        if all(os.path.exists(whisper_path(base, name)) for name in names):
            break
        time.sleep(0.2)
    time.sleep(1.0)
    settle()


def carbonlink_count(port: int, metric: str) -> int:
    return len(cache_query(("127.0.0.1", port), metric))


def run_memory(impl: str, points: int, metrics: int, dirs: RunDirs) -> dict:
    """Resident bytes per cached point, with writes paused."""
    base = dirs.new("cachemem-")
    ports = make_root(base, "sorted", "0.001")
    proc = start(impl, base)
    wait_port(ports["line"], proc)
    time.sleep(1.0)
    before = rss_kb(proc.pid)
    now = int(time.time()) // 10 * 10
    data, names = payload(points, metrics, now)
    with socket.create_connection(("127.0.0.1", ports[PROTOCOL["value"]])) as sock:
        sock.sendall(data)
    per_metric = points // metrics
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if carbonlink_count(ports["query"], names[-1]) >= per_metric:
            break
        time.sleep(0.2)
    time.sleep(1.0)
    after = rss_kb(proc.pid)
    stop(proc)
    return {"impl": impl, "rss_growth_mb": (after - before) / 1024,
            "bytes_per_point": (after - before) * 1024 / points}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=500_000)
    parser.add_argument("--metrics", type=int, default=10_000)
    parser.add_argument("--strategies", default="sorted,max,naive,timesorted,bucketmax")
    parser.add_argument("--reference-strategies", default="sorted,max,naive")
    parser.add_argument("--no-reference", action="store_true")
    parser.add_argument("--protocol", choices=["line", "pickle"], default="line",
                        help="plaintext, or pickle messages of 500 points as a relay sends")
    parser.add_argument("--retentions", default="10s:1d",
                        help="storage schema (the first archive must keep 10s points)")
    parser.add_argument("--aggregation", default="",
                        help="aggregationMethod for every metric (default: average)")
    parser.add_argument("--no-memory", action="store_true")
    parser.add_argument("--rounds", type=int, default=1,
                        help="repeat each shared strategy's pair, alternating who goes first")
    parser.add_argument("--writer-threads", type=int, default=0,
                        help="WRITER_THREADS for ours (0: our default)")
    parser.add_argument("--no-journal", action="store_true", help="CACHE_JOURNAL = False")
    parser.add_argument("--prefill", action="store_true",
                        help="make the files before the timed load: measure updates only")
    parser.add_argument("--journal-ab", action="store_true",
                        help="ours without and with the journal: off, on, on, off")
    args = parser.parse_args()
    JOURNAL["value"] = not args.no_journal
    PREFILL["value"] = args.prefill
    WRITER_THREADS["value"] = args.writer_threads
    SCHEMA["retentions"] = args.retentions
    PROTOCOL["value"] = args.protocol
    SCHEMA["aggregation"] = args.aggregation
    with RunDirs() as dirs:
        failed = run_all(args, dirs)
    if failed:
        sys.exit("%d run(s) ended with points missing: no rate is reported for them" % failed)


def run_order(args: argparse.Namespace) -> list[tuple[str, str]]:
    """(impl, strategy) runs: for each strategy both have, ours and the reference
    alternate round by round (reference first, then ours first, ...: A B B A per
    strategy); the rest follow."""
    ours = args.strategies.split(",")
    reference = [] if args.no_reference else args.reference_strategies.split(",")
    shared = list(dict.fromkeys(s for s in ours if s in reference))
    order: list[tuple[str, str]] = []
    for round_ in range(args.rounds):
        for strategy in shared:
            pair = [("reference", strategy), ("ours", strategy)]
            order += pair if round_ % 2 == 0 else pair[::-1]
    order += [("reference", s) for s in reference if s not in shared]
    order += [("ours", s) for s in ours if s not in shared]
    return order


def print_ratios(rows: list[dict], args: argparse.Namespace) -> None:
    """Mean points/s and peak RSS per (impl, strategy), ours against the reference."""
    print("\n%s points over %s new metrics, mean per implementation and strategy:" % (
        format(args.points, ","), format(args.metrics, ",")))
    means: dict[tuple[str, str], tuple[float, float]] = {}
    for key in dict.fromkeys((r["impl"], r["strategy"]) for r in rows):
        runs = [r for r in rows if (r["impl"], r["strategy"]) == key and not r["missing"]]
        if runs:
            means[key] = (sum(r["points_s"] for r in runs) / len(runs),
                          max(r["peak_rss_mb"] for r in runs))
            print("  %-9s %-10s %10s points/s  peak RSS %5.0f MB  (%d run(s))" % (
                key[0], key[1], format(int(means[key][0]), ","), means[key][1], len(runs)))
    for (impl, strategy), (rate, _) in means.items():
        reference = means.get(("reference", strategy))
        if impl == "ours" and reference:
            print("  ratio ours / carbon-cache 1.1.10, %s: %.2fx" % (strategy, rate / reference[0]))


def run_all(args: argparse.Namespace, dirs: RunDirs) -> int:
    """Every run and the tables; returns how many runs failed."""
    rows = []
    for impl, strategy in run_order(args):
        journals = (abba(False, True) if args.journal_ab and impl == "ours"
                    else (JOURNAL["value"],))
        for journal in journals:
            JOURNAL["value"] = journal
            rows.append(run_throughput(impl, strategy, args.points, args.metrics, dirs))
            print(rows[-1], flush=True)
    print("\n| implementation | strategy | journal | points/s | seconds | CPU s | peak RSS MB "
          "| missing |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        journal = "on" if r["journal"] and r["impl"] == "ours" else "off"
        if r["missing"]:
            print("| %s | %s | %s | FAILED | - | - | - | %d |" % (
                r["impl"], r["strategy"], journal, r["missing"]))
            continue
        print("| %s | %s | %s | %s | %.2f | %.2f | %.0f | 0 |" % (
            r["impl"], r["strategy"], journal, format(int(r["points_s"]), ","), r["seconds"],
            r["cpu_s"], r["peak_rss_mb"]))
    print_ratios(rows, args)
    if args.journal_ab:
        for strategy in dict.fromkeys(args.strategies.split(",")):
            mine = [r for r in rows if r["impl"] == "ours" and r["strategy"] == strategy
                    and not r["missing"]]
            off = [r["points_s"] for r in mine if not r["journal"]]
            on = [r["points_s"] for r in mine if r["journal"]]
            if not off or not on:
                continue
            mean_off, mean_on = sum(off) / len(off), sum(on) / len(on)
            print("%s: journal off %s points/s, on %s points/s (mean of %d each): cost %.1f%%"
                  % (strategy, format(int(mean_off), ","), format(int(mean_on), ","),
                     len(on), 100 * (1 - mean_on / mean_off)))
    if not args.no_memory:
        impls = ["ours"] if args.no_reference else ["reference", "ours"]
        memory = [run_memory(impl, args.points, args.metrics, dirs) for impl in impls]
        print("\n| implementation | RSS growth MB | bytes per cached point |")
        print("|---|---|---|")
        for m in memory:
            print("| %s | %.1f | %.0f |" % (m["impl"], m["rss_growth_mb"], m["bytes_per_point"]))
    return sum(1 for r in rows if r["missing"])


if __name__ == "__main__":
    main()
