"""Render benchmark: this app against graphite-web 1.1.10, same whisper tree, same run.

    python bench/render_bench.py [--duration 4] [--clients 1,16] [--threads 4]
                                 [--only json,sum,movavg,png,mix] [--workdir DIR]
                                 [--few-digits] [--with-twisted] [--memory]
    python bench/render_bench.py --series 10000 [--requests 2] [--timeout 180]
                                 [--peers graphite-web,vm]

One command builds everything outside the repository (under --workdir, default
~/.cache/render-bench): a whisper tree of 301 series written every 10 s for a day with
full-precision random values (``--few-digits`` writes small integers instead), kept as
10s:6h,1m:2d so a day reads 1,440 one-minute averages a series; graphite-web 1.1.10 from
bench/common.py's Python 3.9 venv, and gunicorn for this app. Both run under
``gunicorn --workers 2 --worker-class gthread --threads T`` (gunicorn's docs advise 2-4
threads per core; T=4 by default), so each gets the machine's two cores. ``--with-twisted``
also measures this app's own server (``graphite-render --workers 2 --threads T``).

Scenarios (from=-1d, the rows of issue 15): ``*.*.*.*`` json, ``sumSeries(*.*.*.*)`` json,
``movingAverage(servers.*.cpu.*,10)`` json, ``servers.*.cpu.*`` png, and a mix cycling
through 20 targets, one per function Grafana users call most. ``png36`` is issue 30's
graph: ``servers.host0[0-8].cpu.*`` (36 series) over the last 1,000 minutes (1,000 points
each from the 1-minute archive), default size; issue 30 measures it with both apps in 2
processes: ``--only png36 --workers 2 --threads 1 --with-twisted``. Before measuring, every
answer is compared: json values must parse to the same floats (names, tags, timestamps
too); png answers must be PNGs of the asked size. Each scenario runs at each client count
in the order A B B A (graphite-web, ours, ours, graphite-web); requests/s are the mean of
the two runs. The machine may be shared: absolute figures are noisy, ratios less so.

``--series N`` runs only the cost-as-the-work-grows rows (issue 17) over a tree of N series
written every 10 s for a day (``scale.gGGG.hHHHHH.value``, 100 hosts a group; archives
10s:1d,1m:2d, so from=-1d reads 8,640 points a file; the files are written directly, not
through whisper's Python): ``sumSeries`` and ``groupByNode(...,1,"sumSeries")`` of
``scale.*.*.value``, and the bare wildcard as json with maxDataPoints=720 (a whole day of
10 s points for 10,000 series would be a 2 GB body), and ``movingAverage(...,10)`` with
maxDataPoints=720. VictoriaMetrics (``--peers``, default ``graphite-web,vm``) answers the
same rows through its Graphite render API: the tree's 10 s points are sent once through
its Graphite plaintext listener into a data folder beside the tree (reused while the tree
is), its point count checked at every start, and its answers checked against ours before
timing (the same series, none with holes; its values are rounded, so not compared).
Each row: A B B A (A B C C B A with both peers) runs of
``--requests`` sequential requests (graphite-web's bounded by ``--timeout`` seconds a
request), beside the page-cache floor: the same files' needed bytes read in a tight loop
(open, pread of the header, pread of the range, close; best of 3, warm cache, measured
before and after the rows and the smaller kept) and ``cat`` of the whole files into
/dev/null. Rows are appended to docs/data/growth/render.json (``--record``);
``--ours-only`` leaves graphite-web out (quick runs against the floor, nothing compared or
recorded).

``--memory`` runs only the memory check: 1,000 series x 1 day at 60 s, one json and one
png request each to a fresh graphite-web (gunicorn, one worker, one thread) and a fresh
``graphite-render``, then each of the mix's 20 functions over the 1,000 series to a fresh
``graphite-render`` and to this app under the same gunicorn as graphite-web; the peak
resident memory (VmHWM) of the answering process.

The default rows and ``--memory`` start this project's carbon-cache (idle, on free ports)
and give both apps the same CARBONLINK_HOSTS, so each pays a real CarbonLink query for
what it reads (graphite-web one query a metric, this app one bulk query a request); the
report says how much graphite-web's exception.log grew during the run (0 expected).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Optional
from urllib.parse import urlencode

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (ROOT, cpu_seconds, free_port, graphite_web_venv, loadavg,  # noqa: E402
                    mirrored, rss_kb, start_vm, stop, stop_gracefully,
                    victoria_metrics_binary, vm_flush, vm_query, wait_port)
from render_load import fetch, load  # noqa: E402

STEP = 10
SCALE_ARCHIVES = [(STEP, 86400 // STEP), (60, 2 * 1440)]
SCALE_GROUP = 100
GROWTH_FILE = ROOT / 'docs' / 'data' / 'growth' / 'render.json'
ARCHIVES = [(STEP, 6 * 3600 // STEP), (60, 2 * 1440)]
HOSTS = 50
CPU_KINDS = ('user', 'system', 'idle', 'iowait')
MEM_KINDS = ('free', 'used')
MIX = [
    'aliasByNode(servers.*.cpu.user,1)',
    'sumSeries(servers.*.cpu.user)',
    'groupByNode(servers.*.cpu.*,1,"sumSeries")',
    'movingAverage(servers.host0*.cpu.user,10)',
    'summarize(servers.host1*.cpu.user,"1h","sum")',
    'perSecond(servers.host2*.mem.used)',
    'nonNegativeDerivative(servers.host3*.mem.used)',
    'scale(servers.host4*.cpu.idle,0.5)',
    'asPercent(servers.*.cpu.user,sumSeries(servers.*.cpu.user))',
    'highestMax(servers.*.cpu.system,5)',
    'timeShift(servers.host0*.cpu.user,"1h")',
    'keepLastValue(servers.host1*.cpu.iowait)',
    'transformNull(servers.host2*.cpu.iowait,0)',
    'derivative(servers.host3*.mem.free)',
    'averageSeries(servers.*.mem.free)',
    'maxSeries(servers.*.cpu.system)',
    'alias(sumSeries(servers.*.mem.used),"used")',
    'aliasSub(servers.host4*.cpu.user,"host(\\d+)","h\\1")',
    'sortByMaxima(servers.host1*.cpu.*)',
    'limit(servers.*.cpu.idle,10)',
]


def log(msg: str) -> None:
    print('[render-bench] %s' % msg, file=sys.stderr, flush=True)


def metric_names() -> list[str]:
    names = ['servers.host%02d.cpu.%s' % (h, k) for h in range(HOSTS) for k in CPU_KINDS]
    names += ['servers.host%02d.mem.%s' % (h, k) for h in range(HOSTS) for k in MEM_KINDS]
    return names + ['carbon.agents.bench.cpuUsage']      # 301 series


def build_tree(workdir: Path, few_digits: bool) -> tuple[Path, int]:
    """301 series written every 10 s for a day, kept as carbon's usual schema does
    (10s:6h,1m:2d, average, xFilesFactor 0): a from=-1d request reads the 1-minute archive
    (1,440 points a series, full-precision averages); rebuilt when older than 12 hours."""
    import whisper
    storage = workdir / ('storage-int' if few_digits else 'storage')
    root = storage / 'whisper'
    stamp = storage / 'built-at'
    now = int(time.time())
    names = metric_names()
    if stamp.exists() and now - int(stamp.read_text()) < 12 * 3600:
        return storage, int(stamp.read_text())
    shutil.rmtree(root, ignore_errors=True)
    log('writing %d whisper files (1 day every %d s)' % (len(names), STEP))
    rng = random.Random(15)
    now = now // STEP * STEP
    for name in names:
        path = root.joinpath(*name.split('.')).with_suffix('.wsp')
        path.parent.mkdir(parents=True, exist_ok=True)
        whisper.create(str(path), ARCHIVES, xFilesFactor=0.0)
        points = [(now - i * STEP, float(rng.randrange(100)) if few_digits
                   else rng.random() * 100.0) for i in range(86400 // STEP)]
        whisper.update_many(str(path), points)
    stamp.write_text(str(now))
    return storage, now


def build_memory_tree(workdir: Path) -> tuple[Path, int]:
    """1,000 series x 1 day at 60 s (full-precision values) for the memory check."""
    import whisper
    storage = workdir / 'storage-1000'
    stamp = storage / 'built-at'
    now = int(time.time())
    if stamp.exists() and now - int(stamp.read_text()) < 12 * 3600:
        return storage, int(stamp.read_text())
    shutil.rmtree(storage / 'whisper', ignore_errors=True)
    log('writing 1,000 whisper files (1 day at 60 s)')
    rng = random.Random(1000)
    now = now // 60 * 60
    for i in range(1000):
        path = storage / 'whisper' / 'many' / ('host%04d' % i) / 'value.wsp'
        path.parent.mkdir(parents=True, exist_ok=True)
        whisper.create(str(path), [(60, 2 * 1440)], xFilesFactor=0.0)
        whisper.update_many(str(path), [(now - j * 60, rng.random() * 100.0)
                                        for j in range(1440)])
    stamp.write_text(str(now))
    return storage, now


def build_scale_tree(workdir: Path, series: int) -> tuple[Path, int]:
    """``series`` whisper files (10s:1d,1m:2d, average, xFilesFactor 0) full of
    full-precision values, written directly with numpy in whisper's layout (header,
    archive table, ``!Ld`` records from slot 0 upwards); rebuilt when older than 12 h."""
    import numpy as np
    storage = workdir / ('storage-scale-%d' % series)
    stamp = storage / 'built-at'
    now = int(time.time())
    if stamp.exists() and now - int(stamp.read_text()) < 12 * 3600:
        return storage, int(stamp.read_text())
    shutil.rmtree(storage / 'whisper', ignore_errors=True)
    log('writing %d whisper files (1 day every %d s)' % (series, STEP))
    now = now // 60 * 60
    header_size = 16 + 12 * len(SCALE_ARCHIVES)
    header = struct.pack('!2LfL', 1, max(s * n for s, n in SCALE_ARCHIVES), 0.0,
                         len(SCALE_ARCHIVES))
    offset = header_size
    stamps = []
    for step, points in SCALE_ARCHIVES:
        header += struct.pack('!3L', offset, step, points)
        offset += points * 12
        stamps.append(now - step * np.arange(points - 1, -1, -1, dtype=np.int64))
    record = np.dtype([('t', '>u4'), ('v', '>f8')])
    rng = np.random.default_rng(17)
    for i in range(series):
        path = storage / 'whisper' / 'scale' / ('g%03d' % (i // SCALE_GROUP)) / \
            ('h%05d' % i) / 'value.wsp'
        path.parent.mkdir(parents=True, exist_ok=True)
        parts = [header]
        fine = rng.random(SCALE_ARCHIVES[0][1]) * 100.0
        for (step, points), times in zip(SCALE_ARCHIVES, stamps, strict=True):
            data = np.empty(points, record)
            data['t'] = times
            per = step // STEP
            data['v'] = fine if per == 1 else np.resize(
                fine.reshape(-1, per).mean(axis=1), points)
            parts.append(data.tobytes())
        path.write_bytes(b''.join(parts))
    stamp.write_text(str(now))
    return storage, now


def scale_paths(storage: Path) -> list[Path]:
    return sorted((storage / 'whisper' / 'scale').glob('*/*/value.wsp'))


def page_cache_floor(storage: Path, now: int) -> dict[str, float]:
    """Seconds to read the files a from=-1d request needs, warm page cache: (1) a tight
    loop of open, pread of the header, pread of the 10 s archive's needed range, close
    (best of 3); (2) ``cat`` of the whole files into /dev/null (best of 3)."""
    paths = [str(p) for p in scale_paths(storage)]
    step, points = SCALE_ARCHIVES[0]
    offset = 16 + 12 * len(SCALE_ARCHIVES)
    header = offset
    loop = []
    for _ in range(3):
        started = time.perf_counter()
        for path in paths:
            fd = os.open(path, os.O_RDONLY)
            os.pread(fd, header, 0)
            os.pread(fd, points * 12, offset)
            os.close(fd)
        loop.append(time.perf_counter() - started)
    cat = []
    listing = '\0'.join(paths).encode()
    for _ in range(3):
        started = time.perf_counter()
        subprocess.run(['xargs', '-0', 'cat'], input=listing, stdout=subprocess.DEVNULL,
                       check=True)
        cat.append(time.perf_counter() - started)
    return {'read_loop_s': min(loop), 'cat_s': min(cat),
            'bytes_needed': len(paths) * (points * 12 + header),
            'bytes_files': sum(os.path.getsize(p) for p in paths)}


def scale_rows(now: int) -> list[tuple[str, str, str]]:
    """(key, label, request path) of the cost-as-the-work-grows rows."""
    window = {'from': now - 86400, 'until': now, 'now': now, 'format': 'json'}

    def path(target: str, **extra: Any) -> str:
        return '/render?' + urlencode(dict(window, target=target, **extra))
    return [
        ('sum', '`sumSeries(scale.*.*.value)`', path('sumSeries(scale.*.*.value)')),
        ('group', '`groupByNode(scale.*.*.value,1,"sumSeries")`',
         path('groupByNode(scale.*.*.value,1,"sumSeries")')),
        ('raw', '`scale.*.*.value` (maxDataPoints=720)',
         path('scale.*.*.value', maxDataPoints=720)),
        ('movavg', '`movingAverage(scale.*.*.value,10)` (maxDataPoints=720)',
         path('movingAverage(scale.*.*.value,10)', maxDataPoints=720)),
    ]


def timed_requests(server: Server, path: str, count: int, timeout: float) -> dict:
    """``count`` sequential requests: seconds each (None for one that failed or took
    longer than ``timeout``; the run stops there)."""
    from render_load import RawClient
    client = RawClient(server.port, path, timeout=timeout)
    times: list[Optional[float]] = []
    status = 0
    try:
        for _ in range(count):
            started = time.perf_counter()
            try:
                status, _, _ = client.get()
            except OSError:
                status = 0
            if status != 200:
                times.append(None)
                break
            times.append(time.perf_counter() - started)
    finally:
        client.close()
    return {'times': times, 'status': status}


GW_NAME = 'graphite-web 1.1.10'
OURS_NAME = 'ours (gunicorn)'
VM_NAME = 'VictoriaMetrics'
VM_SCALE_COUNT = 'sum(count_over_time({__name__=~"scale[.].*"}[1d]))'  # the tree's points


def scale_series(storage: Path) -> list[tuple[str, Path]]:
    """(Graphite name, file) of each series of the scale tree."""
    whisper_dir = storage / 'whisper'
    return [('.'.join(path.relative_to(whisper_dir).with_suffix('').parts), path)
            for path in scale_paths(storage)]


def scale_lines(name: str, path: Path) -> bytes:
    """A series' 10 s archive as Graphite plaintext lines: every point, its value written
    with every digit (``repr``), so VictoriaMetrics stores the same floats."""
    import numpy as np
    step, points = SCALE_ARCHIVES[0]
    record = np.dtype([('t', '>u4'), ('v', '>f8')])
    data = np.fromfile(path, record, count=points, offset=16 + 12 * len(SCALE_ARCHIVES))
    prefix = name + ' '
    return ''.join(['%s%r %d\n' % (prefix, value, stamp) for stamp, value in
                    zip(data['t'].tolist(), data['v'].tolist(), strict=True)]).encode()


def vm_scale_store(binary: str, workdir: Path, storage: Path, now: int,
                   timeout: float) -> Path:
    """VictoriaMetrics' data folder holding the scale tree's points (its 10 s archive:
    every point of the day), sent through its Graphite plaintext listener over 2
    connections and counted back with a query (every point queryable, then flushed to
    its files); reused while the tree it was loaded from is (same build time)."""
    series = scale_series(storage)
    base = workdir / ('vm-scale-%d' % len(series))
    stamp = base / 'loaded-from'
    if stamp.exists() and stamp.read_text() == str(now):
        return base
    shutil.rmtree(base, ignore_errors=True)
    base.mkdir(parents=True)
    log('loading %d series x %d points into VictoriaMetrics (once per tree)' % (
        len(series), SCALE_ARCHIVES[0][1]))
    proc, http, graphite = start_vm(binary, base)
    expected = len(series) * SCALE_ARCHIVES[0][1]
    query = VM_SCALE_COUNT
    try:
        socks = [socket.create_connection(('127.0.0.1', graphite)) for _ in range(2)]
        try:
            for i, (name, path) in enumerate(series):
                socks[i % 2].sendall(scale_lines(name, path))
        finally:
            for sock in socks:
                sock.close()
        deadline = time.monotonic() + timeout
        seen = 0.0
        while time.monotonic() < deadline:
            vm_flush(http)
            seen = vm_query(http, query, now + 1)
            if seen >= expected:
                break
            time.sleep(1.0)
        if seen != expected:
            raise SystemExit('VictoriaMetrics holds %d of the %d points sent, see %s'
                             % (seen, expected, base / 'vm.log'))
        vm_flush(http)
    finally:
        stop_gracefully(proc)
    stamp.write_text(str(now))
    return base


class VMServer:
    """VictoriaMetrics over a loaded data folder, answering its Graphite render API on
    ``port``; stopped by its PID."""

    def __init__(self, binary: str, base: Path, timeout: float, now: int,
                 expected: int) -> None:
        self.name = VM_NAME
        self.proc, self.port, _ = start_vm(
            binary, base, '-search.maxQueryDuration=%ds' % int(timeout),
            '-search.maxUniqueTimeseries=1000000')
        held = vm_query(self.port, VM_SCALE_COUNT, now + 1)
        if held != expected:
            self.stop()
            raise SystemExit('VictoriaMetrics holds %d of the tree\'s %d points (remove %s '
                             'to load it again)' % (held, expected, base))

    def stop(self) -> None:
        stop_gracefully(self.proc)


def same_series(a: bytes, b: bytes) -> tuple[Optional[str], str]:
    """(why not, note) for two answers to one request from different stores: why not is
    None when both have the same series (targets) and no series of either lacks more
    than one point (a store that shifts its window by a step leaves one null at an end);
    values are not compared (VictoriaMetrics rounds them). The note gives the points and
    non-null points of each answer."""
    def shape(body: bytes) -> dict[str, tuple[int, int]]:
        return {s['target']: (len(s['datapoints']),
                              sum(1 for v, _ in s['datapoints'] if v is not None))
                for s in json.loads(body)}
    left, right = shape(a), shape(b)
    note = 'points, non-null: %r vs %r' % (
        [sum(c) for c in zip(*left.values(), strict=True)],
        [sum(c) for c in zip(*right.values(), strict=True)])
    if sorted(left) != sorted(right):
        return '%d series vs %d, or other names' % (len(left), len(right)), note
    for side in (left, right):
        holes = [(target, n) for target, n in side.items() if n[0] - n[1] > 1]
        if holes:
            return '%d series have holes, e.g. %s (points, non-null) %r' % (
                len(holes), *holes[0]), note
    return None, note


def worker_pids(server: Any) -> list[int]:
    """The processes that answer: gunicorn's workers, else the server process."""
    return children(server.proc.pid) or [server.proc.pid]


