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

``--floor`` times bench/cache_bench.py's C create floor (bench/create_floor.c: the same
files created by a C loop, nothing written into them) before the first and after the last
run and prints both servers' points/s over the floor's; ``--fresh-fs`` gives every run its
own new ext4 (cache_bench's; root), which the 100,000-metric load needs (10 GB of files a
run, and no run paying for the inodes an earlier one freed).

``--steady --rate-search``: the largest rate each sustains (``rate_search``): 100,000
existing metrics, points round-robin over them at a fixed rate for 120 s a step, rising
rates until one falls behind, then once between; "falling behind" is defined in
``rate_step`` (the sender could not keep the rate, or the backlog of points sent but not
yet durable and queryable grew by more than 5% of the points offered over the step's
second half).

    python bench/ingest_bench.py [--metrics 10000 --per-metric 360 --rounds 2]
    python bench/ingest_bench.py --metrics 100000 --per-metric 36 --floor --fresh-fs
    python bench/ingest_bench.py --steady --rate-search --fresh-fs
    python bench/ingest_bench.py --only ours --rounds 1      # e.g. under perf
    python bench/ingest_bench.py --settings-ab --ours-setting WRITER_MIN_PASS_SECONDS=1
    python bench/ingest_bench.py --ours-setting WRITER_MIN_PASS_SECONDS=1   # against VM
