"""Rebalance transfer vs carbonate 1.1.10's carbon-sync (rsync + whisper-fill) on the same data.

    .venv/bin/python bench/cluster_rebalance_bench.py --metrics 1000 --days 365
    .venv/bin/python bench/cluster_rebalance_bench.py --metrics 10000 100000 --days 7

Per size: an old owner holding N whisper files (1 min points, ``--days`` of retention, the
last 2 days written; files fully allocated, as carbon-cache makes them) and a new owner
already holding the last hour of half of them (points double-written by the relays).
Ours: two transfer agents on 127.0.0.21/.22 and the rebalance coordinator's transfer step
(sparse stream, whisper-fill merge, verify, journal). carbonate: ``carbonate.sync.run_batch``
exactly as carbon-sync calls it (rsync ``-azpS --copy-dest``, batches of 1,000, then
``heal_metric`` = whisper-fill per file) pulling from ``127.0.0.21:SRC`` through a remote
shell that runs rsync's server side locally (``--rsh``: rsync's remote protocol, delta
transfer and -z compression as over ssh, without ssh's encryption); ``--stats`` gives the
bytes it moved. A reader process polls the new owner's files during each move and counts
wrong reads (a value that is neither the new owner's nor the old owner's point for that
minute, or an unreadable file). Order A B B A; wall times on a shared, loaded machine.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy  # noqa: E402
import whisper  # noqa: E402

from carbon.cluster.merge import archives, records, verify  # noqa: E402
from carbon.cluster.rebalance import Move, Rates, Rebalancer, Report  # noqa: E402
from carbon.cluster.spec import parse_cluster  # noqa: E402
from tests.cluster.carbonate_tools import carbonate_path  # noqa: E402
from tests.support import free_port, wait_for  # noqa: E402

STEP = 60
WRITTEN = 2880  # minutes of history on the old owner (values 1..2880, k minutes ago)
DOUBLE_WRITTEN = 60  # minutes the new owner holds of every other metric (value -1)


def metric_names(count: int) -> list[str]:
    return ["bench.group%03d.metric%05d" % (n // 100, n) for n in range(count)]


def rel(name: str) -> str:
    return name.replace(".", "/") + ".wsp"


def prepare_source(folder: Path, count: int, days: int, now: int) -> None:
    """The old owner's files (kept for every run of this size: no tool changes them):
    one template's layout, every metric its own random walk of full-precision values
    (as compressible as real gauges, not identical files a compressor would dedupe)."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    template = folder / "template.wsp"
    whisper.create(str(template), [(STEP, days * 1440)])
    whisper.update_many(str(template), [(now - STEP * k, float(k))
                                        for k in range(1, WRITTEN + 1)])
    image = bytearray(template.read_bytes())
    values = records(image, archives(image)[0])["v"]
    written = numpy.flatnonzero(records(image, archives(image)[0])["t"])
    for n, name in enumerate(metric_names(count)):
        walk = numpy.random.default_rng(n).normal(0.0, 1.0, len(written)).cumsum() + 100.0
        values[written] = walk
        path = folder / "src" / "whisper" / rel(name)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(image)
    (folder / "now").write_text(str(now))


def prepare_target(folder: Path, count: int, days: int, now: int) -> None:
    """The new owner: the last hour of every other metric (double-written meanwhile)."""
    shutil.rmtree(folder / "dst", ignore_errors=True)
    shutil.rmtree(folder / "state", ignore_errors=True)
    partial = folder / "partial.wsp"
    if partial.exists():
        partial.unlink()
    whisper.create(str(partial), [(STEP, days * 1440)])
    whisper.update_many(str(partial), [(now - STEP * k, -1.0) for k in range(DOUBLE_WRITTEN)])
    for n, name in enumerate(metric_names(count)):
        if n % 2 == 0:
            path = folder / "dst" / "whisper" / rel(name)
            path.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(partial, path)
            # Not the source's mtime: rsync's quick check (same size and mtime) would
            # otherwise take the new owner's partial copy as the transferred file.
            os.utime(path, (now - 3600, now - 3600))
    (folder / "dst" / "whisper").mkdir(parents=True, exist_ok=True)


