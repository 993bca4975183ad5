"""Routing check mode (like carbon-c-relay's ``-t``): where would each metric go?

Reads metric names (or whole ``name value timestamp`` lines) and prints, for each,
the rules or aggregates involved and the destinations chosen, without sending
anything. The router comes from a carbon.conf ``[relay]`` section (and instance)
or from DESTINATIONS / RELAY_METHOD given on the command line.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any, Iterable, TextIO

from carbon.config.errors import ConfigError
from carbon.config.settings import Settings
from carbon.relay.aggregated import AggregatedConsistentHashingRouter
from carbon.relay.routing import (ConsistentHashingRouter, DatapointRouter, RelayRulesRouter,
                                  make_router)


def describe_router(router: DatapointRouter) -> str:
    """One line saying how the router places names."""
    if isinstance(router, RelayRulesRouter):
        return "rules (%d rules)" % len(router.rules)
    hashing = router.hash_router if isinstance(router, AggregatedConsistentHashingRouter) \
        else router
    if isinstance(hashing, ConsistentHashingRouter):
        return "%s (%s, replication %d%s)" % (
            router.plugin_name, hashing.hash_type, hashing.replication_factor,
            ", diverse replicas" if hashing.diverse_replicas else "")
    return router.plugin_name or type(router).__name__


def explain_metric(router: DatapointRouter, name: str) -> list[str]:
    """Indented lines: why ``name`` goes where it goes, then the destinations."""
    lines = [name]
    if isinstance(router, RelayRulesRouter):
        for rule in router.rules:
            if not rule.matches(name):
                continue
            what = "default" if rule.pattern is None else "pattern %s" % rule.pattern
            lines.append("    match [%s] %s%s" % (rule.name, what,
                                                  " (continue)" if rule.continue_matching
                                                  else ""))
            for dest in rule.destinations:
                if not router.has_destination(dest):
                    lines.append("        %s (not in DESTINATIONS: skipped)" % (dest,))
            if not rule.continue_matching:
                break
    elif isinstance(router, AggregatedConsistentHashingRouter):
        aggregates = router._aggregates(name)
        if aggregates:
            lines.append("    aggregates: %s" % ", ".join(aggregates))
        else:
            lines.append("    no aggregation rule: routed by its own name")
    destinations = router.get_destinations(name)
    if not destinations:
        lines.append("    -> no destination (dropped)")
    for dest in destinations:
        lines.append("    -> %s" % (dest,))
    return lines


def run_check(router: DatapointRouter, source: Iterable[str], out: TextIO,
              short: bool = False) -> int:
    """Print the routes of every name in ``source``; returns how many were checked."""
    checked = 0
    for raw in source:
        text = raw.strip()
        if not text or text.startswith("#"):
            continue
        name = text.split()[0]
        checked += 1
        if short:
            out.write("%s\t%s\n" % (name, ",".join(map(str, router.get_destinations(name)))))
        else:
            out.write("\n".join(explain_metric(router, name)) + "\n")
    return checked


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description="Read metric names on stdin and print where a carbon relay sends each.")
    parser.add_argument("--config", help="carbon.conf to read the [relay] section from")
    parser.add_argument("--instance", default="a", help="relay instance (default: a)")
    parser.add_argument("--destinations", help="comma-separated DESTINATIONS")
    parser.add_argument("--method", help="RELAY_METHOD (default: from config, else rules)")
    parser.add_argument("--replication", type=int, help="REPLICATION_FACTOR")
    parser.add_argument("--hash-type", help="ROUTER_HASH_TYPE (carbon_ch, fnv1a_ch, mmh3_ch, "
                                            "crelay_carbon_ch, crelay_fnv1a_ch, jump_fnv1a_ch)")
    diverse = parser.add_mutually_exclusive_group()
    diverse.add_argument("--diverse", dest="diverse", action="store_true", default=None)
    diverse.add_argument("--no-diverse", dest="diverse", action="store_false")
    parser.add_argument("--rules", help="relay-rules.conf (RELAY_METHOD = rules)")
    parser.add_argument("--aggregation-rules", help="aggregation-rules.conf")
    parser.add_argument("--short", action="store_true",
                        help="one 'name<TAB>dest,dest' line per metric")
    return parser


def settings_from_args(args: argparse.Namespace) -> Settings:
    """Settings from --config (if given) with command-line overrides applied."""
    if args.config:
        from carbon.config.loader import load_settings
        root = os.environ.get("GRAPHITE_ROOT") or os.path.dirname(
            os.path.dirname(os.path.abspath(args.config)))
        settings = load_settings("carbon-relay", args.instance, args.config, root)
    else:
        settings = Settings()
    conf_dir = settings.get("CONF_DIR") or "."
    if args.destinations:
        settings["DESTINATIONS"] = [d.strip() for d in args.destinations.split(",")
                                    if d.strip()]
    if args.method:
        settings["RELAY_METHOD"] = args.method
    if args.replication is not None:
        settings["REPLICATION_FACTOR"] = args.replication
    if args.hash_type:
        settings["ROUTER_HASH_TYPE"] = args.hash_type
    if args.diverse is not None:
        settings["DIVERSE_REPLICAS"] = args.diverse
    settings["relay-rules"] = args.rules or os.path.join(conf_dir, settings.RELAY_RULES)
    settings["aggregation-rules"] = args.aggregation_rules or os.path.join(
        conf_dir, settings.AGGREGATION_RULES)
    return settings


def main(argv: list[str] | None = None, stdin: TextIO | None = None,
         stdout: TextIO | None = None) -> int:
    """Entry point of tools/relay_check.py; returns the exit status."""
    args = make_parser().parse_args(argv)
    out = stdout or sys.stdout
    try:
        settings = settings_from_args(args)
        if not settings.DESTINATIONS:
            raise ConfigError("no DESTINATIONS (give --destinations or --config)")
        router: Any = make_router(settings)
    except (ConfigError, ValueError) as exc:
        sys.stderr.write("relay_check: %s\n" % exc)
        return 2
    if not args.short:
        out.write("# %s -> %s\n" % (describe_router(router),
                                    ", ".join(map(str, settings.DESTINATIONS))))
    run_check(router, stdin or sys.stdin, out, short=args.short)
    out.flush()
    return 0