def scale_check(args: argparse.Namespace, workdir: Path, run_dir: Path) -> int:
    """The cost-as-the-work-grows rows at ``args.series`` series (see the module doc)."""
    storage, now = build_scale_tree(workdir, args.series)
    rows = scale_rows(now)
    peers = set() if args.ours_only else set(filter(None, args.peers.split(',')))
    binary = victoria_metrics_binary() if 'vm' in peers else None
    if 'vm' in peers and binary is None:
        log('VictoriaMetrics skipped: Go is not installed (the bench builds it with '
            '`go install`)')
    vm_base = vm_scale_store(binary, workdir, storage, now, args.timeout * 10) \
        if binary else None
    # graphite-web gives up a fetch after FETCH_TIMEOUT (6 s by default) and answers 500;
    # here it gets as long as a request may take
    if 'graphite-web' in peers:
        gw, gw_env = setup_graphite(workdir, storage, 'bench_gw_settings_scale',
                                    'FETCH_TIMEOUT = %d\n' % args.timeout)
    conf = workdir / 'ours_settings_scale.py'
    conf.write_text('STORAGE_DIR = %r\nCARBONLINK_HOSTS = []\nLOG_LEVEL = "WARNING"\n'
                    'TAGDB = ""\nRENDER_MAX_DATAPOINTS = 10 ** 9\n'
                    'MAX_REQUEST_SECONDS = %d\n' % (str(storage), args.timeout))
    lib = setup_ours_gunicorn(workdir)
    gunicorn = ['--workers', str(args.workers), '--threads', str(args.threads),
                '--worker-class', 'gthread', '--log-level', 'warning', '--timeout',
                str(int(args.timeout) + 60)]
    floor = page_cache_floor(storage, now)
    log('page-cache floor: %r' % floor)
    load_before = loadavg(3)
    servers: list[Any] = []
    try:
        if 'graphite-web' in peers:
            servers.append(Server(GW_NAME, [str(gw / 'bin/gunicorn')] + gunicorn +
                                  ['graphite.wsgi:application'], gw_env, str(workdir),
                                  run_dir))
        servers.append(Server(OURS_NAME, [sys.executable, '-m', 'gunicorn'] + gunicorn +
                              ['webapp.wsgi:application'],
                              dict(os.environ, PYTHONPATH='%s:%s' % (ROOT, lib),
                                   GRAPHITE_SETTINGS=str(conf)), str(ROOT), run_dir))
        if vm_base is not None:
            servers.append(VMServer(str(binary), vm_base, args.timeout, now,
                                    args.series * SCALE_ARCHIVES[0][1]))
        results, problems = scale_runs(args, rows, servers)
        later = page_cache_floor(storage, now)
        log('page-cache floor after the rows: %r' % later)
        floor = dict(floor, read_loop_s=min(floor['read_loop_s'], later['read_loop_s']),
                     cat_s=min(floor['cat_s'], later['cat_s']),
                     read_loop_runs=(floor['read_loop_s'], later['read_loop_s']))
        peaks = {s.name: max(rss_kb(pid, 'VmHWM') for pid in worker_pids(s)) / 1024
                 for s in servers}
        cpu = {s.name: sum(cpu_seconds(pid) for pid in worker_pids(s)) for s in servers}
    finally:
        for server in servers:
            server.stop()
    load_after = loadavg(3)
    return scale_report(args, rows, servers, results, floor, peaks, cpu, problems,
                        (load_before, load_after), run_dir)


