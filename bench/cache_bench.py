"""carbon-cache side by side with reference carbon-cache 1.1.10.

N points over M metrics (default 500,000 over 10,000: 50 each) with schema
10s:1d (--retentions, --aggregation to change it), full-precision float values
(``--tidy-values``: small integers, a labelled extra) over 4 TCP connections (a metric's
points all on one of them); measures the time from the start of sending to the last
whisper write (the files' largest mtime, once every point is checked readable),
points/s, daemon CPU seconds, peak RSS and the RSS left once everything is written (per
idle known metric), for each write strategy.
Then resident bytes per cached point and per cached metric with writes paused. Start it
~60 s after anything deleted many files (see RunDirs in bench/common.py). A run in which
points are still missing after --timeout seconds fails (no points/s is computed for it)
and the benchmark exits non-zero; ``--reference-timeout`` instead stops the reference
then and reports its rate so far (estimated from a sample of its files, labelled).
Ours and the reference alternate (A B B A over the strategies they share).

``--floor`` also times bench/create_floor.c (built here with gcc): a C loop that creates
the same files (same paths, in the metrics' order, same header and size, filled as ours
fills them by default: a body up to 16 KiB written as zeroes, a larger one fallocated),
before the first and after the last run: what the file system allows.
``--floor-threads 1,2`` times it with each of those thread counts (each thread the files
of its own directories; "floor x2" in the tables): ext4 makes files of different
directories in parallel, and ours makes new files on CREATE_THREADS threads (default 2).
``--delete-runs`` removes each run's folder once measured, syncs and waits
``--settle`` seconds (ext4 is slow to allocate inodes freed in the last minute), for
loads whose files do not fit on the disk several times.
``--fresh-fs`` gives every run (the floors too) its own new ext4 file system on a sparse
image (bench/fresh_fs.py), deleted once measured: no run pays for inodes an earlier run
freed, and the order of runs no longer matters (root only).
``--growth`` adds the means to docs/data/growth/cache.json (issue 17's plots).

    python bench/cache_bench.py [--points 500000 --metrics 10000] [--no-reference]
    python bench/cache_bench.py --metrics 100000 --strategies sorted \\
        --reference-strategies sorted --rounds 2 --no-memory   # ref, ours, ours, ref
    python bench/cache_bench.py --journal-ab --strategies sorted --no-reference --no-memory
    python bench/cache_bench.py --metrics 100000 --strategies sorted \
        --reference-strategies sorted --rounds 2 --floor --delete-runs --growth

``--journal-ab`` runs ours without and with the cache journal (CACHE_JOURNAL), in the order
off, on, on, off, for each strategy, and prints the journal's cost.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import pickle
import random
import shutil
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import whisper

from carbon.carbonlink.client import cache_query

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (ROOT, RunDirs, abba, cpu_seconds, free_port, reference_venv,  # noqa: E402
                    rss_kb, stop, wait_port)
from fresh_fs import FreshFileSystem, image_bytes  # noqa: E402

from carbon.storage.whisper_create import SMALL_BODY, file_plan  # noqa: E402

SCHEMA = {"retentions": "10s:1d", "aggregation": ""}
LOAD = {"connections": 4, "tidy": False, "timeout": 600.0, "reference_timeout": None,
        "delete_runs": False, "settle": 65.0, "deleted_at": None, "fresh_fs": False,
        "mounted": []}  # fresh file systems not yet removed (removed at exit whatever happens)
REFERENCE_NAME = "carbon-cache 1.1.10"
FLOOR_SOURCE = Path(__file__).resolve().parent / "create_floor.c"
FLOOR_NAME = "C create floor (creates only)"
FRESH_CURVE = "fresh file system a run"  # the growth plot's line for --fresh-fs rows
SAMPLE_FILES = 2000  # files read to estimate a stopped reference's points on disk
WRITER_THREADS = {"value": 0}
JOURNAL = {"value": True}  # CACHE_JOURNAL for ours
PREFILL = {"value": False}  # files made before the timed load: updates only
PROTOCOL = {"value": "line"}  # or "pickle"


def schemas_text() -> str:
    return "[bench]\npattern = .*\nretentions = %s\n" % SCHEMA["retentions"]


def archives() -> list[tuple[int, int]]:
    """(seconds per point, points) of each archive of the bench's schema."""
    return [whisper.parseRetentionDef(part) for part in SCHEMA["retentions"].split(",")]