def check(folder: Path, names: list[str], written: int, now: int) -> tuple[int, int]:
    """(source points missing on the new owner at ``now``, new owner's points replaced:
    the minutes it held at ``written`` that now hold another value)."""
    lost = replaced = 0
    for n, name in enumerate(names):
        source = (folder / "src" / "whisper" / rel(name)).read_bytes()
        target = folder / "dst" / "whisper" / rel(name)
        if not target.exists():
            lost += WRITTEN
            continue
        result = verify(str(target), source, now)
        lost += result.source_points - result.present_points
        if n % 2 == 0:
            got = whisper.fetch(str(target), written - STEP * DOUBLE_WRITTEN, written, now)[1]
            replaced += sum(value != -1.0 for value in got)
    return lost, replaced


def reader(folder: str, count: int, now: int, rate: float) -> None:
    """Poll random metrics' files on the new owner until SIGTERM; print the counts."""
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    names = metric_names(count)
    reads = wrong = 0
    while not stop:
        n = random.randrange(count)
        path = os.path.join(folder, "dst", "whisper", rel(names[n]))
        if os.path.exists(path):
            reads += 1
            source = os.path.join(folder, "src", "whisper", rel(names[n]))
            try:
                span = (now - STEP * (WRITTEN + 5), now + STEP, now)
                (first, _, step), values = whisper.fetch(path, *span)
                old = whisper.fetch(source, *span)[1]
                for i, value in enumerate(values):
                    if value is None:
                        continue
                    k = (now - (first + i * step)) // STEP
                    held = n % 2 == 0 and k < DOUBLE_WRITTEN
                    if value != (-1.0 if held else old[i]):
                        wrong += 1
                        break
            except Exception:  # noqa: BLE001 - an unreadable file is a wrong read
                wrong += 1
        time.sleep(1.0 / rate)
    print(json.dumps({"reads": reads, "wrong_reads": wrong}), flush=True)


def start_reader(folder: Path, count: int, now: int) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, __file__, "--reader", str(folder), str(count),
                             str(now)], stdout=subprocess.PIPE, text=True,
                            env=dict(os.environ, PYTHONPATH=str(ROOT)))


def stop_reader(proc: subprocess.Popen) -> dict:
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=30)
    return json.loads(out.strip().splitlines()[-1])


def start_agent(folder: Path, side: str, address: str, port: int) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-m", "carbon.cluster.agent", "--storage-dir",
                             str(folder / side), "--bind", address, "--port", str(port)],
                            stdout=subprocess.DEVNULL, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    wait_for(lambda: _open(address, port), what="agent")
    return proc


def _open(address: str, port: int) -> bool:
    import socket
    try:
        with socket.create_connection((address, port), timeout=0.2):
            return True
    except OSError:
        return False


def run_ours(folder: Path, names: list[str], workers: int) -> dict:
    ports = {"src": free_port(), "dst": free_port()}
    addresses = {"src": "127.0.0.21", "dst": "127.0.0.22"}
    agents = [start_agent(folder, side, addresses[side], ports[side]) for side in ports]
    try:
        def spec(sides: list[str]) -> object:
            hosts = {s: {"address": addresses[s], "ports": {"agent": ports[s]}} for s in sides}
            return parse_cluster({"cluster": {"root": str(folder / "state")}, "hosts": hosts},
                                 str(folder / "bench.toml"))
        old, new = spec(["src"]), spec(["src", "dst"])
        rebalancer = Rebalancer(old, new, Rates(0, 0, workers=workers))
        os.makedirs(rebalancer.folder, exist_ok=True)
        open(rebalancer.journal_path, "w").close()
        size = (folder / "template.wsp").stat().st_size
        moves = [Move(name, size, "src", ["dst"], ["src"]) for name in names]
        report = Report()
        started = time.monotonic()
        rebalancer.transfer(moves, report)
        seconds = time.monotonic() - started
        return {"seconds": seconds, "bytes": report.bytes, "unverified": len(report.unverified)}
    finally:
        for agent in agents:
            agent.terminate()
            agent.wait(10)


def remote_shell(folder: Path) -> Path:
    """An rsync ``--rsh`` that drops the host name and runs the server side here."""
    path = folder / "local-rsh"
    path.write_text('#!/bin/sh\nshift\nexec sh -c "$*"\n')
    path.chmod(0o755)
    return path