def scale_runs(args: argparse.Namespace, rows: list, servers: list
               ) -> tuple[dict[tuple[str, str], list], list[str]]:
    """Each row: the answers compared (graphite-web's and ours: the same floats, names
    and tags; VictoriaMetrics' and ours: the same series and non-null point counts),
    then the servers' runs in mirrored order (A B B A, A B C C B A)."""
    results: dict[tuple[str, str], list] = {}
    problems = []
    for key, label, path in rows:
        answers = {s.name: fetch(s.port, path) for s in servers}
        if not all(status == 200 for status, _ in answers.values()):
            problems.append('%s: statuses %s' % (label, {n: a[0] for n, a in answers.items()}))
        else:
            if GW_NAME in answers:
                why = same_json(answers[GW_NAME][1], answers[OURS_NAME][1])
                if why:
                    problems.append('%s: %s' % (label, why))
            if VM_NAME in answers:
                why, note = same_series(answers[OURS_NAME][1], answers[VM_NAME][1])
                log('%s, ours vs VictoriaMetrics: %s' % (label, note))
                if why:
                    problems.append('%s, ours vs VictoriaMetrics: %s' % (label, why))
        del answers
        for server in mirrored(servers) if len(servers) > 1 else servers * 2:
            run = timed_requests(server, path, args.requests, args.timeout)
            results.setdefault((key, server.name), []).append(run)
            log('%s, %s: %s' % (label, server.name, run))
    return results, problems


