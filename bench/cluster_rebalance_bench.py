"""Rebalance transfer vs carbonate 1.1.10's carbon-sync (rsync + whisper-fill) on the same data.

    .venv/bin/python bench/cluster_rebalance_bench.py --metrics 1000 10000 [--days 7]

Per size: an old owner holding N whisper files (1 min points, ``--days`` of retention,
the last 2 days written) and a new owner already holding the last hour of half of them
(points double-written by the relays). Ours: two transfer agents on 127.0.0.21/.22 and
the rebalance coordinator's transfer step (stream, whisper-fill merge, verify, journal).
carbonate: ``carbonate.sync.run_batch`` as carbon-sync calls it (rsync ``-azpS
--copy-dest``, a local path instead of ssh, then ``heal_metric`` = whisper-fill per file).
Order A B B A; every figure is wall time on this (shared, loaded) machine. Needs rsync.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import whisper  # noqa: E402

from carbon.cluster.merge import verify  # noqa: E402
from carbon.cluster.rebalance import Move, Rates, Rebalancer, Report  # noqa: E402
from carbon.cluster.spec import parse_cluster  # noqa: E402
from tests.cluster.carbonate_tools import carbonate_path  # noqa: E402
from tests.support import free_port, wait_for  # noqa: E402

STEP = 60


def prepare(folder: Path, count: int, days: int, now: int) -> list[str]:
    """Old owner's files under folder/src, the new owner's partial copies under folder/dst."""
    src, dst = folder / "src" / "whisper", folder / "dst" / "whisper"
    shutil.rmtree(folder / "src", ignore_errors=True)
    shutil.rmtree(folder / "dst", ignore_errors=True)
    folder.mkdir(parents=True, exist_ok=True)
    template, partial = folder / "template.wsp", folder / "partial.wsp"
    for path in (template, partial):
        if path.exists():
            path.unlink()
    archive = [(STEP, days * 1440)]
    whisper.create(str(template), archive)
    whisper.update_many(str(template), [(now - STEP * k, float(k)) for k in range(1, 2881)])
    whisper.create(str(partial), archive)
    whisper.update_many(str(partial), [(now - STEP * k, -1.0) for k in range(0, 60)])
    names = []
    for n in range(count):
        name = "bench.group%03d.metric%05d" % (n // 100, n)
        rel = name.replace(".", "/") + ".wsp"
        names.append(name)
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(template, src / rel)
        if n % 2 == 0:
            (dst / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(partial, dst / rel)
            # Not the source's mtime: rsync's quick check (same size and mtime) would
            # otherwise take the new owner's partial copy as the transferred file.
            os.utime(dst / rel, (now - 3600, now - 3600))
    return names


def lost_points(folder: Path, names: list[str], now: int) -> int:
    lost = 0
    for name in names:
        rel = name.replace(".", "/") + ".wsp"
        source = (folder / "src" / "whisper" / rel).read_bytes()
        target = folder / "dst" / "whisper" / rel
        if not target.exists():
            lost += 2880
            continue
        result = verify(str(target), source, now)
        lost += result.source_points - result.present_points
    return lost


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


def run_ours(folder: Path, names: list[str]) -> dict:
    ports = {"src": free_port(), "dst": free_port()}
    addresses = {"src": "127.0.0.21", "dst": "127.0.0.22"}
    agents = [start_agent(folder, side, addresses[side], ports[side]) for side in ports]
    try:
        def spec(sides: list[str]) -> object:
            hosts = {s: {"address": addresses[s], "ports": {"agent": ports[s]}} for s in sides}
            return parse_cluster({"cluster": {"root": str(folder / "state")}, "hosts": hosts},
                                 str(folder / "bench.toml"))
        old, new = spec(["src"]), spec(["src", "dst"])
        rebalancer = Rebalancer(old, new, Rates(0, 0, workers=4))
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


def run_carbonate(folder: Path, names: list[str]) -> dict:
    sys.path.insert(0, str(carbonate_path()))
    from carbonate.sync import run_batch
    paths = [n.replace(".", "/") + ".wsp" for n in names]
    dst = str(folder / "dst" / "whisper")
    log = open(folder / "carbonate.log", "w")
    stdout = sys.stdout
    started = time.monotonic()
    try:
        sys.stdout = log
        for first in range(0, len(paths), 1000):  # carbon-sync's default batch size
            run_batch(paths[first:first + 1000], str(folder / "src" / "whisper") + "/", dst,
                      '-azpS --copy-dest="%s"' % dst, "127.0.0.21", False,
                      tmpdir=str(folder))
    finally:
        sys.stdout = stdout
        log.close()
    seconds = time.monotonic() - started
    size = sum((folder / "src" / "whisper" / p).stat().st_size for p in paths)
    return {"seconds": seconds, "bytes": size, "unverified": None}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--metrics", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--days", type=int, default=7)
    parser.add_argument("--folder", default=None)
    args = parser.parse_args()
    if shutil.which("rsync") is None:
        raise SystemExit("rsync is needed (apt-get install rsync)")
    base = Path(args.folder or tempfile.mkdtemp(prefix="rebalance-bench-"))
    rows = []
    for count in args.metrics:
        order = ["ours", "carbonate", "carbonate", "ours"]
        for tool in order:
            now = int(time.time()) // STEP * STEP
            folder = base / ("%d" % count)
            names = prepare(folder, count, args.days, now)
            run = run_ours if tool == "ours" else run_carbonate
            result = run(folder, names)
            # Points still inside the retention window when checked (the clock moved on
            # while the tool ran: a point that expired meanwhile is nobody's loss).
            result.update(tool=tool, metrics=count,
                          lost=lost_points(folder, names, int(time.time())),
                          file_bytes=(folder / "template.wsp").stat().st_size)
            rows.append(result)
            print(json.dumps(result), flush=True)
    print("\n| metrics | tool | wall s (run 1, run 2) | MB moved | points lost |")
    print("|---|---|---|---|---|")
    for count in args.metrics:
        for tool in ("ours", "carbonate"):
            runs = [r for r in rows if r["metrics"] == count and r["tool"] == tool]
            print("| %d | %s | %s | %.0f | %s |" % (
                count, tool, ", ".join("%.1f" % r["seconds"] for r in runs),
                runs[0]["bytes"] / 1e6, ", ".join(str(r["lost"]) for r in runs)))
    print("(run folders kept under %s)" % base)


if __name__ == "__main__":
    main()
