"""carbon-cache under faults, side by side with carbon-cache 1.1.10 (docs/reliability.md).

    python bench/fault_bench.py kill    # kill -9 one second after a burst: points lost
    python bench/fault_bench.py drain   # SIGTERM with the cache full: drain rate
    python bench/fault_bench.py flush   # SIGTERM with SHUTDOWN_DRAIN_CACHE = False (ours)

Both daemons get the same carbon.conf (bench/cache_bench.py's, schema 10s:1d) with
MAX_UPDATES_PER_SECOND = MAX_UPDATES_PER_SECOND_ON_SHUTDOWN = --rate (default 50); the
burst is --points over --metrics (default 200,000 over 2,000: 100 points each) on one TCP
connection. Order: reference, ours, ours, reference (--rounds 2) unless --no-reference.
"""

from __future__ import annotations

import argparse
import shutil
import signal
import socket
import sys
import tempfile
import time
from pathlib import Path

import whisper

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cache_bench import make_root, payload, start, whisper_path  # noqa: E402
from common import stop, wait_port  # noqa: E402


def points_on_disk(base: Path, names: list[str], now: int, per_metric: int) -> int:
    total = 0
    for name in names:
        try:
            _, values = whisper.fetch(whisper_path(base, name), now - 10 * (per_metric + 2), now)
        except (OSError, whisper.WhisperException):
            continue
        total += sum(1 for value in values if value is not None)
    return total


def complete_metrics(base: Path, names: list[str], now: int, per_metric: int) -> int:
    return sum(points_on_disk(base, [name], now, per_metric) == per_metric for name in names)


def setup(impl: str, args: argparse.Namespace, extra: list[str]) -> tuple[Path, dict]:
    base = Path(tempfile.mkdtemp(prefix="faultbench-"))
    ports = make_root(base, "sorted", str(args.rate))
    with open(base / "conf" / "carbon.conf", "a") as conf:
        conf.write("MAX_UPDATES_PER_SECOND_ON_SHUTDOWN = %s\n" % args.rate)
        if impl == "ours":
            conf.write("".join(line + "\n" for line in extra))
    return base, ports


def burst(port: int, args: argparse.Namespace) -> tuple[int, list[str]]:
    now = int(time.time()) // 10 * 10
    data, names = payload(args.points, args.metrics, now)
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(data)
    return now, names


def run_kill(impl: str, args: argparse.Namespace) -> dict:
    base, ports = setup(impl, args, [])
    try:
        proc = start(impl, base)
        wait_port(ports["line"], proc)
        now, names = burst(ports["line"], args)
        time.sleep(1.0)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        per_metric = args.points // args.metrics
        on_disk = points_on_disk(base, names, now, per_metric)
        result = {"impl": impl, "on_disk_after_kill": on_disk}
        if impl == "ours":  # the next start replays the journal
            conf = base / "conf" / "carbon.conf"
            conf.write_text(conf.read_text().replace(
                "MAX_UPDATES_PER_SECOND = %s" % args.rate, "MAX_UPDATES_PER_SECOND = inf"))
            proc = start(impl, base)
            wait_port(ports["line"], proc)
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                on_disk = points_on_disk(base, names, now, per_metric)
                if on_disk == args.points:
                    break
                time.sleep(1.0)
            stop(proc)
        result["lost"] = args.points - on_disk
        return result
    finally:
        shutil.rmtree(base, ignore_errors=True)


def run_term(impl: str, args: argparse.Namespace, extra: list[str]) -> dict:
    base, ports = setup(impl, args, extra)
    try:
        proc = start(impl, base)
        wait_port(ports["line"], proc)
        now, names = burst(ports["line"], args)
        time.sleep(args.wait)
        per_metric = args.points // args.metrics
        pending = args.metrics - complete_metrics(base, names, now, per_metric)
        started = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=1800)
        took = time.monotonic() - started
        on_disk = points_on_disk(base, names, now, per_metric)
        result = {"impl": impl, "pending_metrics": pending, "exit_s": round(took, 2),
                  "metrics_per_s": round(pending / took, 1),
                  "on_disk_at_exit": on_disk}
        if extra:  # journal flush: the next start writes the rest
            proc = start(impl, base)
            wait_port(ports["line"], proc)
            deadline = time.monotonic() + 300
            while time.monotonic() < deadline and on_disk < args.points:
                time.sleep(2.0)
                on_disk = points_on_disk(base, names, now, per_metric)
            stop(proc)
            result["on_disk_after_restart"] = on_disk
        result["lost"] = args.points - on_disk
        return result
    finally:
        shutil.rmtree(base, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scenario", choices=["kill", "drain", "flush"])
    parser.add_argument("--points", type=int, default=200_000)
    parser.add_argument("--metrics", type=int, default=2_000)
    parser.add_argument("--rate", default="50", help="MAX_UPDATES_PER_SECOND(_ON_SHUTDOWN)")
    parser.add_argument("--wait", type=float, default=3.0,
                        help="seconds between the burst and SIGTERM")
    parser.add_argument("--rounds", type=int, default=1, help="reference, ours pairs (ABBA)")
    parser.add_argument("--no-reference", action="store_true")
    args = parser.parse_args()
    order = []
    for round_number in range(args.rounds):
        pair = ["reference", "ours"] if not args.no_reference else ["ours"]
        order += pair if round_number % 2 == 0 else pair[::-1]
    for impl in order:
        if args.scenario == "kill":
            result = run_kill(impl, args)
        elif args.scenario == "drain":
            result = run_term(impl, args, [])
        else:
            if impl != "ours":
                continue
            result = run_term(impl, args, ["SHUTDOWN_DRAIN_CACHE = False"])
        print(result, flush=True)


if __name__ == "__main__":
    main()