def scale_report(args: argparse.Namespace, rows: list, servers: list, results: dict,
                 floor: dict, peaks: dict, cpu: dict, problems: list, loads: tuple,
                 run_dir: Path) -> int:
    """Print the table (each server's seconds a request, ours against the floor, each
    peer's time over ours), append the growth rows; 1 when answers differed."""
    load = 'load avg %s -> %s' % loads
    names = [s.name for s in servers]
    peers = [n for n in names if n != OURS_NAME]
    lines = ['', '%d series x 1 day at 10 s (%d files, %.0f MB); page-cache floor: read '
             'loop %.3f s (best of 3 before the rows %.3f s, after %.3f s; %.0f MB needed), '
             'cat %.3f s; %s; run folder %s' % (
                 args.series, args.series, floor['bytes_files'] / 1e6, floor['read_loop_s'],
                 *floor['read_loop_runs'], floor['bytes_needed'] / 1e6, floor['cat_s'], load,
                 run_dir), '',
             '| request (from=-1d) | ' + ' | '.join('%s s/request' % n for n in names) +
             ' | ours / floor | ' + ' | '.join('%s / ours' % n for n in peers) + ' |',
             '| --- |' + ' ---: |' * (len(names) + 1 + len(peers))]
    growth = []
    command = 'python bench/render_bench.py --series %d --requests %d' % (args.series,
                                                                          args.requests)
    for key, label, _path in rows:
        mean, texts = {}, {}
        for name in names:
            runs = results.get((key, name), [])
            times = [t for run in runs for t in run['times']]
            mean[name] = None if not times or None in times else sum(times) / len(times)
            failed = [run['status'] for run in runs if None in run['times']]
            texts[name] = ('failed (HTTP %s, or > %g s)' % (failed[0] if failed else '-',
                                                             args.timeout)
                           if mean[name] is None else '%.3f' % mean[name])
        ours = mean[OURS_NAME]
        if ours is not None:
            texts[OURS_NAME] += ' (%s)' % ' / '.join(
                '%.3f' % t for run in results.get((key, OURS_NAME), []) for t in run['times'])
        ratios = ['%.1fx' % (mean[n] / ours) if mean[n] and ours else '-' for n in peers]
        vs_floor = '%.1fx' % (ours / floor['read_loop_s']) if ours else '-'
        lines.append('| %s | %s | %s | %s |' % (label, ' | '.join(texts[n] for n in names),
                                                vs_floor, ' | '.join(ratios)))
        for name in (GW_NAME, OURS_NAME) if GW_NAME in names else ():
            seconds = mean[name]
            growth.append({
                'daemon': 'render', 'impl': 'ours' if name == OURS_NAME else name,
                'names': args.series,
                'load': '%s json, 1 client, %s%s' % (
                    label.replace('`', ''), load, '' if seconds else ', FAILED (no answer)'),
                'throughput': round(1 / seconds, 4) if seconds else 0.0,
                'unit': 'requests/s', 'cpu_s': round(cpu[name], 2),
                'peak_rss_mb': round(peaks[name], 1),
                'measured': time.strftime('%Y-%m-%d', time.gmtime()),
                'command': command})
    lines.append('')
    lines.append('Peak RSS (largest answering process, over all rows): ' + ', '.join(
        '%s %.0f MB' % item for item in peaks.items()) + '; CPU s of the answering '
        'processes: ' + ', '.join('%s %.1f' % item for item in cpu.items()))
    checked = (['graphite-web and ours: json answers parse to the same floats, names and '
                'tags'] if GW_NAME in names else []) + (
        ['VictoriaMetrics and ours: the same series, none with more than one null point '
         '(values not compared)'] if VM_NAME in names else [])
    lines.append('Answers: ' + ('MISMATCHES: ' + '; '.join(problems) if problems else
                                '; '.join(checked) or 'not compared (--ours-only)'))
    text = '\n'.join(lines)
    print(text)
    (run_dir / 'scale.md').write_text(text + '\n')
    if args.record and growth:
        existing = json.loads(GROWTH_FILE.read_text()) if GROWTH_FILE.exists() else []
        GROWTH_FILE.parent.mkdir(parents=True, exist_ok=True)
        GROWTH_FILE.write_text(json.dumps(existing + growth, indent=1) + '\n')
        log('appended %d rows to %s' % (len(growth), GROWTH_FILE))
    return 1 if problems else 0


