"""carbon-relay: receivers -> [white/blacklist] -> whole reads routed in C -> RelaySink ->
destinations; its SIGHUP reload (a new ring, the relay rules, the lists) beside it."""

from __future__ import annotations

import signal
from typing import Any, Callable

from twisted.internet import defer

from carbon.config.errors import ConfigError
from carbon.daemon.base import (WHOLE_READ_BYTES, Composition, Daemon, collect_rarely,
                                log_lines)
from carbon.daemon.relay_workers import WorkerPool, worker_count
from carbon.instrumentation.reporter import Reporter
from carbon.pipeline import Processor
from carbon.relay.chunks import ChunkStage
from carbon.relay.linefilter import LineListFilter
from carbon.relay.ring_swap import swap_ring
from carbon.relay.aggregated import AggregatedConsistentHashingRouter
from carbon.relay.routing import DatapointRouter, RelayRulesRouter
from carbon.relay.rules import RelayRule, load_relay_rules
from carbon.relay.sink import RelaySink, relay_extra


READ_BYTES = WHOLE_READ_BYTES  # a receiver's read: one C routing call per read


class RelayDaemon(Daemon):
    """Routes every received batch to DESTINATIONS; self-metrics under carbon.relays.

    A whole read is routed (and its lines written) in C
    (``carbon.relay.chunks``); else reads of canonical lines take the lean path
    (``LineBatch`` through ``Pipeline.process_lines`` to ``RelaySink.put_lines``); the
    white/blacklist is wrapped so that it filters LineBatches too. With RELAY_WORKERS > 1
    inbound TCP connections are spread over worker processes (``carbon.daemon.relay_workers``).
    """

    metric_kind = "relays"

    def __init__(self, settings: Any, log: Any, reactor: Any) -> None:
        self.workers = worker_count(settings)
        self.pool: WorkerPool | None = None
        super().__init__(settings, log, reactor)

    def stages(self) -> Composition:
        """[white/blacklist, also of LineBatches] -> whole reads routed in C (used when
        no stage before it changes reads) -> RelaySink; reads of READ_BYTES."""
        self.relay = RelaySink.from_settings(self.settings, self.flow, self.stats, self.reactor,
                                             log=self.log)
        processors: list[Processor] = []
        if self.list_filter is not None:
            processors.append(LineListFilter(self.list_filter,
                                             int(self.settings["RELAY_HASH_CACHE_SIZE"] or 0)))
        processors.append(ChunkStage(self.relay))
        return Composition(receivers=self.listeners(), processors=processors, sink=self.relay,
                           read_size=READ_BYTES)

    def make_reporter(self) -> Reporter:
        gauges: dict[str, Callable[[], float]] = {
            "activeConnections": lambda: len(self.receivers.connections)}
        gauges.update(self.relay.gauges())  # destinations.<d>.queued / .spool
        return Reporter(self.reporter_config(), self.stats, self.pipeline.process,
                        gauges=gauges, extra=relay_extra)

    def start_sink(self) -> None:
        collect_rarely()
        self.relay.start()
        if self.workers > 1:
            self.pool = WorkerPool(self.settings, self.workers, self.log, self.reactor,
                                   foreground=self.log.logdir is None)
            self.pool.start()
            self.receivers.hand_off = self.pool.dispatch

    def reload(self) -> list[str]:
        """SIGHUP: a new ring when carbon.conf's routing keys changed
        (``carbon.relay.ring_swap``, swapped in place), the routing rules and the
        white/blacklist, in the RELAY_WORKERS processes too (the signal is passed on).
        Returns the log lines written (one per change)."""
        workers = []
        if self.pool is not None:
            for proc, _channel in self.pool.workers.values():
                if proc.poll() is None:
                    proc.send_signal(signal.SIGHUP)
                    workers.append(proc.pid)
        lines: list[str] = []
        say = log_lines(lines, self.log)
        swapped = swap_ring(self.settings, self.relay, self.reporter.gauges, say, workers)
        router = self.relay.router
        aggregated = isinstance(router, AggregatedConsistentHashingRouter)
        if not swapped and not aggregated and isinstance(router, DatapointRouter) and \
                router.rechecks_rules:
            error = router.check_rules()  # e.g. cluster-rebalance's state: now, not in 10 s
            if error is not None:
                say("SIGHUP: kept the routing state: %s" % error)
        if isinstance(router, RelayRulesRouter) and router.rules_path is not None:
            self.reload_relay_rules(router, router.rules_path, say)
        if aggregated:
            self.reload_aggregation_rules(router, say)
        self.reload_lists(say)
        return lines

    def reload_relay_rules(self, router: RelayRulesRouter, path: str,
                           say: Callable[[str], None]) -> None:
        """RELAY_METHOD = rules (or a plugin router built on it): its rules file."""
        try:
            rules = load_relay_rules(path)
        except ConfigError as exc:
            say("SIGHUP: kept the relay rules: %s" % exc)
            return
        if _rules_key(rules) == _rules_key(router.rules):
            return
        router.rules = rules
        router.clear_cache()  # also drops the lean path's route index
        say("SIGHUP: reloaded %d relay rules from %s" % (len(rules), path))
        unknown = router.unknown_rule_destinations()
        if unknown:
            say("SIGHUP: relay rules name destinations missing from DESTINATIONS, never "
                "used: %s" % ", ".join(str(dest) for dest in unknown))

    def reload_aggregation_rules(self, router: AggregatedConsistentHashingRouter,
                                 say: Callable[[str], None]) -> None:
        """aggregated-consistent-hashing: its aggregation rules file."""
        aggregation = router.aggregation_rules
        # drop-in: carbonate may put carbon 1.1.10's rules object here, which has no check
        check = getattr(aggregation, "check", None)
        if check is None:
            return
        changed, error = check()
        if error is not None:
            say("SIGHUP: kept the aggregation rules: %s" % error)
        elif changed:
            router.clear_cache()
            say("SIGHUP: reloaded %d aggregation rules" % len(aggregation.ruleset.rules))

    def descriptor_claims(self) -> int:
        """A connection and two spool files per destination."""
        return 3 * len(self.relay.clients)

    def stop_input(self) -> defer.Deferred[Any]:
        if self.pool is not None:
            self.pool.hold()  # the backlog accepted at shutdown is drained here
        return super().stop_input()

    def stop_sink(self) -> Any:
        waits = [self.relay.stop()]
        if self.pool is not None:
            waits.append(self.pool.stop())
        return defer.gatherResults(waits)


def _rules_key(rules: list[RelayRule]) -> list[tuple[Any, ...]]:
    return [(rule.name, rule.pattern, tuple(rule.destinations), rule.continue_matching)
            for rule in rules]
