"""Ingest side by side with VictoriaMetrics (issue 30): carbon-cache (ours, journal on)
against VictoriaMetrics single-node, both fed the Graphite plaintext protocol.

The load is built once before any run: ``--metrics`` (default 10,000) metrics x
``--per-metric`` (default 360) points, full-precision float values, 10 s apart, sent
time-major (every metric's first point, then every metric's second...) over
``--connections`` (default 4) TCP connections, a metric's points all on one of them
(bench/cache_bench.py's ``payload``). Each run gets the same bytes, with its timestamps
ending 10 s before the run's start.

Seconds are from the first byte sent until every point is *durable and queryable*:

* ours: every point readable in its whisper file (``whisper.fetch``), the end being the
  files' largest mtime (as bench/cache_bench.py measures). The cache journal is on (the
  default), so a point is in a journal segment from the moment the daemon read it; the
  time measured is until it is in whisper, where graphite-web reads it.
* VictoriaMetrics: ``sum(count_over_time({__name__=~"bench[.].*"}[2h]))`` through its
  Prometheus query API equals the points sent (polled every 50 ms once sending ended),
  and then ``/internal/force_flush`` returned (its in-memory parts written to files, so
  they survive kill -9; without the call that happens within -inmemoryDataFlushInterval,
  default 5 s). It runs with ``-search.disableCache`` (a cached answer could hide points
  still missing) and ``-search.latencyOffset=0s`` (by default it hides the last 30 s).

Settings for ours: cache_bench's (MAX_UPDATES_PER_SECOND and MAX_CREATES_PER_MINUTE =
inf: at carbon's defaults of 500 updates/s and 50 creates/min this load takes hours, and a
site ingesting at this pace lifts them; MAX_CACHE_SIZE = inf; update/create logs off;
self-metrics off), strategy ``sorted``, CACHE_JOURNAL = True; for VictoriaMetrics its
defaults except the flags above and the loopback listeners.

CPU s are the server process's user + system seconds over the run (/proc), peak RSS its
VmHWM. Runs go A B B A (``--rounds``), every run folder kept until the end (see
bench/common.py's RunDirs). VictoriaMetrics is built with ``go install`` on first use
(bench/common.py's ``victoria_metrics_binary``); without Go it is skipped with a message.

    python bench/ingest_bench.py [--metrics 10000 --per-metric 360 --rounds 2]
    python bench/ingest_bench.py --only ours --rounds 1      # e.g. under perf
    python bench/ingest_bench.py --settings-ab --ours-setting WRITER_MIN_PASS_SECONDS=1
    python bench/ingest_bench.py --ours-setting WRITER_MIN_PASS_SECONDS=1   # against VM
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import cache_bench  # noqa: E402
from cache_bench import (LOAD, Busy, count_points, make_root, payload, send_all,  # noqa: E402
                         settle, start, whisper_path)
from common import (RunDirs, abba, cpu_seconds, free_port, rss_kb, stop,  # noqa: E402
                    victoria_metrics_binary, wait_port)

VM_NAME = "VictoriaMetrics"
OURS_NAME = "ours (carbon-cache, journal on)"
POLL_SECONDS = 0.05
FORCE_FLUSH = {"value": True}


def loadavg() -> str:
    with open("/proc/loadavg") as handle:
        return handle.read().split()[0]


def retimed(shares: list[bytes], built_at: int, now: int) -> list[bytes]:
    """The load with its timestamps moved by ``now - built_at`` (a multiple of 10 s),
    so every run's points end 10 s before it starts; same lengths when the stamps keep
    their number of digits (they do for ~300 years)."""
    if now == built_at:
        return shares
    shift = now - built_at
    out = []
    for share in shares:
        lines = share.split(b"\n")
        moved = []
        for line in lines:
            if not line:
                moved.append(line)
                continue
            head, _, stamp = line.rpartition(b" ")
            moved.append(head + b" " + str(int(stamp) + shift).encode())
        out.append(b"\n".join(moved))
    return out


def syscalls(pid: int) -> tuple[int, int]:
    """(read, write) system calls of a process so far (/proc/PID/io)."""
    with open("/proc/%d/io" % pid) as handle:
        fields = dict(line.split(": ") for line in handle.read().splitlines())
    return int(fields["syscr"]), int(fields["syscw"])


def thread_cpu(pid: int) -> dict[int, float]:
    """User + system CPU seconds of each live thread of a process, by thread id (the
    main thread's id is the pid; Python does not name the others at the OS level)."""
    ticks = os.sysconf("SC_CLK_TCK")
    out = {}
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/stat" % (pid, tid)) as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        out[int(tid)] = (int(fields[11]) + int(fields[12])) / ticks
    return out


def run_ours(shares: list[bytes], names: list[str], per_metric: int, now: int,
             dirs: RunDirs, timeout: float, settings: tuple[str, ...] = ()) -> dict:
    base = dirs.new("ingestbench-ours-")
    ports = make_root(base, "sorted", "inf")
    if settings:
        with open(base / "conf" / "carbon.conf", "a") as conf:
            conf.write("".join(line + "\n" for line in settings))
    proc = start("ours", base)
    try:
        wait_port(ports["line"], proc)
        time.sleep(0.5)
        cpu_before = cpu_seconds(proc.pid)
        threads_before = thread_cpu(proc.pid)
        calls_before = syscalls(proc.pid)
        load = loadavg()
        wall_started = time.time()
        started = time.monotonic()
        send_all(ports["line"], shares)
        sent = time.monotonic() - started
        pending = {n: whisper_path(base, n) for n in names}
        busy = Busy(proc.pid)
        deadline = started + timeout
        while pending and time.monotonic() < deadline:
            if busy.check():  # read the files only once the daemon is idle (cache_bench)
                time.sleep(0.05)
                continue
            for name, path in list(pending.items()):
                if count_points(path, now + 10, per_metric) == per_metric:
                    del pending[name]
            if pending:
                time.sleep(0.05)
                busy = Busy(proc.pid)
        cpu = cpu_seconds(proc.pid) - cpu_before
        calls = [after - before for after, before in zip(syscalls(proc.pid), calls_before,
                                                         strict=True)]
        threads = thread_cpu(proc.pid)
        threads = {tid: round(cpu - threads_before.get(tid, 0.0), 2)
                   for tid, cpu in threads.items() if cpu - threads_before.get(tid, 0.0) > 0}
        peak = rss_kb(proc.pid, "VmHWM") / 1024
        seconds = None if pending else \
            max(os.stat(whisper_path(base, n)).st_mtime for n in names) - wall_started
    except BaseException:
        print((base / "daemon.log").read_text()[-3000:])
        raise
    finally:
        stop(proc)
    name = OURS_NAME + (" + " + ", ".join(settings) if settings else "")
    return {"impl": name, "seconds": seconds, "send_s": sent, "cpu_s": cpu,
            "peak_rss_mb": peak, "missing": len(pending), "load": load,
            "read_calls": calls[0], "write_calls": calls[1],
            "reactor_cpu_s": threads.pop(proc.pid, 0.0),
            "other_threads_cpu_s": sorted(threads.values(), reverse=True)}


def vm_query(port: int, query: str, at: int) -> float:
    url = "http://127.0.0.1:%d/api/v1/query?%s" % (port, urllib.parse.urlencode(
        {"query": query, "time": str(at)}))
    with urllib.request.urlopen(url, timeout=30) as response:
        body = json.load(response)
    result = body["data"]["result"]
    return float(result[0]["value"][1]) if result else 0.0


def vm_flush(port: int) -> None:
    with urllib.request.urlopen("http://127.0.0.1:%d/internal/force_flush" % port,
                                timeout=60) as response:
        response.read()


def start_vm(binary: str, base: Path) -> tuple[subprocess.Popen, int, int]:
    """VictoriaMetrics on loopback with its data in ``base``: (process, HTTP port,
    Graphite port), once both listen."""
    http, graphite = free_port(), free_port()
    log = open(base / "vm.log", "w")
    proc = subprocess.Popen(
        [binary, "-httpListenAddr=127.0.0.1:%d" % http,
         "-graphiteListenAddr=127.0.0.1:%d" % graphite,
         "-storageDataPath=%s" % (base / "data"), "-search.disableCache",
         "-search.latencyOffset=0s", "-loggerLevel=WARN"],
        stdout=log, stderr=subprocess.STDOUT, cwd=str(base))
    try:
        wait_port(http, proc)
        wait_port(graphite, proc)
    except RuntimeError:
        stop(proc)
        print((base / "vm.log").read_text()[-3000:])
        raise
    return proc, http, graphite


def run_vm(binary: str, shares: list[bytes], total: int, now: int, dirs: RunDirs,
           timeout: float) -> dict:
    base = dirs.new("ingestbench-vm-")
    proc, http, graphite = start_vm(binary, base)
    try:
        time.sleep(0.5)
        cpu_before = cpu_seconds(proc.pid)
        load = loadavg()
        started = time.monotonic()
        send_all(graphite, shares)
        sent = time.monotonic() - started
        at = now + 10
        query = 'sum(count_over_time({__name__=~"bench[.].*"}[2h]))'
        deadline = started + timeout
        seen = 0.0
        flushes = 0
        while time.monotonic() < deadline:
            seen = vm_query(http, query, at)
            if seen >= total:
                break
            if FORCE_FLUSH["value"]:
                vm_flush(http)
                flushes += 1
            time.sleep(POLL_SECONDS)
        queryable = time.monotonic() - started
        vm_flush(http)
        seconds = time.monotonic() - started
        cpu = cpu_seconds(proc.pid) - cpu_before
        peak = rss_kb(proc.pid, "VmHWM") / 1024
    except BaseException:
        print((base / "vm.log").read_text()[-3000:])
        raise
    finally:
        stop(proc)
    missing = max(0, int(total - seen))
    return {"impl": VM_NAME, "seconds": seconds if not missing else None, "send_s": sent,
            "queryable_s": queryable, "flushes": flushes, "cpu_s": cpu, "peak_rss_mb": peak,
            "missing": missing, "load": load}


def steady_load(names: list[str], stamp: int, rounds: int, burst: int, burst_round: int,
                connections: int) -> list[list[bytes]]:
    """Per round, what each connection sends: one point a metric stamped
    ``stamp + 10 * round`` (full-precision values); the burst round first sends
    ``burst`` earlier points a metric (stamped before ``stamp``: a backfill)."""
    rng = random.Random(23)
    shares = [names[i::connections] for i in range(connections)]
    out = []
    for round_ in range(rounds):
        stamps = ([stamp - 10 * k for k in range(burst, 0, -1)] if round_ == burst_round
                  else []) + [stamp + 10 * round_]
        out.append(["".join("%s %r %d\n" % (name, rng.random() * 100, t)
                            for t in stamps for name in share).encode()
                    for share in shares])
    return out


def run_steady(impl: str, binary: str | None, args: argparse.Namespace, dirs: RunDirs,
               settings: tuple[str, ...] = ()) -> dict:
    """``args.metrics`` metrics made beforehand (one point each), then a point a metric
    every 10 s for ``args.steady_rounds`` rounds, the middle one with a burst of
    ``args.burst`` backfilled points a metric; the server's CPU over the rounds (until
    the last round's interval ends, or later if it is still busy) as % of one core, then
    every point checked durable and queryable (ours: a sample of 1,000 files)."""
    names = cache_bench.metric_names(args.metrics)
    connections = LOAD["connections"]
    stamp = int(time.time()) // 10 * 10 + 10
    burst_round = args.steady_rounds // 2
    rounds = steady_load(names, stamp, args.steady_rounds, args.burst, burst_round,
                         connections)
    expected = args.steady_rounds + args.burst
    prefill_stamp = stamp - 10 * (args.burst + 30)
    if impl == "vm":
        base = dirs.new("ingestbench-steady-vm-")
        proc, http, port = start_vm(binary, base)
    else:
        base = dirs.new("ingestbench-steady-ours-")
        ports = make_root(base, "sorted", "inf")
        if settings:
            with open(base / "conf" / "carbon.conf", "a") as conf:
                conf.write("".join(line + "\n" for line in settings))
        proc = start("ours", base)
        wait_port(ports["line"], proc)
        port = ports["line"]
    try:
        made = time.monotonic()
        send_all(port, ["".join("%s 1 %d\n" % (n, prefill_stamp) for n in names[i::connections])
                        .encode() for i in range(connections)])
        if impl == "vm":
            series = 'count(count_over_time({__name__=~"bench[.].*"}[2h]))'
            while vm_query(http, series, stamp) < args.metrics:
                vm_flush(http)
                time.sleep(0.5)
                if time.monotonic() - made > args.timeout:
                    raise RuntimeError("VictoriaMetrics did not show every series")
        else:
            while not all(os.path.exists(whisper_path(base, n)) for n in names):
                time.sleep(0.5)
                if time.monotonic() - made > args.timeout:
                    raise RuntimeError("files were not all made")
        made = time.monotonic() - made
        busy = Busy(proc.pid)
        while busy.check():
            time.sleep(0.05)
        settle()
        while time.time() < stamp + 0.5:  # no round's stamp is in the future
            time.sleep(0.1)
        load = loadavg()
        cpu_before = cpu_seconds(proc.pid)
        started = time.monotonic()
        for number, shares in enumerate(rounds):
            while time.monotonic() < started + 10 * number:
                time.sleep(0.01)
            send_all(port, shares)
        while time.monotonic() < started + 10 * len(rounds):
            time.sleep(0.05)
        busy = Busy(proc.pid)
        while busy.check() and time.monotonic() < started + 10 * len(rounds) + 60:
            time.sleep(0.05)
        window = time.monotonic() - started
        cpu = cpu_seconds(proc.pid) - cpu_before
        peak = rss_kb(proc.pid, "VmHWM") / 1024
        end = stamp + 10 * len(rounds)
        if impl == "vm":
            vm_flush(http)
            query = 'sum(count_over_time({__name__=~"bench[.].*"}[%ds]))' % (
                end - (stamp - 10 * args.burst) + 1)
            found = vm_query(http, query, end - 10)
            missing = args.metrics * expected - int(found)
        else:
            deadline = time.monotonic() + args.timeout
            sample = random.Random(5).sample(names, min(1000, len(names)))
            while True:
                short = [n for n in sample if count_points(
                    whisper_path(base, n), end, expected) < expected]
                if not short or time.monotonic() > deadline:
                    break
                time.sleep(0.5)
            missing = len(short)
    finally:
        stop(proc)
    name = VM_NAME if impl == "vm" else OURS_NAME + (" + " + ", ".join(settings)
                                                      if settings else "")
    return {"impl": name, "metrics": args.metrics, "prefill_s": made, "window_s": window,
            "cpu_s": cpu, "core_pct": 100 * cpu / window, "peak_rss_mb": peak,
            "missing": missing, "load": load}


def steady_main(args: argparse.Namespace, binary: str | None, extra: tuple[str, ...]) -> None:
    order = (["ours"] * args.rounds if binary is None else abba("vm", "ours", args.rounds))
    rows = []
    with RunDirs() as dirs:
        for impl in order:
            settle()
            rows.append(run_steady(impl, binary, args, dirs, extra if impl == "ours" else ()))
            print(rows[-1], flush=True)
    print("\n%s existing metrics, a point each every 10 s for %d rounds, round %d with %d "
          "more points a metric (a backfill burst):\n" % (
              format(args.metrics, ","), args.steady_rounds, args.steady_rounds // 2 + 1,
              args.burst))
    print("| run | implementation | CPU % of a core | CPU s | window s | peak RSS MB "
          "| prefill s | missing | load avg |")
    print("|---|---|---|---|---|---|---|---|---|")
    for i, r in enumerate(rows, 1):
        print("| %d | %s | %.1f | %.2f | %.1f | %.0f | %.1f | %d | %s |" % (
            i, r["impl"], r["core_pct"], r["cpu_s"], r["window_s"], r["peak_rss_mb"],
            r["prefill_s"], r["missing"], r["load"]))
    if any(r["missing"] for r in rows):
        sys.exit("run(s) ended with points missing")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--metrics", type=int, default=10_000)
    parser.add_argument("--per-metric", type=int, default=360)
    parser.add_argument("--connections", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=2, help="2: A B B A")
    parser.add_argument("--only", choices=["ours", "vm"], default=None)
    parser.add_argument("--ours-setting", action="append", default=[], metavar="KEY=VALUE",
                        help="a carbon.conf line for ours (repeatable); with "
                             "--settings-ab only for its second variant")
    parser.add_argument("--settings-ab", action="store_true",
                        help="ours with its defaults against ours with --ours-setting "
                             "lines, A B B A (no VictoriaMetrics)")
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--no-force-flush", action="store_true",
                        help="poll VictoriaMetrics without /internal/force_flush between "
                             "queries (its own visibility delay counts)")
    parser.add_argument("--steady", action="store_true",
                        help="the steady state instead: --metrics (default here 100,000) "
                             "existing metrics, a point each every 10 s, one burst")
    parser.add_argument("--steady-rounds", type=int, default=6)
    parser.add_argument("--burst", type=int, default=5,
                        help="with --steady: backfilled points a metric in the middle round")
    args = parser.parse_args()
    if args.steady and "--metrics" not in sys.argv:
        args.metrics = 100_000
    FORCE_FLUSH["value"] = not args.no_force_flush
    LOAD["connections"] = args.connections
    cache_bench.SCHEMA["retentions"] = "10s:1d"
    total = args.metrics * args.per_metric
    binary = None
    extra = tuple(line.replace("=", " = ", 1) for line in args.ours_setting)
    if args.settings_ab:
        args.only = "ours"
    if args.only != "ours":
        binary = victoria_metrics_binary()
        if binary is None:
            print("VictoriaMetrics skipped: Go is not installed (the bench builds it with "
                  "`go install`)", flush=True)
    if args.steady:
        steady_main(args, binary, extra)
        return
    impls = ["ours"] if binary is None else ["vm"] if args.only == "vm" else None
    order = impls * args.rounds if impls else abba("vm", "ours", args.rounds)
    if args.settings_ab:
        order = abba("ours", "ours+", args.rounds)
    elif extra:  # against VictoriaMetrics with these settings
        order = ["ours+" if impl == "ours" else impl for impl in order]
    built_at = int(time.time()) // 10 * 10
    shares, names = payload(total, args.metrics, built_at)
    print("load: %s points over %s metrics, %.0f MB over %d connections" % (
        format(total, ","), format(args.metrics, ","), sum(map(len, shares)) / 1e6,
        len(shares)), flush=True)
    rows = []
    with RunDirs() as dirs:
        for impl in order:
            settle()
            now = int(time.time()) // 10 * 10
            load = retimed(shares, built_at, now)
            row = (run_vm(binary, load, total, now, dirs, args.timeout) if impl == "vm"
                   else run_ours(load, names, args.per_metric, now, dirs, args.timeout,
                                 extra if impl == "ours+" else ()))
            row["points_s"] = total / row["seconds"] if row["seconds"] else None
            rows.append(row)
            print(row, flush=True)
    print_table(rows, total, extra)
    if any(r["missing"] for r in rows):
        sys.exit("run(s) ended with points missing")