def children(pid: int) -> list[int]:
    """Child PIDs of ``pid`` (gunicorn's workers); [] when none or gone."""
    try:
        with open('/proc/%d/task/%d/children' % (pid, pid)) as fh:
            return [int(p) for p in fh.read().split()]
    except OSError:
        return []


def peak_rss_mb(server: Server) -> float:
    """Peak resident memory (VmHWM) of the process answering requests: the gunicorn
    worker when there is one, else the server process."""
    workers = children(server.proc.pid)
    return rss_kb(workers[0] if workers else server.proc.pid, 'VmHWM') / 1024


def memory_targets() -> list[str]:
    """The mix's 20 targets over the 1,000 series (``many.*.value``)."""
    return [re.sub(r'servers\.[\w*]+\.[\w*]+\.[\w*]+', 'many.*.value', t) for t in MIX]


def memory_check(workdir: Path, run_dir: Path, carbonlink: str) -> list:
    """Peak RSS of one process of each server after a json and a png request for the
    1,000 series, then of ours (graphite-render, and gunicorn as graphite-web runs) for
    each of the mix's functions over them (json); a fresh process per request."""
    storage, now = build_memory_tree(workdir)
    gw, gw_env = setup_graphite(workdir, storage, 'bench_gw_settings_1000',
                                carbonlink=(carbonlink,))
    conf = workdir / 'ours_settings_1000.py'
    conf.write_text('STORAGE_DIR = %r\nCARBONLINK_HOSTS = [%r]\nLOG_LEVEL = "WARNING"\n'
                    'TAGDB = ""\n' % (str(storage), carbonlink))
    one = ['--workers', '1', '--threads', '1', '--worker-class', 'gthread', '--log-level',
           'warning', '--timeout', '300']
    reference = ('graphite-web 1.1.10', [str(gw / 'bin/gunicorn')] + one +
                 ['graphite.wsgi:application'], gw_env, str(workdir))
    ours = ('ours (graphite-render)', [sys.executable, '-m', 'webapp.server', '--config',
                                       str(conf), '--threads', '4', '--port'],
            dict(os.environ, PYTHONPATH=str(ROOT)), str(ROOT))
    ours_gunicorn = ('ours (gunicorn)', [sys.executable, '-m', 'gunicorn'] + one +
                     ['webapp.wsgi:application'],
                     dict(os.environ, PYTHONPATH='%s:%s' % (ROOT, setup_ours_gunicorn(workdir)),
                          GRAPHITE_SETTINGS=str(conf)), str(ROOT))
    plan = [('many.*.value', fmt, (reference, ours, ours_gunicorn)) for fmt in ('json', 'png')]
    plan += [(target, 'json', (ours, ours_gunicorn)) for target in memory_targets()]
    rows = []
    for target, fmt, servers in plan:
        query = '/render?' + urlencode({'target': target, 'from': now - 86400,
                                        'until': now, 'now': now, 'format': fmt})
        for name, cmd, env, cwd in servers:
            server = Server(name, cmd, env, cwd, run_dir)
            try:
                status, body = fetch(server.port, query)
                rows.append(('`%s` %s' % (target, fmt), name, status, len(body),
                             peak_rss_mb(server)))
            finally:
                server.stop()
            log('memory: %s' % (rows[-1],))
    return rows


