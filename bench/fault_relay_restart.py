"""Fault benchmark: carbon-relay -> carbon-cache, the cache stopped with SIGTERM mid-stream
and started again after an outage; how many of the points sent to the relay reach whisper.

    python bench/fault_relay_restart.py --points 300000 --outage 20 --relay ours
    python bench/fault_relay_restart.py --points 300000 --outage 20 --relay reference
    python bench/fault_relay_restart.py --relay reference --cache reference

``--relay``/``--cache``: ``ours`` or ``reference`` (carbon 1.1.10 from bench/common.py's
reference venv). Same configs, same load (lines at ``--rate`` a second into the relay's
line port, 100 names at 1 s resolution). Prints one JSON line with the counts.
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
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import reference_venv  # noqa: E402
from tests.faults.load import (SECOND_SCHEMA, PacedSender, count_stored,  # noqa: E402
                               expected_points, fault_lines)
from tests.support import ROOT, free_port, port_open, wait_for  # noqa: E402

NAMES = 100


class Daemon:
    """One carbon daemon (ours or carbon 1.1.10) in its own GRAPHITE_ROOT."""

    def __init__(self, base: Path, program: str, impl: str, settings: dict) -> None:
        self.base, self.program, self.impl = base, program, impl
        (base / "conf").mkdir(parents=True)
        (base / "conf" / "storage-schemas.conf").write_text(SECOND_SCHEMA)
        shutil.copy(ROOT / "conf" / "storage-aggregation.conf", base / "conf")
        section = "cache" if program == "carbon-cache" else "relay"
        lines = ["[%s]" % section, "STORAGE_DIR = %s" % (base / "storage"), "USER = "]
        lines += ["%s = %s" % item for item in settings.items()]
        (base / "conf" / "carbon.conf").write_text("\n".join(lines) + "\n")
        self.port = int(settings["LINE_RECEIVER_PORT"])
        self.proc: subprocess.Popen | None = None

    def start(self, preexec_fn: Any = None) -> None:
        env = {"GRAPHITE_ROOT": str(self.base), "PATH": "/usr/bin:/bin"}
        conf = str(self.base / "conf" / "carbon.conf")
        if self.impl == "reference":
            venv = reference_venv()
            cmd = [str(venv / "bin" / "python"), str(venv / "bin" / (self.program + ".py"))]
        else:
            env["PYTHONPATH"] = str(ROOT)
            cmd = [sys.executable, "-m", "carbon.daemon", self.program]
        log = open(self.base / "console.log", "a")
        self.proc = subprocess.Popen(cmd + ["--config", conf, "--nodaemon", "start"], env=env,
                                     stdout=log, stderr=subprocess.STDOUT, cwd=str(self.base),
                                     preexec_fn=preexec_fn)
        wait_for(lambda: self.proc.poll() is not None or port_open(self.port), timeout=60,
                 what="%s to listen" % self.program)
        assert self.proc.poll() is None, (self.base / "console.log").read_text()

    def terminate(self) -> float:
        started = time.monotonic()
        self.proc.terminate()
        self.proc.wait(300)
        return time.monotonic() - started

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)


def run(args: argparse.Namespace, base: Path) -> dict:
    start = int(time.time()) - 3 * 3600
    cache_ports = {k: free_port() for k in ("LINE_RECEIVER_PORT", "PICKLE_RECEIVER_PORT",
                                            "CACHE_QUERY_PORT")}
    cache = Daemon(base / "cache", "carbon-cache", args.cache, dict(
        cache_ports, LINE_RECEIVER_INTERFACE="127.0.0.1", PICKLE_RECEIVER_INTERFACE="127.0.0.1",
        CACHE_QUERY_INTERFACE="127.0.0.1", MAX_CACHE_SIZE=args.max_cache,
        MAX_UPDATES_PER_SECOND=args.updates, MAX_UPDATES_PER_SECOND_ON_SHUTDOWN=100000,
        MAX_CREATES_PER_MINUTE="inf", CARBON_METRIC_INTERVAL=0, LOG_UPDATES=False,
        LOG_CACHE_HITS=False))
    relay = Daemon(base / "relay", "carbon-relay", args.relay, dict(
        LINE_RECEIVER_INTERFACE="127.0.0.1", LINE_RECEIVER_PORT=free_port(),
        PICKLE_RECEIVER_INTERFACE="127.0.0.1", PICKLE_RECEIVER_PORT=free_port(),
        RELAY_METHOD="consistent-hashing",
        DESTINATIONS="127.0.0.1:%d:a" % cache_ports["PICKLE_RECEIVER_PORT"],
        CARBON_METRIC_INTERVAL=0))
    try:
        cache.start()
        relay.start()
        sender = PacedSender(relay.port, fault_lines(args.points, NAMES, start), args.rate,
                             limit=600)
        sender.start()
        wait_for(lambda: sender.sent >= args.points * 0.4 or sender.error, timeout=300,
                 what="40% sent")
        stop_seconds = cache.terminate()
        time.sleep(args.outage)
        cache.start()
        sender.join(600)
        expected = expected_points(args.points, NAMES, start)
        end = start + args.points // NAMES

        def stored() -> int:
            return count_stored(cache.base / "storage", NAMES, start, end, expected)[0]

        try:
            wait_for(lambda: stored() == args.points, timeout=args.settle, interval=1.0)
        except AssertionError:
            pass
        good, wrong = count_stored(cache.base / "storage", NAMES, start, end, expected)
        return {"relay": args.relay, "cache": args.cache, "points": args.points,
                "sent": sender.sent, "stored": good, "lost": args.points - good,
                "wrong": wrong, "outage_s": args.outage, "cache_stop_s": round(stop_seconds, 1)}
    finally:
        relay.kill()
        cache.kill()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--points", type=int, default=300000)
    parser.add_argument("--rate", type=float, default=20000.0, help="lines/s into the relay")
    parser.add_argument("--outage", type=float, default=20.0, help="seconds the cache is down")
    parser.add_argument("--relay", choices=("ours", "reference"), default="ours")
    parser.add_argument("--cache", choices=("ours", "reference"), default="ours")
    parser.add_argument("--max-cache", default="inf", help="cache MAX_CACHE_SIZE")
    parser.add_argument("--updates", default="inf", help="cache MAX_UPDATES_PER_SECOND")
    parser.add_argument("--settle", type=float, default=120.0,
                        help="seconds to wait for every point after the load")
    parser.add_argument("--keep", action="store_true", help="keep the run folder")
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="fault-relay-"))
    try:
        print(json.dumps(run(args, base)), flush=True)
    finally:
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)
        else:
            print("run folder: %s" % base, file=sys.stderr)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    main()