"""

from __future__ import annotations

import argparse
import bisect
import contextlib
import os
import random
import resource
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Iterator

import whisper

sys.path.insert(0, str(Path(__file__).resolve().parent))
import cache_bench  # noqa: E402
from cache_bench import (LOAD, Busy, count_points, finish, make_root, new_run,  # noqa: E402
                         payload, run_floor, send_all, settle, start, whisper_path)
from common import (RunDirs, abba, cpu_seconds, loadavg, rss_kb, start_vm,  # noqa: E402
                    stop, victoria_metrics_binary, vm_flush, vm_query, wait_port)

VM_NAME = "VictoriaMetrics"
OURS_NAME = "ours (carbon-cache, journal on)"
POLL_SECONDS = 0.05
FORCE_FLUSH = {"value": True}


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
    with served("ours", dirs, len(names), None, settings) as (base, proc, port, _):
        time.sleep(0.5)
        cpu_before = cpu_seconds(proc.pid)
        threads_before = thread_cpu(proc.pid)
        calls_before = syscalls(proc.pid)
        load = loadavg()
        wall_started = time.time()
        started = time.monotonic()
        send_all(port, shares)
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
    return {"impl": ours_name(settings), "seconds": seconds, "send_s": sent, "cpu_s": cpu,
            "peak_rss_mb": peak, "missing": len(pending), "load": load,
            "read_calls": calls[0], "write_calls": calls[1],
            "reactor_cpu_s": threads.pop(proc.pid, 0.0),
            "other_threads_cpu_s": sorted(threads.values(), reverse=True)}


def ours_name(settings: tuple[str, ...]) -> str:
    return OURS_NAME + (" + " + ", ".join(settings) if settings else "")


def set_keys(conf: Path, settings: tuple[str, ...]) -> None:
    """Put ``KEY = VALUE`` lines in carbon.conf: in place of the bench's own line for
    the key where it has one (a key given twice is a config error), else at the end."""
    lines = conf.read_text().splitlines()
    for setting in settings:
        key = setting.split("=", 1)[0].strip()
        where = [i for i, line in enumerate(lines) if line.split("=", 1)[0].strip() == key]
        if where:
            lines[where[0]] = setting
        else:
            lines.append(setting)
    conf.write_text("".join(line + "\n" for line in lines))


def start_server(impl: str, base: Path, binary: str | None, settings: tuple[str, ...] = ()
                 ) -> tuple[subprocess.Popen, int, int]:
    """Ours (cache_bench's settings and ``settings`` lines) or VictoriaMetrics in
    ``base``, listening: (process, plaintext port, VictoriaMetrics' HTTP port or 0)."""
    if impl == "vm":
        assert binary is not None
        proc, http, port = start_vm(binary, base)
        return proc, port, http
    ports = make_root(base, "sorted", "inf")
    if settings:
        set_keys(base / "conf" / "carbon.conf", settings)
    proc = start("ours", base)
    try:
        wait_port(ports["line"], proc)
    except RuntimeError:
        print((base / "daemon.log").read_text()[-3000:])
        raise
    return proc, ports["line"], 0


@contextlib.contextmanager
def served(impl: str, dirs: RunDirs, metrics: int, binary: str | None,
           settings: tuple[str, ...] = (), kind: str = ""
           ) -> Iterator[tuple[Path, subprocess.Popen, int, int]]:
    """A run of ``impl`` (``start_server``) in a new run folder (``new_run``: with
    --fresh-fs its own file system, sized for ``metrics`` files): (folder, process,
    plaintext port, VictoriaMetrics' HTTP port or 0). The server's log tail is printed
    if the run fails; the server is stopped and the folder finished either way."""
    base, fs = new_run(dirs, "ingestbench-%s%s-" % (kind, impl), metrics)
    proc, port, http = start_server(impl, base, binary, settings)
    try:
        yield base, proc, port, http
    except BaseException:
        print((base / ("vm.log" if impl == "vm" else "daemon.log")).read_text()[-3000:])
        raise
    finally:
        stop(proc)
        finish(base, dirs, fs)


def run_vm(binary: str, shares: list[bytes], total: int, metrics: int, now: int,
           dirs: RunDirs, timeout: float) -> dict:
    with served("vm", dirs, metrics, binary) as (_, proc, graphite, http):
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


def make_existing(impl: str, pid: int, port: int, http: int, base: Path, names: list[str],
                  stamp: int, timeout: float) -> float:
    """The metrics made before a timed window (one point each, stamped ``stamp``, over
    LOAD["connections"] connections), waited for until every series exists (ours: its
    file; VictoriaMetrics: its series counted by a query) and the server is idle;
    returns the seconds that took."""
    connections = LOAD["connections"]
    made = time.monotonic()
    send_all(port, ["".join("%s 1 %d\n" % (n, stamp) for n in names[i::connections])
                    .encode() for i in range(connections)])
    if impl == "vm":
        series = 'count(count_over_time({__name__=~"bench[.].*"}[2h]))'
        while vm_query(http, series, stamp + 60) < len(names):
            vm_flush(http)
            time.sleep(0.5)
            if time.monotonic() - made > timeout:
                raise RuntimeError("VictoriaMetrics did not show every series")
    else:
        while not all(os.path.exists(whisper_path(base, n)) for n in names):
            time.sleep(0.5)
            if time.monotonic() - made > timeout:
                raise RuntimeError("files were not all made")
    made = time.monotonic() - made
    busy = Busy(pid)
    while busy.check():
        time.sleep(0.05)
    settle()
    return made


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
    with served(impl, dirs, args.metrics, binary, settings, "steady-") as (base, proc, port,
                                                                          http):
        made = make_existing(impl, proc.pid, port, http, base, names, prefill_stamp,
                             args.timeout)
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
    return {"impl": VM_NAME if impl == "vm" else ours_name(settings), "metrics": args.metrics,
            "prefill_s": made, "window_s": window,
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


STAMP = b"@@@@@@@@@@"  # a round's timestamp in the templates (10 digits once filled in)
TEMPLATES = 8  # value sets the rounds cycle through


def line_offsets(text: bytes) -> list[int]:
    """Where each line of ``text`` starts, and its end (lines end with a newline)."""
    offsets = [0]
    for line in text.split(b"\n")[:-1]:
        offsets.append(offsets[-1] + len(line) + 1)
    return offsets


def push(sock: socket.socket, body: bytes, offsets: list[int], first: int, end: int,
         stop_at: float) -> int:
    """Lines ``first`` to ``end`` of ``body`` (``offsets``: where each starts) sent on
    ``sock``, as many as the server takes by ``stop_at`` (a line begun is finished, so the
    stream stays whole); returns how many were sent."""
    view = memoryview(body)
    sent, stop = offsets[first], offsets[end]
    while sent < stop:
        left = stop_at - time.monotonic()
        whole = offsets[bisect.bisect_right(offsets, sent) - 1] == sent
        if left <= 0 and whole:
            break
        sock.settimeout(left if left > 0 and whole else 5.0)
        try:
            sent += sock.send(view[sent:stop])
        except TimeoutError:
            continue
    return bisect.bisect_right(offsets, sent) - 1 - first


class RateSender:
    """Points at ``rate`` a second over LOAD["connections"] connections, each its share
    of the metrics (``names[i::connections]``) round after round, a metric's k-th point
    stamped ``stamp + 10 * k`` (so stamps never repeat or go back), paced every 20 ms
    against the clock. A connection's ``sendall`` blocks when the server reads too
    slowly: what it has not taken by the end of the step (50 ms of grace) is never sent, so
    ``sent`` falls short of ``rate`` x seconds. Rounds and positions carry
    over from one ``run`` to the next (the same connections, the stamps go on)."""

    def __init__(self, port: int, names: list[str], stamp: int) -> None:
        connections = LOAD["connections"]
        rng = random.Random(29)
        self.shares = [names[i::connections] for i in range(connections)]
        self.templates = [[("".join("%s %r " % (n, rng.random() * 100) + "%s\n"
                                    for n in share) % ((STAMP.decode(),) * len(share)))
                           .encode() for _ in range(TEMPLATES)] for share in self.shares]
        self.offsets = [[line_offsets(template) for template in templates]
                        for templates in self.templates]
        self.stamp = stamp
        self.lines = [0] * connections  # sent on each connection, all runs
        self.socks = [socket.create_connection(("127.0.0.1", port))
                      for _ in range(connections)]

    def metric_points(self, connection: int, position: int) -> int:
        """Points sent so far to the metric at ``position`` of a connection's share."""
        rounds, partial = divmod(self.lines[connection], len(self.shares[connection]))
        return rounds + (position < partial)

    def last_stamp(self) -> int:
        return self.stamp + 10 * max(lines // len(share) for lines, share in
                                     zip(self.lines, self.shares, strict=True))

    def run(self, rate: float, seconds: float) -> None:
        """Send for ``seconds`` at ``rate`` points/s (in threads; returns once done)."""
        started = time.monotonic()
        per = rate / len(self.socks)
        threads = [threading.Thread(target=self._send, args=(i, per, started, seconds))
                   for i in range(len(self.socks))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    def _send(self, i: int, per: float, started: float, seconds: float) -> None:
        size = len(self.shares[i])
        first = self.lines[i]
        round_no, body, offsets = -1, b"", [0]
        chunk = max(1, int(per * 0.05))  # lines a sendall: 50 ms of the rate at most
        stop_at = started + seconds + 0.05  # what is not sent by then is not sent
        while True:
            elapsed = time.monotonic() - started
            want = first + int(per * min(elapsed, seconds))
            while self.lines[i] < want and time.monotonic() < stop_at:
                number, position = divmod(self.lines[i], size)
                if number != round_no:
                    round_no = number
                    body = self.templates[i][number % TEMPLATES].replace(
                        STAMP, b"%d" % (self.stamp + 10 * number))
                    offsets = self.offsets[i][number % TEMPLATES]
                end = min(size, position + want - self.lines[i], position + chunk)
                sent = push(self.socks[i], body, offsets, position, end, stop_at)
                self.lines[i] += sent
                if sent < end - position:
                    return
            if elapsed >= seconds:
                return
            time.sleep(0.02)

    def close(self) -> None:
        for sock in self.socks:
            sock.close()


class Durable:
    """Points of a fixed sample of metrics (the ``bench.host000`` directory: every 100th
    metric) that are durable and queryable: ours, in their whisper files; VictoriaMetrics,
    counted by a query after ``/internal/force_flush`` (its in-memory parts in files).
    ``backlog`` scales the sample's sent-but-not-durable points to all metrics."""

    def __init__(self, impl: str, base: Path, http: int, sender: RateSender,
                 metrics: int) -> None:
        self.impl, self.base, self.http, self.sender = impl, base, http, sender
        self.sample = [(c, p, name) for c, share in enumerate(sender.shares)
                       for p, name in enumerate(share) if ".host000." in name]
        self.scale = metrics / len(self.sample)

    def found(self) -> int:
        first, last = self.sender.stamp, self.sender.last_stamp()
        if self.impl == "vm":
            vm_flush(self.http)
            query = 'sum(count_over_time({__name__=~"bench[.]host000[.].*"}[%ds]))' % (
                last - first + 1)
            return int(vm_query(self.http, query, last))
        total = 0
        for _, _, name in self.sample:
            try:
                _, values = whisper.fetch(whisper_path(self.base, name), first - 1, last)
            except (OSError, whisper.WhisperException):
                continue
            total += sum(1 for v in values if v is not None)
        return total

    def backlog(self) -> float:
        """Points sent but not yet durable, estimated over all metrics."""
        sent = sum(self.sender.metric_points(c, p) for c, p, _ in self.sample)
        return (sent - self.found()) * self.scale


def own_cpu() -> float:
    """CPU seconds of this process (the sender and the backlog samples)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def rate_step(proc: subprocess.Popen, sender: RateSender, durable: Durable, rate: float,
              seconds: float) -> dict:
    """``rate`` points/s for ``seconds``, the backlog sampled every 10 s meanwhile.
    Falling behind, either: the sender could not keep the rate (it sent less than 99% of
    rate x seconds: the server did not read fast enough), or the backlog (points sent
    but not durable and queryable) grew between the step's second quarter and its last
    by more than 5% of the points offered in between (the server made points durable
    at less than ~95% of the rate)."""
    before = sum(sender.lines)
    cpu_before = cpu_seconds(proc.pid)
    own_before = own_cpu()
    load = loadavg()
    started = time.monotonic()
    thread = threading.Thread(target=sender.run, args=(rate, seconds))
    thread.start()
    samples = []
    while thread.is_alive():
        thread.join(max(0.0, 10 - (time.monotonic() - started) % 10))
        at = time.monotonic() - started
        samples.append((at, durable.backlog()))
    elapsed = time.monotonic() - started
    sent = sum(sender.lines) - before
    cpu = cpu_seconds(proc.pid) - cpu_before
    own = own_cpu() - own_before
    early = [b for at, b in samples if seconds * 0.25 <= at <= seconds * 0.5 + 5]
    late = [b for at, b in samples if at >= seconds * 0.8]
    growth = (sum(late) / len(late) - sum(early) / len(early)) if early and late else 0.0
    kept = sent >= 0.99 * rate * seconds
    offered = rate * seconds * 0.4
    ok = kept and growth <= 0.05 * offered
    why = ("" if ok else "sender short: %s of %s points" % (format(sent, ","),
                                                            format(int(rate * seconds), ","))
           if not kept else "backlog grew by %s points (%.0f%% of the points offered "
           "meanwhile)" % (format(int(growth), ","), 100 * growth / offered))
    return {"rate": rate, "sustained": ok, "why": why, "sent": sent, "elapsed_s": elapsed,
            "cpu_s": cpu, "core_pct": 100 * cpu / elapsed, "load": load,
            "bench_core_pct": 100 * own / elapsed,
            "backlog_end": samples[-1][1] if samples else 0.0,
            "backlog_s": [(round(at), int(b)) for at, b in samples]}


def drain(durable: Durable, rate: float, timeout: float = 90.0) -> float:
    """Wait (at most ``timeout`` s) until the backlog is under a second of ``rate``;
    returns the backlog left."""
    deadline = time.monotonic() + timeout
    backlog = durable.backlog()
    while backlog > rate and time.monotonic() < deadline:
        time.sleep(2.0)
        backlog = durable.backlog()
    return backlog


def rate_search(impl: str, binary: str | None, args: argparse.Namespace, dirs: RunDirs,
                settings: tuple[str, ...] = ()) -> dict:
    """The largest rate ``impl`` sustains for ``args.rate_seconds`` without falling
    behind (``rate_step``) over ``args.metrics`` existing metrics: the rates of
    ``args.rates`` in rising order until one fails, then once the geometric mean of the
    last that held and the first that failed; each step after the last one drained; no
    step starts after ``args.search_minutes``."""
    names = cache_bench.metric_names(args.metrics)
    stamp = int(time.time()) // 10 * 10 - 86400 + 3600  # a day's archive holds the search
    steps: list[dict] = []
    with served(impl, dirs, args.metrics, binary, settings, "rate-") as (base, proc, port,
                                                                         http):
        made = make_existing(impl, proc.pid, port, http, base, names, stamp - 600,
                             args.timeout)
        sender = RateSender(port, names, stamp)
        durable = Durable(impl, base, http, sender, args.metrics)
        rates = [float(r) for r in args.rates.split(",")]
        limit = time.monotonic() + 60 * args.search_minutes
        held, bisected = 0.0, False
        while rates and time.monotonic() + args.rate_seconds < limit:
            rate = rates.pop(0)
            steps.append(rate_step(proc, sender, durable, rate, args.rate_seconds))
            steps[-1]["left_after_drain"] = int(drain(durable, rate))
            print(impl, steps[-1], flush=True)
            if steps[-1]["sustained"]:
                held = rate
                continue
            middle = round((held * rate) ** 0.5, -4)
            if bisected or not held < middle < rate:
                break
            bisected, rates = True, [middle]
        sender.close()
    passed = [s["rate"] for s in steps if s["sustained"]]
    return {"impl": VM_NAME if impl == "vm" else ours_name(settings), "prefill_s": made,
            "largest": max(passed) if passed else 0.0,
            "smallest_failed": min((s["rate"] for s in steps if not s["sustained"]),
                                   default=None), "steps": steps}


def rate_main(args: argparse.Namespace, binary: str | None, extra: tuple[str, ...]) -> None:
    """``rate_search`` for VictoriaMetrics, then ours; the table of every step."""
    order = ["vm"] if args.only == "vm" else ["ours"] if binary is None else ["vm", "ours"]
    results = []
    with RunDirs() as dirs:
        for impl in order:
            settle()
            results.append(rate_search(impl, binary, args, dirs,
                                       extra if impl == "ours" else ()))
    print("\n%s existing metrics, points round-robin over them (a metric's points 10 s "
          "apart), each rate held for %.0f s:\n" % (format(args.metrics, ","),
                                                     args.rate_seconds))
    print("| implementation | points/s offered | sustained | sent | server CPU % of a core "
          "| bench (sender) CPU % | backlog at the end (points) | backlog every 10 s "
          "| load avg | why not |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        for s in r["steps"]:
            print("| %s | %s | %s | %s | %.0f | %.0f | %s | %s | %s | %s |" % (
                r["impl"], format(int(s["rate"]), ","), "yes" if s["sustained"] else "no",
                format(s["sent"], ","), s["core_pct"], s["bench_core_pct"],
                format(int(s["backlog_end"]), ","),
                " ".join(format(b, ",") for _, b in s["backlog_s"]), s["load"], s["why"]))
    print()
    for r in results:
        print("%s: largest rate sustained %s points/s%s (existing metrics made in %.0f s)"
              % (r["impl"], format(int(r["largest"]), ","),
                 "; %s points/s fell behind" % format(int(r["smallest_failed"]), ",")
                 if r["smallest_failed"] else "; every rate tried held", r["prefill_s"]))


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
    parser.add_argument("--rate-search", action="store_true",
                        help="with --steady: the largest rate each sustains for "
                             "--rate-seconds without falling behind (see rate_search)")
    parser.add_argument("--rates", default="100000,200000,400000,800000,1600000",
                        help="with --rate-search: the rates tried, rising (points/s)")
    parser.add_argument("--rate-seconds", type=float, default=120.0)
    parser.add_argument("--search-minutes", type=float, default=14.0,
                        help="with --rate-search: no new step starts after this")
    parser.add_argument("--floor", action="store_true",
                        help="time bench/create_floor.c (cache_bench's C create floor) on "
                             "the load's files before the first and after the last run")
    parser.add_argument("--floor-threads", type=int, default=1,
                        help="with --floor: threads of the C loop (ours creates on 2)")
    parser.add_argument("--fresh-fs", action="store_true",
                        help="each run (the floors too) on its own new ext4 (cache_bench's "
                             "--fresh-fs; root): for loads of 100,000 files")
    parser.add_argument("--delete-runs", action="store_true",
                        help="remove each run's folder once measured (then wait --settle s)")
    parser.add_argument("--settle", type=float, default=65.0)
    parser.add_argument("--steady-rounds", type=int, default=6)
    parser.add_argument("--burst", type=int, default=5,
                        help="with --steady: backfilled points a metric in the middle round")
    args = parser.parse_args()
    if args.steady and "--metrics" not in sys.argv:
        args.metrics = 100_000
    FORCE_FLUSH["value"] = not args.no_force_flush
    LOAD.update(connections=args.connections, fresh_fs=args.fresh_fs,
                delete_runs=args.delete_runs, settle=args.settle)
    cache_bench.SCHEMA["retentions"] = "10s:1d"
    binary = None
    extra = tuple(line.replace("=", " = ", 1) for line in args.ours_setting)
    if args.settings_ab:
        args.only = "ours"
    if args.only != "ours":
        binary = victoria_metrics_binary()
        if binary is None:
            print("VictoriaMetrics skipped: Go is not installed (the bench builds it with "
                  "`go install`)", flush=True)
    try:
        if args.steady and args.rate_search:
            rate_main(args, binary, extra)
        elif args.steady:
            steady_main(args, binary, extra)
        else:
            ingest_main(args, binary, extra)
    finally:
        for fs in LOAD["mounted"]:
            fs.remove()


def ingest_main(args: argparse.Namespace, binary: str | None, extra: tuple[str, ...]) -> None:
    """The ingest load A B B A (with --floor the C create floor before and after)."""
    total = args.metrics * args.per_metric
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
        floors = ["floor"] if args.floor else []
        for impl in floors + order + floors:
            settle()
            now = int(time.time()) // 10 * 10
            load = retimed(shares, built_at, now)
            started_load = loadavg()
            if impl == "floor":
                row = dict(run_floor(total, args.metrics, dirs, threads=args.floor_threads),
                           send_s=0.0, load=started_load)
            elif impl == "vm":
                row = run_vm(binary, load, total, args.metrics, now, dirs, args.timeout)
            else:
                row = run_ours(load, names, args.per_metric, now, dirs, args.timeout,
                               extra if impl == "ours+" else ())
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
    floors = [r for r in rows if r["impl"].startswith("floor")]
    if floors:
        floor = sum(r["points_s"] for r in floors) / len(floors)
        print("| points/s / the C create floor's (%s: %s points/s, mean of %d; %s) | "
              "%.2fx | %.2fx | |" % (floors[0]["impl"], format(int(floor), ","), len(floors),
                                     "/".join("%.2f s" % r["seconds"] for r in floors),
                                     vm["points_s"] / floor, ours["points_s"] / floor))


if __name__ == "__main__":
    main()