def setup_graphite(workdir: Path, storage: Path, module: str = 'bench_gw_settings',
                   extra: str = '', carbonlink: tuple[str, ...] = ()) -> tuple[Path, dict]:
    venv = graphite_web_venv(extra=('gunicorn',))
    (workdir / (module + '.py')).write_text(
        'SECRET_KEY = "bench"\nSTORAGE_DIR = %r\nWHISPER_DIR = %r\nLOG_DIR = %r\n'
        'CARBONLINK_HOSTS = %r\nTIME_ZONE = "UTC"\nTAGDB = ""\n%s'
        % (str(storage), str(storage / 'whisper') + '/', str(workdir / 'gw-log'),
           list(carbonlink), extra))
    (workdir / 'gw-log').mkdir(exist_ok=True)
    env = dict(os.environ, DJANGO_SETTINGS_MODULE='graphite.settings', PYTHONPATH=str(workdir),
               GRAPHITE_SETTINGS_MODULE=module)
    migrate = [str(venv / 'bin/django-admin'), 'migrate', '-v', '0', '--run-syncdb']
    try:
        subprocess.run(migrate, env=env, cwd=str(workdir), check=True)
    except subprocess.CalledProcessError:
        # seen once on a fresh venv ("table tags_series already exists"): start the
        # database over and migrate again
        (storage / 'graphite.db').unlink(missing_ok=True)
        subprocess.run(migrate, env=env, cwd=str(workdir), check=True)
    return venv, env


def setup_ours_gunicorn(workdir: Path) -> Path:
    target = workdir / 'gunicorn-lib'
    if not (target / '.installed').exists():
        shutil.rmtree(target, ignore_errors=True)
        subprocess.run([sys.executable, '-m', 'pip', 'install', '-q', '--target', str(target),
                        'gunicorn'], check=True)
        (target / '.installed').write_text('ok')
    return target


def start_carbonlink(storage: Path, run_dir: Path) -> tuple[subprocess.Popen, str]:
    """This project's carbon-cache, idle, over the bench's whisper tree, so both apps pay
    a real CarbonLink query for the metrics they read (with no cache to ask,
    graphite-web logs a failed-CarbonLink traceback for every metric, which would be in
    its times). Returns the process and its CARBONLINK_HOSTS entry."""
    base = run_dir / 'carbon-cache'
    (base / 'conf').mkdir(parents=True)
    (base / 'conf' / 'storage-schemas.conf').write_text(
        '[default]\npattern = .*\nretentions = 10s:6h,1m:2d\n')
    ports = {key: free_port() for key in ('line', 'pickle', 'query')}
    (base / 'conf' / 'carbon.conf').write_text('\n'.join([
        '[cache]', 'STORAGE_DIR = %s' % (base / 'storage'),
        'LOCAL_DATA_DIR = %s' % (storage / 'whisper'),
        'LINE_RECEIVER_INTERFACE = 127.0.0.1', 'LINE_RECEIVER_PORT = %d' % ports['line'],
        'PICKLE_RECEIVER_INTERFACE = 127.0.0.1', 'PICKLE_RECEIVER_PORT = %d' % ports['pickle'],
        'CACHE_QUERY_INTERFACE = 127.0.0.1', 'CACHE_QUERY_PORT = %d' % ports['query'],
        'CARBON_METRIC_INTERVAL = 0', 'ENABLE_TAGS = False', 'LOG_CACHE_HITS = False',
        'USER = ', '']))
    log_file = open(base / 'daemon.log', 'w')
    proc = subprocess.Popen([sys.executable, '-m', 'carbon.daemon', 'carbon-cache', '--config',
                             str(base / 'conf' / 'carbon.conf'), '--nodaemon', 'start'],
                            stdout=log_file, stderr=subprocess.STDOUT, cwd=str(base),
                            env=dict(os.environ, GRAPHITE_ROOT=str(base), PYTHONPATH=str(ROOT)))
    log_file.close()
    try:
        wait_port(ports['query'], proc, 60)
    except RuntimeError:
        stop(proc)
        raise SystemExit('carbon-cache did not start, see %s' % (base / 'daemon.log'))
    return proc, '127.0.0.1:%d:a' % ports['query']


class Server:
    """A server process on a free port; stopped by its PID."""

    def __init__(self, name: str, cmd: list[str], env: dict, cwd: str, logdir: Path) -> None:
        self.name, self.port = name, free_port()
        if cmd[-1] == '--port':
            cmd = cmd + [str(self.port)]
        else:
            cmd = cmd + ['--bind', '127.0.0.1:%d' % self.port]
        self.log = open(logdir / ('%s.log' % name.split()[0]), 'w')
        self.proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=self.log,
                                     stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(('127.0.0.1', self.port), timeout=0.5):
                    return
            except OSError:
                if self.proc.poll() is not None:
                    raise SystemExit('%s exited early, see %s' % (name, self.log.name))
                time.sleep(0.2)
        self.stop()
        raise SystemExit('%s did not start' % name)

    def rss_mb(self) -> float:
        """Resident memory of the process and its children (gunicorn workers), MB."""
        total = 0
        for pid in [self.proc.pid] + children(self.proc.pid):
            try:
                total += rss_kb(pid)
            except OSError:
                pass
        return total / 1024.0

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
        self.log.close()