def run_carbonate(folder: Path, names: list[str], workers: int) -> dict:
    sys.path.insert(0, str(carbonate_path()))
    from carbonate.sync import run_batch
    paths = [rel(n) for n in names]
    dst = str(folder / "dst" / "whisper")
    log_path = folder / "carbonate.log"
    log = open(log_path, "w")
    stdout = sys.stdout
    options = '-azpS --copy-dest="%s" --stats --rsh=%s' % (dst, remote_shell(folder))
    started = time.monotonic()
    try:
        sys.stdout = log
        for first in range(0, len(paths), 1000):  # carbon-sync's default batch size
            run_batch(paths[first:first + 1000],
                      "127.0.0.21:%s/" % (folder / "src" / "whisper"), dst, options,
                      "127.0.0.21", False, tmpdir=str(folder))
    finally:
        sys.stdout = stdout
        log.close()
    seconds = time.monotonic() - started
    text = log_path.read_text()
    sent = sum(int(v.replace(",", "")) for v in re.findall(r"Total bytes sent: ([\d,]+)", text))
    got = sum(int(v.replace(",", "")) for v in
              re.findall(r"Total bytes received: ([\d,]+)", text))
    if "rc: 0" not in text or "rc: 1" in text or not got:
        raise SystemExit("carbonate's rsync failed, see %s" % log_path)
    return {"seconds": seconds, "bytes": sent + got, "unverified": None}


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--reader":
        return reader(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), rate=20.0)
    parser = argparse.ArgumentParser()
    parser.add_argument("--metrics", type=int, nargs="+", default=[1000])
    parser.add_argument("--days", type=int, default=365, help="retention of the files")
    parser.add_argument("--workers", type=int, default=4, help="ours: parallel transfers")
    parser.add_argument("--tools", nargs="+", default=["ours", "carbonate", "carbonate", "ours"],
                        help="the run order (default A B B A)")
    parser.add_argument("--folder", default=None)
    parser.add_argument("--keep", action="store_true", help="keep the run folders")
    args = parser.parse_args()
    if shutil.which("rsync") is None:
        raise SystemExit("rsync is needed (apt-get install rsync)")
    base = Path(args.folder or tempfile.mkdtemp(prefix="rebalance-bench-"))
    rows = []
    print("loadavg before: %s" % Path("/proc/loadavg").read_text().strip(), flush=True)
    for count in args.metrics:
        folder = base / ("%d" % count)
        now = int(time.time()) // STEP * STEP
        prepare_source(folder, count, args.days, now)
        names = metric_names(count)
        for tool in args.tools:
            prepare_target(folder, count, args.days, now)
            os.sync()
            run = run_ours if tool == "ours" else run_carbonate
            watcher = start_reader(folder, count, now)
            result = run(folder, names, args.workers)
            result.update(stop_reader(watcher))
            # Points still inside the retention window when checked (the clock moved on
            # while the tool ran: a point that expired meanwhile is nobody's loss).
            lost, replaced = check(folder, names, now, int(time.time()))
            result.update(tool=tool, metrics=count, days=args.days, lost=lost,
                          replaced=replaced,
                          file_bytes=(folder / "template.wsp").stat().st_size,
                          loadavg=Path("/proc/loadavg").read_text().split()[0])
            rows.append(result)
            print(json.dumps(result), flush=True)
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)
    print("loadavg after: %s" % Path("/proc/loadavg").read_text().strip())
    print("\n| metrics (retention) | tool | wall s (runs in order) | MB moved | points lost "
          "| new owner's points replaced | wrong reads / reads during the move |")
    print("|---|---|---|---|---|---|---|")
    for count in args.metrics:
        for tool in ("ours", "carbonate"):
            runs = [r for r in rows if r["metrics"] == count and r["tool"] == tool]
            if not runs:
                continue
            print("| %d (%d d) | %s | %s | %s | %s | %s | %s |" % (
                count, runs[0]["days"], tool, ", ".join(repr(r["seconds"]) for r in runs),
                ", ".join("%.3f" % (r["bytes"] / 1e6) for r in runs),
                ", ".join(str(r["lost"]) for r in runs),
                ", ".join(str(r["replaced"]) for r in runs),
                ", ".join("%d / %d" % (r["wrong_reads"], r["reads"]) for r in runs)))
    if args.keep:
        print("(run folders kept under %s)" % base)
    else:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
