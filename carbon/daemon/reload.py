"""SIGHUP: re-read the tunables and the schema and rule files of a running daemon.

carbon-cache: MAX_UPDATES_PER_SECOND, MAX_CREATES_PER_MINUTE, CACHE_WRITE_STRATEGY and
MAX_CACHE_SIZE are read again from carbon.conf and applied to the running writer and
cache; the storage schemas (and, for carbon-aggregator-cache, the aggregation and
rewrite rules) are re-read. carbon-relay: relay-rules.conf (RELAY_METHOD = rules) or
the aggregation rules of aggregated-consistent-hashing. Both: the whitelist and
blacklist. One log line per changed value or file; a file that no longer parses keeps
what is running and says why.
"""

from __future__ import annotations

from typing import Any, Callable

from carbon.cache.strategies import make_strategy
from carbon.config.errors import ConfigError
from carbon.config.loader import load_settings
from carbon.plugins import WRITE_STRATEGIES
from carbon.relay.ring_swap import swap_ring
from carbon.relay.rules import RelayRule, load_relay_rules

RELOADABLE = ("MAX_UPDATES_PER_SECOND", "MAX_CREATES_PER_MINUTE", "CACHE_WRITE_STRATEGY",
              "MAX_CACHE_SIZE")
INF = float("inf")


def _logger(lines: list[str], log: Any) -> Callable[[str], None]:
    """A ``say`` that logs a line and keeps it in ``lines`` (the reload's return value)."""
    def say(line: str) -> None:
        lines.append(line)
        log.msg(line)
    return say


def reload_cache_daemon(daemon: Any) -> list[str]:
    """Apply what changed in the daemon's carbon.conf and schema files; returns the log
    lines written (one per changed value or file)."""
    settings, log = daemon.settings, daemon.log
    lines: list[str] = []
    say = _logger(lines, log)

    try:
        fresh = load_settings(settings["program"], settings.get("instance"),
                              settings["config_file"], settings.get("GRAPHITE_ROOT"))
    except ConfigError as exc:
        say("SIGHUP: kept the running settings: %s" % exc)
        fresh = None
    if fresh is not None:
        # derived from MAX_UPDATES_PER_SECOND unless set: follows it silently
        settings["MAX_UPDATES_PER_SECOND_ON_SHUTDOWN"] = fresh.MAX_UPDATES_PER_SECOND_ON_SHUTDOWN
        for key in RELOADABLE:
            old, new = settings[key], fresh[key]
            if old == new:
                continue
            problem = _apply(daemon, key, new)
            if problem:
                say("SIGHUP: kept %s = %s: %s" % (key, old, problem))
                continue
            settings[key] = new
            say("SIGHUP: %s changed from %s to %s" % (key, old, new))
    schemas = daemon.schemas
    before = (schemas.storage, schemas.aggregation)
    problem = schemas.reload_if_changed()
    if problem:
        say("SIGHUP: %s" % problem)
    elif (schemas.storage, schemas.aggregation) != before:
        say("SIGHUP: reloaded storage schemas (%d) and aggregation schemas (%d)"
            % (len(schemas.storage), len(schemas.aggregation)))
    # the reload reaches into the daemons: only carbon-aggregator-cache has stages
    stages = getattr(daemon, "stages", None)
    if stages is not None:  # carbon-aggregator-cache: its rule files too
        stages.check_files(force=True)
    reload_lists(daemon.list_filter, say)
    return lines


def reload_lists(list_filter: Any, say: Callable[[str], None]) -> None:
    """Re-read the whitelist and blacklist (USE_WHITELIST) if their files changed."""
    if list_filter is None:
        return
    for label, patterns in (("whitelist", list_filter.whitelist),
                            ("blacklist", list_filter.blacklist)):
        if patterns is None:
            continue
        before = [regex.pattern for regex in patterns.patterns]
        try:
            patterns.reload()
        except ConfigError as exc:
            say("SIGHUP: kept the %s: %s" % (label, exc))
            continue
        after = [regex.pattern for regex in patterns.patterns]
        if after != before:
            say("SIGHUP: reloaded %s (%d patterns)" % (label, len(after)))