def scenarios(now: int, only: set[str]) -> list[tuple[str, str, list[str]]]:
    """(key, label, request paths) of each scenario."""
    window = {'from': now - 86400, 'until': now, 'now': now}

    def path(target: str, fmt: str = 'json', **extra: Any) -> str:
        return '/render?' + urlencode(dict(window, target=target, format=fmt, **extra))
    rows = [
        ('json', '`*.*.*.*` json', [path('*.*.*.*')]),
        ('sum', '`sumSeries(*.*.*.*)` json', [path('sumSeries(*.*.*.*)')]),
        ('movavg', '`movingAverage(servers.*.cpu.*,10)` json',
         [path('movingAverage(servers.*.cpu.*,10)')]),
        ('png', '`servers.*.cpu.*` png', [path('servers.*.cpu.*', 'png')]),
        ('png36', '`servers.host0[0-8].cpu.*` png, 36 x 1,000 points',
         ['/render?' + urlencode({'from': now - 1000 * 60, 'until': now, 'now': now,
                                  'target': 'servers.host0[0-8].cpu.*', 'format': 'png'})]),
        ('mix', 'mix of 20 functions json', [path(t) for t in MIX]),
    ]
    return [row for row in rows if not only or row[0] in only]


def same_json(a: bytes, b: bytes) -> Optional[str]:
    """None when both parse to the same series (names, tags, floats); else why not."""
    left, right = json.loads(a), json.loads(b)
    if [s['target'] for s in left] != [s['target'] for s in right]:
        return 'targets differ'
    for one, two in zip(left, right, strict=False):
        if one.get('tags') != two.get('tags'):
            return 'tags of %s differ: %r vs %r' % (one['target'], one.get('tags'),
                                                    two.get('tags'))
        if one['datapoints'] != two['datapoints']:
            pairs = zip(one['datapoints'], two['datapoints'], strict=False)
            bad = next((i for i, (p, q) in enumerate(pairs) if p != q), -1)
            return 'values of %s differ (first at point %d: %r vs %r)' % (
                one['target'], bad, one['datapoints'][bad:bad + 1],
                two['datapoints'][bad:bad + 1])
    return None


def compare(servers: list[Server], rows: list) -> list[str]:
    """Problems found comparing each server's answer with graphite-web's (the first)."""
    problems = []
    for key, label, paths in rows:
        for p in paths:
            answers = [fetch(s.port, p) for s in servers]
            for server, (status, body) in zip(servers, answers, strict=False):
                if status != 200:
                    problems.append('%s answered %d to %s: %r' % (server.name, status, p,
                                                                   body[:200]))
            if any(status != 200 for status, _ in answers):
                continue
            for server, (_, body) in zip(servers[1:], answers[1:], strict=False):
                if key.startswith('png'):
                    if body[:8] != b'\x89PNG\r\n\x1a\n':
                        problems.append('%s: not a PNG for %s' % (server.name, label))
                    continue
                why = same_json(answers[0][1], body)
                if why:
                    problems.append('%s, %s: %s' % (server.name, p, why))
    return problems


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--duration', type=float, default=4.0, help='seconds per run')
    parser.add_argument('--clients', default='1,16', help='concurrent clients, comma list')
    parser.add_argument('--threads', type=int, default=4, help='gunicorn threads per worker')
    parser.add_argument('--workers', type=int, default=2, help='gunicorn workers (each)')
    parser.add_argument('--only', default='', help='scenarios: json,sum,movavg,png,png36,mix '
                        '(png36: issue 30 goal 3, run it with --workers 2 --threads 1)')
    parser.add_argument('--workdir', default=os.path.expanduser('~/.cache/render-bench'))
    parser.add_argument('--few-digits', action='store_true',
                        help='small integer values instead of full-precision floats')
    parser.add_argument('--with-twisted', action='store_true',
                        help="also measure this app's own server (graphite-render, --workers "
                        'and --threads as gunicorn)')
    parser.add_argument('--baseline-tree', default='',
                        help='also measure this app from another checkout (the code before '
                        'a change), in the same run')
    parser.add_argument('--memory', action='store_true',
                        help='only the memory check: peak RSS of one process answering '
                        '1,000 series x 1 day (json, png)')
    parser.add_argument('--series', type=int, default=0,
                        help='only the cost-as-the-work-grows rows over this many series')
    parser.add_argument('--requests', type=int, default=2,
                        help='--series: sequential requests a run')
    parser.add_argument('--timeout', type=float, default=180.0,
                        help='--series: seconds one request may take')
    parser.add_argument('--peers', default='graphite-web,vm',
                        help='--series: the peers beside ours (graphite-web, vm: '
                        'VictoriaMetrics, built with go install; skipped without Go)')
    parser.add_argument('--ours-only', action='store_true',
                        help='--series: only this app against the page-cache floor (no '
                        'graphite-web, answers not compared, nothing recorded)')
    parser.add_argument('--record', action='store_true',
                        help='--series: append the rows to docs/data/growth/render.json')
    args = parser.parse_args(argv)
    workdir = Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    if args.series:
        run_dir = workdir / ('run-%d' % time.time())
        run_dir.mkdir()
        return scale_check(args, workdir, run_dir)
    storage, now = build_tree(workdir, args.few_digits)
    run_dir = workdir / ('run-%d' % time.time())
    run_dir.mkdir()
    cache, carbonlink = start_carbonlink(storage, run_dir)
    try:
        return run_rows(args, workdir, storage, now, run_dir, carbonlink)
    finally:
        cache.terminate()
        try:
            cache.wait(15)
        except subprocess.TimeoutExpired:
            stop(cache)