def step() -> int:
    """Seconds between a metric's points: the first archive's precision."""
    return archives()[0][0]


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


def metric_names(metrics: int) -> list[str]:
    """The bench's names: 100 directories of metrics/100 files."""
    return ["bench.host%03d.metric%05d" % (i % 100, i) for i in range(metrics)]


def payload(points: int, metrics: int, now: int) -> tuple[list[bytes], list[str]]:
    """What each connection sends (a metric's points all on one connection, time-major,
    oldest first) and the names. Values are full-precision floats (``random()`` * 100,
    written as ``repr`` gives them, e.g. 73.62519846152341), or with LOAD["tidy"] the
    point's index as a small integer."""
    per_metric = points // metrics
    names = metric_names(metrics)
    interval = step()
    rng = random.Random(17)
    connections = max(1, LOAD["connections"])
    shares = [names[i::connections] for i in range(connections)]
    out = []
    for share in shares:
        if LOAD["tidy"]:
            values = [[float(k)] * len(share) for k in range(per_metric, 0, -1)]
        else:
            values = [[rng.random() * 100 for _ in share] for _ in range(per_metric)]
        if PROTOCOL["value"] == "pickle":  # as carbon-relay sends: 500 points a message
            flat = [(n, (now - interval * k, v))
                    for k, row in zip(range(per_metric, 0, -1), values, strict=True)
                    for n, v in zip(share, row, strict=True)]
            messages = []
            for start in range(0, len(flat), 500):
                body = pickle.dumps(flat[start:start + 500], protocol=2)
                messages.append(struct.pack("!L", len(body)) + body)
            out.append(b"".join(messages))
            continue
        chunks = []
        for k, row in zip(range(per_metric, 0, -1), values, strict=True):
            stamp = now - interval * k
            if LOAD["tidy"]:
                chunks.append("".join("%s %d %d\n" % (n, k, stamp) for n in share))
            else:
                chunks.append("".join("%s %r %d\n" % (n, v, stamp)
                                      for n, v in zip(share, row, strict=True)))
        out.append("".join(chunks).encode())
    return out, names


def send_all(port: int, shares: list[bytes]) -> None:
    """Each share over its own connection, all at once."""
    errors: list[BaseException] = []

    def send(share: bytes) -> None:
        try:
            with socket.create_connection(("127.0.0.1", port)) as sock:
                sock.sendall(share)
        except OSError as exc:
            errors.append(exc)

    threads = [threading.Thread(target=send, args=(share,)) for share in shares]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]


def whisper_path(base: Path, name: str) -> str:
    return str(base / "storage" / "whisper" / (name.replace(".", "/") + ".wsp"))


