"""carbon-cache side by side with reference carbon-cache 1.1.10.

N points over M metrics (default 500,000 over 10,000: 50 each) with schema
10s:1d (--retentions, --aggregation to change it), fed over one TCP connection;
measures the time from the start of sending to the last whisper write (the files'
largest mtime, once every point is checked readable), points/s, daemon CPU seconds
and peak RSS, for each write strategy.
Then resident bytes per cached point with writes paused. Start it ~60 s after
anything deleted many files (see RUN_DIRS below).

    python bench/cache_bench.py [--points 500000 --metrics 10000] [--no-reference]
    python bench/cache_bench.py --journal-ab --strategies sorted --no-reference --no-memory

``--journal-ab`` runs ours without and with the cache journal (CACHE_JOURNAL), in the order
off, on, on, off, for each strategy, and prints the journal's cost.
"""

from __future__ import annotations

import argparse
import os
import pickle
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import whisper

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (ROOT, cpu_seconds, free_port, reference_venv, rss_kb,  # noqa: E402
                    stop, wait_port)

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


# Run folders are removed only after every run: ext4 skips inodes deleted in the last ~30 s
# when it allocates new ones (recently_deleted() in ialloc.c), so deleting one run's 10,000
# files made the next run's creates cost ~100 us instead of ~20 us each, a penalty that fell
# on whichever daemon ran second.
RUN_DIRS: list[Path] = []


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


def run_throughput(impl: str, strategy: str, points: int, metrics: int) -> dict:
    settle()
    base = Path(tempfile.mkdtemp(prefix="cachebench-"))
    RUN_DIRS.append(base)
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
    last_write = max((os.stat(whisper_path(base, n)).st_mtime for n in names), default=0)
    written = last_write - wall_started if not pending else elapsed
    result = {"impl": impl, "strategy": strategy, "journal": JOURNAL["value"],
              "seconds": written, "send_s": sent,
              "poll_s": elapsed, "points_s": points / written,
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
    body = pickle.dumps({"type": "cache-query", "metric": metric}, protocol=2)
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(struct.pack("!I", len(body)) + body)
        data = b""
        while len(data) < 4 or len(data) < 4 + struct.unpack("!I", data[:4])[0]:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    return len(pickle.loads(data[4:])["datapoints"])


def run_memory(impl: str, points: int, metrics: int) -> dict:
    """Resident bytes per cached point, with writes paused."""
    base = Path(tempfile.mkdtemp(prefix="cachemem-"))
    try:
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
    finally:
        shutil.rmtree(base, ignore_errors=True)


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
    try:
        run_all(args)
    finally:
        for base in RUN_DIRS:
            shutil.rmtree(base, ignore_errors=True)


def run_all(args: argparse.Namespace) -> None:
    rows = []
    if not args.no_reference:
        for strategy in args.reference_strategies.split(","):
            rows.append(run_throughput("reference", strategy, args.points, args.metrics))
            print(rows[-1], flush=True)
    for strategy in args.strategies.split(","):
        for journal in ((False, True, True, False) if args.journal_ab
                        else (JOURNAL["value"],)):
            JOURNAL["value"] = journal
            rows.append(run_throughput("ours", strategy, args.points, args.metrics))
            print(rows[-1], flush=True)
    print("\n| implementation | strategy | journal | points/s | seconds | CPU s | peak RSS MB "
          "| missing |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print("| %s | %s | %s | %s | %.2f | %.2f | %.0f | %d |" % (
            r["impl"], r["strategy"], "on" if r["journal"] and r["impl"] == "ours" else "off",
            format(int(r["points_s"]), ","), r["seconds"], r["cpu_s"], r["peak_rss_mb"],
            r["missing"]))
    if args.journal_ab:
        for strategy in dict.fromkeys(args.strategies.split(",")):
            mine = [r for r in rows if r["impl"] == "ours" and r["strategy"] == strategy]
            off = [r["points_s"] for r in mine if not r["journal"]]
            on = [r["points_s"] for r in mine if r["journal"]]
            mean_off, mean_on = sum(off) / len(off), sum(on) / len(on)
            print("%s: journal off %s points/s, on %s points/s (mean of %d each): cost %.1f%%"
                  % (strategy, format(int(mean_off), ","), format(int(mean_on), ","),
                     len(on), 100 * (1 - mean_on / mean_off)))
    if not args.no_memory:
        memory = [run_memory("ours", args.points, args.metrics)]
        if not args.no_reference:
            memory.insert(0, run_memory("reference", args.points, args.metrics))
        print("\n| implementation | RSS growth MB | bytes per cached point |")
        print("|---|---|---|")
        for m in memory:
            print("| %s | %.1f | %.0f |" % (m["impl"], m["rss_growth_mb"], m["bytes_per_point"]))


if __name__ == "__main__":
    main()