def print_table(rows: list[dict], total: int, extra: tuple[str, ...]) -> None:
    print("\n| run | implementation | points/s | seconds | sent in s | CPU s | peak RSS MB "
          "| load avg |")
    print("|---|---|---|---|---|---|---|---|")
    for i, r in enumerate(rows, 1):
        rate = format(int(r["points_s"]), ",") if r["points_s"] else "FAILED"
        print("| %d | %s | %s | %s | %.2f | %.2f | %.0f | %s |" % (
            i, r["impl"], rate, "%.2f" % r["seconds"] if r["seconds"] else "-", r["send_s"],
            r["cpu_s"], r["peak_rss_mb"], r["load"]))
    means = {}
    variant = OURS_NAME + " + " + ", ".join(extra) if extra else ""
    for name in (VM_NAME, OURS_NAME, variant):
        runs = [r for r in rows if r["impl"] == name and r["points_s"]]
        if runs:
            means[name] = {"points_s": sum(r["points_s"] for r in runs) / len(runs),
                           "cpu_s": sum(r["cpu_s"] for r in runs) / len(runs),
                           "peak_rss_mb": max(r["peak_rss_mb"] for r in runs),
                           "load": "-".join(sorted({r["load"] for r in runs}))}
    if len(means) < 2:
        return
    names = list(means)
    vm, ours = means[names[0]], means[names[1]]
    print("\n%s points, means of the runs above:\n" % format(total, ","))
    print("| | %s | %s | ratio |" % (names[0], names[1]))
    print("|---|---|---|---|")
    print("| points/s | %s | %s | %.2fx |" % (format(int(vm["points_s"]), ","),
                                              format(int(ours["points_s"]), ","),
                                              ours["points_s"] / vm["points_s"]))
    print("| server CPU s | %.2f | %.2f | %.2fx |" % (vm["cpu_s"], ours["cpu_s"],
                                                     ours["cpu_s"] / vm["cpu_s"]))
    print("| peak RSS MB | %.0f | %.0f | %.2fx |" % (vm["peak_rss_mb"], ours["peak_rss_mb"],
                                                    ours["peak_rss_mb"] / vm["peak_rss_mb"]))
    print("| load average at the runs' starts | %s | %s | |" % (vm["load"], ours["load"]))


if __name__ == "__main__":
    main()