def count_points(path: str, now: int, per_metric: int) -> int:
    try:
        _, values = whisper.fetch(path, now - step() * (per_metric + 2), now)
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
    """One run; ``missing`` > 0 (files without every point after LOAD["timeout"] s) marks
    it failed and leaves its rate None. With LOAD["reference_timeout"] the reference is
    stopped then instead and its rate so far is estimated (``bounded``)."""
    base, fs = new_run(dirs, "cachebench-", metrics)
    ports = make_root(base, strategy, "inf")
    proc = start(impl, base)
    try:
        wait_port(ports["line"], proc)
    except RuntimeError:
        print((base / "daemon.log").read_text()[-3000:])
        raise
    interval = step()
    now = int(time.time()) // interval * interval
    shares, names = payload(points, metrics, now)
    per_metric = points // metrics
    if PREFILL["value"]:
        prefill(base, ports, names, now - interval * (per_metric + 10))
    time.sleep(0.5)
    rss_before = rss_kb(proc.pid)
    cpu_before = cpu_seconds(proc.pid)
    wall_started = time.time()
    started = time.monotonic()
    send_all(ports[PROTOCOL["value"]], shares)
    sent = time.monotonic() - started
    pending = {n: whisper_path(base, n) for n in names}
    bound = LOAD["reference_timeout"] if impl == "reference" else None
    deadline = started + (bound or LOAD["timeout"])
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
    result = {"impl": impl, "strategy": strategy, "journal": JOURNAL["value"],
              "metrics": metrics, "points": points, "send_s": sent, "poll_s": elapsed,
              "cpu_s": cpu_seconds(proc.pid) - cpu_before,
              "peak_rss_mb": rss_kb(proc.pid, "VmHWM") / 1024,
              "idle_rss_growth_mb": (rss_kb(proc.pid) - rss_before) / 1024,
              "missing": len(pending), "bounded": False}
    if pending and bound:
        stop(proc)  # its files stop changing: count what reached them
        written = estimate_written(names, pending, base, now, per_metric)
        result.update(seconds=bound, points_s=written / bound, bounded=True, missing=0,
                      written_estimate=written)
        print("reference stopped after %.0f s: ~%s of %s points on disk (sampled)"
              % (bound, format(int(written), ","), format(points, ",")), flush=True)
        finish(base, dirs, fs)
        return result
    # The last whisper write, from the files' mtimes: the polling above finds completion
    # late by up to one verification pass (~0.5 s of fetches over 10,000 files), which
    # would weigh more on the faster daemon.
    # a failed run (points missing) keeps its CPU and memory figures but gets no rate
    written_at = None if pending else \
        max(os.stat(whisper_path(base, n)).st_mtime for n in names) - wall_started
    result.update(seconds=written_at,
                  points_s=None if written_at is None else points / written_at)
    stop(proc)
    finish(base, dirs, fs)
    return result


def estimate_written(names: list[str], pending: dict, base: Path, now: int,
                     per_metric: int) -> float:
    """Points on disk, from SAMPLE_FILES files picked at random (complete ones count
    whole)."""
    sample = random.Random(3).sample(names, min(SAMPLE_FILES, len(names)))
    found = sum(per_metric if name not in pending
                else count_points(whisper_path(base, name), now, per_metric)
                for name in sample)
    return found / len(sample) * len(names) * per_metric


def new_run(dirs: RunDirs, prefix: str, metrics: int
            ) -> tuple[Path, FreshFileSystem | None]:
    """A run folder; with LOAD["fresh_fs"] a new file system mounted on it, sized for
    ``metrics`` files of the bench's schema."""
    settled()
    base = dirs.new(prefix)
    if not LOAD["fresh_fs"]:
        return base, None
    _, total = file_plan(archives(), None, None)
    fs = FreshFileSystem(base, image_bytes(metrics, total), metrics)
    fs.mount()  # removes what it made if it fails
    LOAD["mounted"].append(fs)
    return base, fs


def finish(base: Path, dirs: RunDirs, fs: FreshFileSystem | None = None) -> None:
    """With a fresh file system: unmount and delete it (the next run makes its own).
    With LOAD["delete_runs"]: remove the run's folder and write the deletions back
    (the next run waits, see ``settled``). Else the folder stays until the end and the
    next run starts after a sync."""
    if fs is not None:
        fs.remove()
        LOAD["mounted"].remove(fs)
        settle()
    elif LOAD["delete_runs"]:
        shutil.rmtree(base, ignore_errors=True)
        dirs.paths.remove(base)
        os.sync()
        LOAD["deleted_at"] = time.monotonic()
    else:
        settle()


def settled() -> None:
    """Wait until LOAD["settle"] s have passed since the last run folder was deleted:
    ext4 (without a journal, as here) skips inodes freed in the last 60 s when it
    allocates, and checking each one made the next run's creates several times slower."""
    if LOAD["deleted_at"] is not None:
        time.sleep(max(0.0, LOAD["settle"] - (time.monotonic() - LOAD["deleted_at"])))