def _rules_key(rules: list[RelayRule]) -> list[tuple]:
    return [(rule.name, rule.pattern, tuple(rule.destinations), rule.continue_matching)
            for rule in rules]


def reload_relay_daemon(daemon: Any, workers: list[int] | None = None) -> list[str]:
    """carbon-relay's SIGHUP: a new ring when carbon.conf's routing keys changed
    (``carbon.relay.ring_swap``, in place), its routing rules and the white/blacklist;
    returns the log lines written (one per change). ``workers``: the pids of the
    RELAY_WORKERS processes (for the routing acknowledgement)."""
    lines: list[str] = []
    say = _logger(lines, daemon.log)

    swapped = swap_ring(daemon, say, workers)
    router = daemon.relay.router
    if not swapped and getattr(router, "rechecks_rules", False) and \
            getattr(router, "aggregation_rules", None) is None:
        error = router.check_rules()  # e.g. cluster-rebalance's state: now, not in 10 s
        if error is not None:
            say("SIGHUP: kept the routing state: %s" % error)
    # RELAY_METHOD = rules and routers like it have a rules file (a plugin's, maybe)
    path = getattr(router, "rules_path", None)
    if path is not None:  # RELAY_METHOD = rules
        try:
            rules = load_relay_rules(path)
        except ConfigError as exc:
            say("SIGHUP: kept the relay rules: %s" % exc)
        else:
            if _rules_key(rules) != _rules_key(router.rules):
                router.rules = rules
                router.clear_cache()  # also drops the lean path's route index
                say("SIGHUP: reloaded %d relay rules from %s" % (len(rules), path))
                unknown = router.unknown_rule_destinations()
                if unknown:
                    say("SIGHUP: relay rules name destinations missing from DESTINATIONS, "
                        "never used: %s" % ", ".join(str(dest) for dest in unknown))
    # aggregated routers (drop-in: carbon 1.1.10's rules objects have no check)
    aggregation = getattr(router, "aggregation_rules", None)
    if getattr(aggregation, "check", None) is not None:  # aggregated-consistent-hashing
        changed, error = aggregation.check()
        if error is not None:
            say("SIGHUP: kept the aggregation rules: %s" % error)
        elif changed:
            router.clear_cache()
            say("SIGHUP: reloaded %d aggregation rules" % len(aggregation.ruleset.rules))
    reload_lists(daemon.list_filter, say)
    return lines


def _apply(daemon: Any, key: str, value: Any) -> str | None:
    """Put one new value into the running parts; a reason when it cannot be used."""
    writer = daemon.writer
    if key == "MAX_UPDATES_PER_SECOND":
        rate = float(value)
        writer.update_limiter.set_rate(rate, rate)
    elif key == "MAX_CREATES_PER_MINUTE":
        per_minute = float(value)
        writer.create_limiter.set_rate(per_minute, per_minute / 60.0 if per_minute != INF
                                       else INF)
    elif key == "CACHE_WRITE_STRATEGY":
        if value not in WRITE_STRATEGIES:
            return "unknown write strategy %r (known: %s)" % (
                value, ", ".join(WRITE_STRATEGIES.names()))
        strategy = make_strategy(value, daemon.cache, daemon.settings, daemon.log)
        with writer.choose_lock:
            strategy.skip = writer.strategy.skip  # metrics the writer cannot take now
            writer.strategy = strategy
        daemon.strategy = strategy
    elif key == "MAX_CACHE_SIZE":
        sink = daemon.cache_sink
        sink.max_size = float(value)
        sink.low_watermark = float(value) * 0.95
        daemon.settings["CACHE_SIZE_LOW_WATERMARK"] = sink.low_watermark
        sink.check_space()
    return None
