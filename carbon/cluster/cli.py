"""``carbon-cluster``: generate, start, stop, report and grow a cluster from one TOML file.

    carbon-cluster generate CLUSTER.toml [--host NAME]
    carbon-cluster start    CLUSTER.toml [--host NAME]
    carbon-cluster stop     CLUSTER.toml [--host NAME]
    carbon-cluster status   CLUSTER.toml [--host NAME]      (exit 1 unless all run)
    carbon-cluster rebalance OLD.toml NEW.toml [--dry-run] [--delete]
                   [--rate-bytes N] [--rate-files N] [--workers N]
    carbon-cluster add-host CLUSTER.toml NAME ADDRESS --out NEW.toml [--caches a,b]
                   [--port KEY=N ...] [rebalance options]
    carbon-cluster resize CLUSTER.toml [--host NAME] [--dry-run] [--rate-files N]
                   [--rate-bytes N] [--no-fsync]
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Optional, Sequence

from carbon.cluster import control, generate
from carbon.cluster.rebalance import Rates, Rebalancer, dry_run, local_listings, plan
from carbon.cluster.resize import add_rate_options, cluster_resize, rates_of
from carbon.cluster.spec import DEFAULT_PORTS, load_cluster
from carbon.config.errors import ConfigError


def _rebalance_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dry-run", action="store_true",
                        help="print what would move (metrics, bytes, time) and stop")
    parser.add_argument("--delete", action="store_true",
                        help="remove old copies once verified (default: list them)")
    parser.add_argument("--rate-bytes", type=float, default=50e6,
                        help="bytes/s on the wire (compressed) over all transfers "
                             "(default 50e6; 0 = unlimited)")
    parser.add_argument("--rate-files", type=float, default=1000,
                        help="metrics/s (default 1000; 0 = unlimited)")
    parser.add_argument("--workers", type=int, default=4, help="parallel transfers")
    parser.add_argument("--local", action="store_true",
                        help="--dry-run: read the hosts' folders on this machine instead "
                             "of asking their agents")
    parser.add_argument("--list", action="store_true", help="--dry-run: list every move")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="carbon-cluster", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("generate", "start", "stop", "status"):
        cmd = sub.add_parser(name)
        cmd.add_argument("cluster")
        cmd.add_argument("--host", help="only this host")
    cmd = sub.add_parser("rebalance")
    cmd.add_argument("old")
    cmd.add_argument("new")
    _rebalance_options(cmd)
    cmd = sub.add_parser("add-host")
    cmd.add_argument("cluster")
    cmd.add_argument("name")
    cmd.add_argument("address")
    cmd.add_argument("--out", required=True, help="the new cluster file to write")
    cmd.add_argument("--caches", default="a", help="cache instances (comma-separated)")
    cmd.add_argument("--port", action="append", default=[], metavar="KEY=N",
                     help="port of the new host (%s)" % ", ".join(DEFAULT_PORTS))
    _rebalance_options(cmd)
    cmd = sub.add_parser("resize", help="apply the cluster file's [storage] schemas to "
                         "existing whisper files, online (each host's agent its own)")
    cmd.add_argument("cluster")
    cmd.add_argument("--host", help="only this host")
    add_rate_options(cmd)
    return parser


def add_host_text(text: str, name: str, address: str, caches: list[str],
                  ports: dict[str, int]) -> str:
    """The cluster file's text with a [hosts.NAME] table appended."""
    lines = ["", "[hosts.%s]" % name, "address = %s" % json.dumps(address),
             "caches = %s" % json.dumps(caches)]
    if ports:
        lines.append("ports = { %s }" % ", ".join("%s = %d" % kv for kv in ports.items()))
    return text.rstrip("\n") + "\n" + "\n".join(lines) + "\n"


def _rebalance(old_path: str, new_path: str, args: argparse.Namespace) -> int:
    old, new = load_cluster(old_path), load_cluster(new_path)
    rates = Rates(args.rate_bytes, args.rate_files, args.workers)
    if args.dry_run:
        listings = local_listings(old) if args.local else None
        if args.list:
            for move in plan(old, new, listings):
                print("%s %d %s -> %s" % (move.name, move.size, move.source,
                                          ",".join(move.targets)))
        summary = dry_run(old, new, rates, listings)
        seconds = summary["seconds"]
        print("would move %d metrics (%d transfers, %d bytes, %d old copies to remove); "
              "estimated %s at %s bytes/s, %s files/s" % (
                  summary["metrics"], summary["transfers"], summary["bytes"],
                  summary["deletes"], "%.1f s" % seconds if seconds is not None else "n/a",
                  args.rate_bytes or "unlimited", args.rate_files or "unlimited"))
        return 0
    report = Rebalancer(old, new, rates, out=sys.stderr, delete=args.delete).run()
    print("moved %d metrics (%d already done), %d bytes in %.1f s (transfers %.1f s); "
          "%d unverified; %d old copies deleted, %d kept (listed in %s/rebalance/"
          "old-copies.txt)" % (report.moves, report.skipped, report.bytes, report.seconds,
                               report.transfer_seconds, len(report.unverified),
                               report.deleted, len(report.left), new.root))
    print("steps: %s; %d pulled again (changed after their first pull)" % (
        ", ".join("%s %.1f s" % item for item in report.phases.items()), report.caught_up))
    for name in report.unverified:
        print("unverified: %s" % name)
    return 1 if report.unverified else 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.command == "rebalance":
            return _rebalance(args.old, args.new, args)
        if args.command == "add-host":
            ports = {}
            for item in args.port:
                key, _, value = item.partition("=")
                ports[key] = int(value)
            with open(args.cluster, encoding="utf-8") as handle:
                text = handle.read()
            with open(args.out, "w", encoding="utf-8") as out:
                out.write(add_host_text(text, args.name, args.address,
                                        [c for c in args.caches.split(",") if c], ports))
            load_cluster(args.out)  # check before anything moves
            return _rebalance(args.cluster, args.out, args)
        spec = load_cluster(args.cluster)
        if args.command == "resize":
            lines, ok = cluster_resize(spec, args.host, rates_of(args), args.dry_run,
                                       sys.stderr)
            print("\n".join(lines))
            return 0 if ok else 1
        if args.command == "generate":
            for host in control.select(spec, args.host):
                print(generate.write_host(spec, host))
            return 0
        if args.command == "start":
            for host in control.select(spec, args.host):
                generate.write_host(spec, host)
            print("\n".join(control.start(spec, args.host)))
            return 0
        if args.command == "stop":
            print("\n".join(control.stop(spec, args.host)))
            return 0
        lines, healthy = control.status(spec, args.host)
        print("\n".join(lines))
        return 0 if healthy else 1
    except ConfigError as exc:
        print("carbon-cluster: %s" % exc, file=sys.stderr)
        return 2
    except (RuntimeError, OSError, ValueError) as exc:
        print("carbon-cluster: %s" % exc, file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