def run_rows(args: argparse.Namespace, workdir: Path, storage: Path, now: int, run_dir: Path,
             carbonlink: str) -> int:
    """The default rows (or ``--memory``), both apps asking the carbon-cache at
    ``carbonlink``."""
    ours_conf = workdir / 'ours_settings.py'
    ours_conf.write_text('STORAGE_DIR = %r\nCARBONLINK_HOSTS = [%r]\nLOG_LEVEL = "WARNING"\n'
                         'TAGDB = ""\n' % (str(storage), carbonlink))
    lib = setup_ours_gunicorn(workdir)
    if args.memory:
        rows = memory_check(workdir, run_dir, carbonlink)
        lines = ['| request | server | status | body bytes | peak RSS MB |',
                 '| --- | --- | --- | ---: | ---: |']
        lines += ['| %s | %s | %d | %d | %.0f |' % row for row in rows]
        print('\n'.join(lines))
        (run_dir / 'memory.md').write_text('\n'.join(lines) + '\n')
        return 0
    gw, gw_env = setup_graphite(workdir, storage, carbonlink=(carbonlink,))
    gw_errors = workdir / 'gw-log' / 'exception.log'
    errors_before = gw_errors.stat().st_size if gw_errors.exists() else 0
    load_before = loadavg(3)
    gunicorn = ['--workers', str(args.workers), '--threads', str(args.threads),
                '--worker-class', 'gthread', '--log-level', 'warning', '--timeout', '120']
    servers = [Server('graphite-web 1.1.10', [str(gw / 'bin/gunicorn')] + gunicorn +
                      ['graphite.wsgi:application'], gw_env, str(workdir), run_dir)]
    try:
        ours_env = dict(os.environ, PYTHONPATH='%s:%s' % (ROOT, lib),
                        GRAPHITE_SETTINGS=str(ours_conf))
        servers.append(Server('ours (gunicorn)', [sys.executable, '-m', 'gunicorn'] +
                              gunicorn + ['webapp.wsgi:application'], ours_env, str(ROOT),
                              run_dir))
        if args.with_twisted:
            servers.append(Server('ours (graphite-render)', [
                sys.executable, '-m', 'webapp.server', '--config', str(ours_conf),
                '--workers', str(args.workers), '--threads', str(args.threads), '--port'],
                dict(os.environ, PYTHONPATH=str(ROOT)), str(ROOT), run_dir))
        if args.baseline_tree:
            servers += baseline_servers(args, Path(args.baseline_tree), ours_conf, lib,
                                        run_dir)
        rows = scenarios(now, set(filter(None, args.only.split(','))))
        problems = compare(servers, rows)
        for problem in problems:
            log('ANSWER MISMATCH: ' + problem)
        results = measure(servers, rows, [int(c) for c in args.clients.split(',')],
                          args.duration)
        rss = {s.name: s.rss_mb() for s in servers}
    finally:
        for server in servers:
            server.stop()
    notes = ['load average %s before, %s after' % (
        load_before, loadavg(3)),
        "CarbonLink: both apps ask an idle carbon-cache at %s; graphite-web's "
        'exception.log grew by %d bytes during the run' % (
            carbonlink, (gw_errors.stat().st_size if gw_errors.exists() else 0)
            - errors_before)]
    report(args, servers, rows, results, problems, rss, run_dir, notes)
    return 1 if problems else 0


def baseline_servers(args: argparse.Namespace, tree: Path, conf: Path, lib: Path,
                     run_dir: Path) -> list[Server]:
    """This app from another checkout (e.g. ``git archive`` of the commit before a change,
    with the built C modules copied in), under gunicorn and graphite-render as ours runs,
    so a before/after pair is measured in the same run."""
    env = dict(os.environ, PYTHONPATH='%s:%s' % (tree, lib), GRAPHITE_SETTINGS=str(conf))
    gunicorn = ['--workers', str(args.workers), '--threads', str(args.threads),
                '--worker-class', 'gthread', '--log-level', 'warning', '--timeout', '120']
    servers = [Server('before (gunicorn)', [sys.executable, '-m', 'gunicorn'] + gunicorn +
                      ['webapp.wsgi:application'], env, str(tree), run_dir)]
    if args.with_twisted:
        servers.append(Server('before (graphite-render)', [
            sys.executable, '-m', 'webapp.server', '--config', str(conf),
            '--workers', str(args.workers), '--threads', str(args.threads), '--port'],
            dict(os.environ, PYTHONPATH=str(tree)), str(tree), run_dir))
    return servers


def measure(servers: list[Server], rows: list, clients: list[int],
            duration: float) -> dict[tuple[str, int, str], list[dict]]:
    """Each row x client count: runs in the order A B B A (B = each of ours in turn)."""
    results: dict[tuple[str, int, str], list[dict]] = {}
    reference, ours = servers[0], servers[1:]
    for key, label, paths in rows:
        for count in clients:
            for server in mirrored([reference] + ours):      # A B B A
                for p in paths[:2]:          # warm-up
                    fetch(server.port, p)
                result = load(server.port, paths, duration, count)
                results.setdefault((key, count, server.name), []).append(result)
                log('%s, %d clients, %s: %.1f req/s p50 %.0f ms (%d errors)' % (
                    label, count, server.name, result['rps'], result['p50_ms'],
                    result['errors']))
    return results


def report(args: argparse.Namespace, servers: list[Server], rows: list,
           results: dict, problems: list[str], rss: dict, run_dir: Path,
           notes: list[str]) -> None:
    lines = ['', 'Both under gunicorn --workers %d --threads %d (gthread); %s values; '
             '%.0f s per run, A B B A, req/s = mean of the two runs. Run folder: %s'
             % (args.workers, args.threads, 'few-digit' if args.few_digits
                else 'full-precision random', args.duration, run_dir), '']
    names = [s.name for s in servers]
    head = '| request (from=-1d) | clients | ' + ' | '.join('%s req/s' % n for n in names)
    head += ' | ' + ' | '.join('ratio %s' % n for n in names[1:]) + ' |'
    lines += [head, '|' + ' --- |' * (2 + len(names) + len(names) - 1)]
    for key, label, _paths in rows:
        for count in sorted({c for (k, c, _n) in results if k == key}):
            rps = {}
            for name in names:
                runs = results.get((key, count, name), [])
                rps[name] = sum(r['rps'] for r in runs) / max(1, len(runs))
            base = rps[names[0]]
            cells = ['%.2f' % rps[n] for n in names]
            ratios = ['%.1fx' % (rps[n] / base) if base else '-' for n in names[1:]]
            lines.append('| %s | %d | %s | %s |' % (label, count, ' | '.join(cells),
                                                     ' | '.join(ratios)))
    lines.append('')
    lines.append('Resident memory after the runs (all processes of each server): ' +
                 ', '.join('%s %.0f MB' % item for item in rss.items()))
    lines.append('Answers: ' + ('all json answers parse to the same floats, names and tags; '
                                'png answers are PNGs' if not problems
                                else '%d MISMATCHES (see above)' % len(problems)))
    lines += notes
    text = '\n'.join(lines)
    print(text)
    (run_dir / 'report.md').write_text(text + '\n')


if __name__ == '__main__':
    sys.exit(main())