def floor_binary(folder: Path) -> str:
    """bench/create_floor.c built with gcc into ``folder``."""
    binary = folder / "create_floor"
    subprocess.run(["gcc", "-O2", "-o", str(binary), str(FLOOR_SOURCE)], check=True)
    return str(binary)


def floor_fill(header_bytes: int, total: int) -> str:
    """The floor's fill, as ours fills a new file by default: a body of at most
    SMALL_BODY bytes written as zeroes, a larger one fallocated (same bytes either way)."""
    return "zero" if total - header_bytes <= SMALL_BODY else "fallocate"


def run_floor(points: int, metrics: int, dirs: RunDirs, write_points: bool = False,
              threads: int = 1) -> dict:
    """The C create loop over the run's files (same paths, order, header, size and fill
    as ours; ``write_points``: also one write of each metric's points; ``threads``
    loops at once, each the files of its own directories)."""
    base, fs = new_run(dirs, "cachefloor-", metrics)
    binary = floor_binary(base)
    header, total = file_plan(archives(), None, None)
    paths = "".join(whisper_path(base, name) + "\n" for name in metric_names(metrics))
    extra = [str(12 * (points // metrics)) if write_points else "0", str(threads)]
    done = subprocess.run([binary, floor_fill(len(header), total), str(len(header)),
                           str(total), *extra],
                          input=paths.encode(), capture_output=True, check=True)
    fields = dict(part.split("=") for part in done.stdout.decode().split())
    seconds = float(fields["seconds"])
    impl = "floor+write" if write_points else "floor"
    result = {"impl": impl if threads == 1 else "%s x%d" % (impl, threads), "strategy": "-",
              "journal": False, "metrics": metrics, "points": points, "seconds": seconds,
              "points_s": points / seconds, "cpu_s": float(fields["user"]) + float(fields["sys"]),
              "peak_rss_mb": 0.0, "missing": 0, "bounded": False}
    finish(base, dirs, fs)
    return result


def prefill(base: Path, ports: dict, names: list[str], stamp: int) -> None:
    """One point a metric, before the timed load (outside the window it checks), and
    wait until every file is there and the daemon is idle."""
    send_all(ports["line"], ["".join("%s 1 %d\n" % (name, stamp) for name in names).encode()])
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
    """Resident bytes per cached point and per cached metric, with writes paused."""
    base, fs = new_run(dirs, "cachemem-", metrics)
    ports = make_root(base, "sorted", "0.001")
    proc = start(impl, base)
    wait_port(ports["line"], proc)
    time.sleep(1.0)
    before = rss_kb(proc.pid)
    interval = step()
    now = int(time.time()) // interval * interval
    shares, names = payload(points, metrics, now)
    send_all(ports[PROTOCOL["value"]], shares)
    per_metric = points // metrics
    deadline = time.monotonic() + LOAD["timeout"]
    last_of_each = names[-len(shares):]  # the last metric each connection sent
    while time.monotonic() < deadline:
        if all(carbonlink_count(ports["query"], name) >= per_metric for name in last_of_each):
            break
        time.sleep(0.2)
    time.sleep(1.0)
    after = rss_kb(proc.pid)
    stop(proc)
    finish(base, dirs, fs)
    return {"impl": impl, "rss_growth_mb": (after - before) / 1024,
            "bytes_per_point": (after - before) * 1024 / points,
            "bytes_per_metric": (after - before) * 1024 / metrics}


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
                        help="storage schema (a metric's points are one first-archive "
                             "step apart)")
    parser.add_argument("--aggregation", default="",
                        help="aggregationMethod for every metric (default: average)")
    parser.add_argument("--no-memory", action="store_true")
    parser.add_argument("--memory-only", action="store_true",
                        help="only the cached-memory runs (writes paused)")
    parser.add_argument("--rounds", type=int, default=1,
                        help="repeat each shared strategy's pair, alternating who goes first")
    parser.add_argument("--writer-threads", type=int, default=0,
                        help="WRITER_THREADS for ours (0: our default)")
    parser.add_argument("--no-journal", action="store_true", help="CACHE_JOURNAL = False")
    parser.add_argument("--prefill", action="store_true",
                        help="make the files before the timed load: measure updates only")
    parser.add_argument("--journal-ab", action="store_true",
                        help="ours without and with the journal: off, on, on, off")
    parser.add_argument("--connections", type=int, default=4,
                        help="TCP connections the points are sent over (default 4)")
    parser.add_argument("--tidy-values", action="store_true",
                        help="small integer values instead of full-precision floats")
    parser.add_argument("--timeout", type=float, default=600.0,
                        help="seconds before a run with points missing fails")
    parser.add_argument("--reference-timeout", type=float, default=None,
                        help="stop the reference after this many seconds and report its "
                             "rate so far (estimated from %d of its files)" % SAMPLE_FILES)
    parser.add_argument("--floor", action="store_true",
                        help="time bench/create_floor.c on the same files before the first "
                             "and after the last run")
    parser.add_argument("--floor-threads", default="1",
                        help="with --floor: the floor's thread counts, comma-separated "
                        "(before the runs in this order, after them reversed)")
    parser.add_argument("--floor-once", action="store_true",
                        help="with --floor: only before the first run (long loads)")
    parser.add_argument("--delete-runs", action="store_true",
                        help="remove each run's folder once measured, then sync and wait "
                             "--settle seconds")
    parser.add_argument("--settle", type=float, default=65.0)
    parser.add_argument("--fresh-fs", action="store_true",
                        help="give every run (floor, ours, reference) its own new ext4 "
                             "file system on a loop-mounted sparse image, deleted once "
                             "measured (root; see bench/fresh_fs.py)")
    parser.add_argument("--growth", action="store_true",
                        help="add the means to docs/data/growth/cache.json")
    parser.add_argument("--ours-first", action="store_true",
                        help="ours before the reference in the first round (a second "
                             "invocation that completes an A B B A begun by another)")
    parser.add_argument("--save-rows", type=Path, default=None,
                        help="write this invocation's runs to a JSON file")
    parser.add_argument("--add-rows", type=Path, action="append", default=[],
                        help="runs saved by --save-rows from an earlier invocation of the "
                             "same load, counted in the means (and --growth) with these")
    parser.add_argument("--no-runs", action="store_true",
                        help="run nothing: the tables (and --growth) of the --add-rows "
                             "runs alone (several locked invocations of one load)")
    args = parser.parse_args()
    LOAD.update(connections=args.connections, tidy=args.tidy_values, timeout=args.timeout,
                reference_timeout=args.reference_timeout, delete_runs=args.delete_runs,
                settle=args.settle, fresh_fs=args.fresh_fs)
    JOURNAL["value"] = not args.no_journal
    PREFILL["value"] = args.prefill
    WRITER_THREADS["value"] = args.writer_threads
    SCHEMA["retentions"] = args.retentions
    PROTOCOL["value"] = args.protocol
    SCHEMA["aggregation"] = args.aggregation
    with RunDirs() as dirs:
        try:
            failed = run_all(args, dirs)
        finally:
            for fs in LOAD["mounted"]:
                fs.remove()
    if failed:
        sys.exit("%d run(s) ended with points missing: no rate is reported for them" % failed)


def run_order(args: argparse.Namespace) -> list[tuple[str, str]]:
    """(impl, strategy) runs: for each strategy both have, ours and the reference
    alternate round by round (reference first, then ours first, ...: A B B A per
    strategy; ``--ours-first`` starts with ours); the rest follow."""
    ours = args.strategies.split(",")
    reference = [] if args.no_reference else args.reference_strategies.split(",")
    shared = list(dict.fromkeys(s for s in ours if s in reference))
    order: list[tuple[str, str]] = []
    for round_ in range(args.rounds):
        for strategy in shared:
            pair = [("reference", strategy), ("ours", strategy)]
            order += pair if (round_ + args.ours_first) % 2 == 0 else pair[::-1]
    order += [("reference", s) for s in reference if s not in shared]
    order += [("ours", s) for s in ours if s not in shared]
    return order


def load_text(args: argparse.Namespace) -> str:
    """The load in a few words (the growth rows' "load")."""
    return "%s points, %s, %s values, %d connection(s)%s%s" % (
        format(args.points, ","), SCHEMA["retentions"],
        "tidy integer" if LOAD["tidy"] else "full-precision", LOAD["connections"],
        ", pickle" if PROTOCOL["value"] == "pickle" else "",
        ", fresh file system a run" if LOAD["fresh_fs"] else "")


def mean_rows(rows: list[dict]) -> dict[tuple[str, str], dict]:
    """Per (impl, strategy) over its complete runs: mean points/s, CPU s, idle RSS
    growth; peak RSS the largest; ``bounded`` if any run was stopped early."""
    means: dict[tuple[str, str], dict] = {}
    for key in dict.fromkeys((r["impl"], r["strategy"]) for r in rows):
        runs = [r for r in rows if (r["impl"], r["strategy"]) == key and not r["missing"]]
        if not runs:
            continue
        means[key] = {
            "points_s": sum(r["points_s"] for r in runs) / len(runs),
            "cpu_s": sum(r["cpu_s"] for r in runs) / len(runs),
            "peak_rss_mb": max(r["peak_rss_mb"] for r in runs),
            "idle_rss_growth_mb": sum(r.get("idle_rss_growth_mb", 0.0) for r in runs) / len(runs),
            "bounded": any(r["bounded"] for r in runs), "runs": len(runs)}
    return means


def print_ratios(rows: list[dict], args: argparse.Namespace) -> dict:
    """Mean points/s and peak RSS per (impl, strategy), ours against the reference and
    the floor; returns the means."""
    print("\n%s over %s new metrics, mean per implementation and strategy:" % (
        load_text(args), format(args.metrics, ",")))
    means = mean_rows(rows)
    for key, mean in means.items():
        per_known = mean["idle_rss_growth_mb"] * 1048576 / args.metrics
        print("  %-11s %-10s %10s points/s  CPU %6.2f s  peak RSS %5.0f MB  idle growth "
              "%4.0f B/metric  (%d run(s))%s" % (
                  key[0], key[1], format(int(mean["points_s"]), ","), mean["cpu_s"],
                  mean["peak_rss_mb"], per_known, mean["runs"],
                  "  STOPPED EARLY: rate so far" if mean["bounded"] else ""))
    floors = [(key[0], mean) for key, mean in means.items() if key[0].startswith("floor")
              and "+write" not in key[0]]
    for (impl, strategy), mean in means.items():
        reference = means.get(("reference", strategy))
        if impl == "ours" and reference:
            print("  ratio ours / %s, %s: %.2fx%s" % (
                REFERENCE_NAME, strategy, mean["points_s"] / reference["points_s"],
                " (reference stopped early)" if reference["bounded"] else ""))
        for name, floor in floors if impl in ("ours", "reference") else []:
            print("  %s %s at %.0f%% of the C create %s's points/s" % (
                impl, strategy, 100 * mean["points_s"] / floor["points_s"], name))
    return means


def record_growth(means: dict, args: argparse.Namespace) -> None:
    """Our, the reference's and the C floor's means into docs/data/growth/cache.json
    (rows for the same implementation, name count and load are replaced); --fresh-fs rows
    make one line of the plot whatever their load (``curve``)."""
    path = ROOT / "docs" / "data" / "growth" / "cache.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = json.loads(path.read_text()) if path.exists() else []
    load = load_text(args)
    command = "python bench/cache_bench.py " + " ".join(sys.argv[1:])
    today = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M")
    for (impl, strategy), mean in means.items():
        if impl not in ("ours", "reference", "floor"):
            continue
        name = {"ours": "ours", "floor": FLOOR_NAME}.get(impl, REFERENCE_NAME)
        text = "%s, %s%s" % (load, strategy,
                             ", stopped early: rate so far" if mean["bounded"] else "")
        rows = [row for row in rows if (row["impl"], row["names"], row["load"])
                != (name, args.metrics, text)]
        rows.append({"daemon": "cache", "impl": name, "names": args.metrics, "load": text,
                     "throughput": round(mean["points_s"], 1), "unit": "points/s",
                     "cpu_s": round(mean["cpu_s"], 2),
                     "peak_rss_mb": None if impl == "floor" else round(mean["peak_rss_mb"], 1),
                     "measured": today, "command": command,
                     **({"curve": FRESH_CURVE} if LOAD["fresh_fs"] else {})})
    path.write_text(json.dumps(rows, indent=1) + "\n")
    print("growth rows written to %s" % path.relative_to(ROOT))


def run_all(args: argparse.Namespace, dirs: RunDirs) -> int:
    """Every run and the tables; returns how many runs failed."""
    rows: list[dict] = []
    settle()
    if args.memory_only:
        print_memory(args, dirs)
        return 0
    runs = not args.no_runs
    floor_threads = [int(count) for count in args.floor_threads.split(",")]
    for threads in floor_threads if args.floor and runs else []:
        rows.append(run_floor(args.points, args.metrics, dirs, threads=threads))
        print(rows[-1], flush=True)
    for impl, strategy in run_order(args) if runs else []:
        journals = (abba(False, True) if args.journal_ab and impl == "ours"
                    else (JOURNAL["value"],))
        for journal in journals:
            JOURNAL["value"] = journal
            rows.append(run_throughput(impl, strategy, args.points, args.metrics, dirs))
            print(rows[-1], flush=True)
    for threads in floor_threads[::-1] if args.floor and not args.floor_once and runs else []:
        rows.append(run_floor(args.points, args.metrics, dirs, threads=threads))
        print(rows[-1], flush=True)
    if args.save_rows:
        args.save_rows.write_text(json.dumps(rows, indent=1) + "\n")
    for path in args.add_rows:
        earlier = json.loads(path.read_text())
        print("%d run(s) added from %s" % (len(earlier), path))
        rows = earlier + rows
    print("\n| implementation | strategy | journal | points/s | seconds | CPU s | peak RSS MB "
          "| idle RSS growth MB | missing |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        journal = "on" if r["journal"] and r["impl"] == "ours" else "off"
        if r["missing"]:
            print("| %s | %s | %s | FAILED | - | - | - | - | %d |" % (
                r["impl"], r["strategy"], journal, r["missing"]))
            continue
        print("| %s | %s | %s | %s%s | %.2f | %.2f | %.0f | %.1f | 0 |" % (
            r["impl"], r["strategy"], journal, format(int(r["points_s"]), ","),
            " (stopped early, so far)" if r["bounded"] else "", r["seconds"],
            r["cpu_s"], r["peak_rss_mb"], r.get("idle_rss_growth_mb", 0.0)))
    means = print_ratios(rows, args)
    if args.growth:
        record_growth(means, args)
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
    if not args.no_memory and runs:
        print_memory(args, dirs)
    return sum(1 for r in rows if r["missing"])


def print_memory(args: argparse.Namespace, dirs: RunDirs) -> None:
    """Bytes per cached point and per cached metric, the reference's and ours."""
    impls = ["ours"] if args.no_reference else ["reference", "ours"]
    memory = [run_memory(impl, args.points, args.metrics, dirs) for impl in impls]
    print("\n%s over %s metrics, writes paused:" % (load_text(args), format(args.metrics, ",")))
    print("| implementation | RSS growth MB | bytes per cached point | bytes per cached metric |")
    print("|---|---|---|---|")
    for m in memory:
        print("| %s | %.1f | %.0f | %.0f |" % (m["impl"], m["rss_growth_mb"],
                                              m["bytes_per_point"], m["bytes_per_metric"]))


if __name__ == "__main__":
    main()
