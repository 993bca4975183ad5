"""Fault benchmark: 600 connections against a carbon daemon whose open-file limit is 256.

    python bench/fault_fd_flood.py --cache ours
    python bench/fault_fd_flood.py --cache reference     # carbon 1.1.10
    python bench/fault_fd_flood.py --cache ours --program carbon-relay

Counts the connections the daemon kept and refused, whether carbonlink still answers
during the flood and once the connections are closed, whether a new connection is
served afterwards, the daemon's CPU seconds while flooded (a busy loop shows here) and
the log lines about it. Prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import resource
import select
import shutil
import socket
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import cpu_seconds  # noqa: E402
from bench.fault_relay_restart import Daemon  # noqa: E402
from tests.support import carbonlink, free_port  # noqa: E402


def limit_descriptors(limit: int) -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))


def closed_by_peer(sock: socket.socket) -> bool:
    if not select.select([sock], [], [], 0)[0]:
        return False
    try:
        return sock.recv(1) == b""
    except OSError:
        return True


def carbonlink_answers(port: int) -> bool:
    try:
        return "datapoints" in carbonlink(port, {"type": "cache-query", "metric": "x.y"})
    except (OSError, AssertionError, EOFError):
        return False


def run(args: argparse.Namespace, base: Path) -> dict:
    ports = {k: free_port() for k in ("LINE_RECEIVER_PORT", "PICKLE_RECEIVER_PORT",
                                      "CACHE_QUERY_PORT")}
    settings = dict(ports, LINE_RECEIVER_INTERFACE="127.0.0.1",
                    PICKLE_RECEIVER_INTERFACE="127.0.0.1", CACHE_QUERY_INTERFACE="127.0.0.1",
                    CARBON_METRIC_INTERVAL=1, MAX_UPDATES_PER_SECOND="inf", LOG_UPDATES=False,
                    LOG_CACHE_HITS=False, LOG_LISTENER_CONN_SUCCESS=False,
                    BAD_LINE_LOG_INTERVAL=60)
    if args.program == "carbon-relay":  # its one destination is down: points spool
        settings.update(RELAY_METHOD="consistent-hashing",
                        DESTINATIONS="127.0.0.1:%d:a" % free_port())
    cache = Daemon(base / "daemon", args.program, args.cache, settings)
    flood: list[socket.socket] = []
    try:
        cache.start(preexec_fn=lambda: limit_descriptors(args.limit))
        log = cache.base / "console.log"
        before = len(log.read_text().splitlines())
        cpu = cpu_seconds(cache.proc.pid)
        for _ in range(args.connections):
            try:
                flood.append(socket.create_connection(("127.0.0.1", ports["LINE_RECEIVER_PORT"]),
                                                      timeout=5))
            except OSError:
                pass
        time.sleep(args.hold)
        refused = sum(closed_by_peer(s) for s in flood)
        during = carbonlink_answers(ports["CACHE_QUERY_PORT"])
        flooded_cpu = cpu_seconds(cache.proc.pid) - cpu
        for sock in flood:
            sock.close()
        flood.clear()
        time.sleep(1.0)
        after = carbonlink_answers(ports["CACHE_QUERY_PORT"])
        try:
            with socket.create_connection(("127.0.0.1", ports["LINE_RECEIVER_PORT"]),
                                          timeout=5) as sock:
                sock.sendall(b"after.flood 1 %d\n" % int(time.time()))
                served = not closed_by_peer(sock)
        except OSError:
            served = False
        lines = log.read_text().splitlines()[before:]
        noted = [line for line in lines if "[clients]" not in line and any(
            word in line for word in ("EMFILE", "refused", "accept", "descriptor",
                                      "Too many open files"))]
        return {"program": args.program, "impl": args.cache, "limit": args.limit,
                "connections": args.connections,
                "kept": args.connections - refused, "refused": refused,
                "carbonlink_during": during, "carbonlink_after": after,
                "served_after": served, "cpu_s_while_flooded": round(flooded_cpu, 2),
                "hold_s": args.hold, "log_lines": len(noted),
                "first_log_line": noted[0][:160] if noted else None}
    finally:
        for sock in flood:
            sock.close()
        cache.kill()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cache", choices=("ours", "reference"), default="ours")
    parser.add_argument("--program", choices=("carbon-cache", "carbon-relay"),
                        default="carbon-cache")
    parser.add_argument("--limit", type=int, default=256)
    parser.add_argument("--connections", type=int, default=600)
    parser.add_argument("--hold", type=float, default=5.0, help="seconds of flood")
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="fault-fd-"))
    try:
        print(json.dumps(run(args, base)), flush=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
