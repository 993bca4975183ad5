"""carbon-aggregator and carbon-aggregator-cache.

Received points: [white/blacklist] -> rewrite [pre] -> aggregate -> rewrite [post]
-> sink. Aggregates computed on each tick go straight to the sink, as in carbon
1.1.10. carbon-aggregator's sink is the relay's (routing, flow control, spool);
carbon-aggregator-cache's is the cache (written to whisper by the writer). SIGHUP
reloads (``reload``) re-read the rule files and the white/blacklist.
"""

from __future__ import annotations

import os
from typing import Any, Callable

from twisted.internet import defer

from carbon.aggregator.buffers import BufferManager
from carbon.aggregator.processor import AggregationConfig, AggregationProcessor
from carbon.aggregator.rules import RuleSet, RulesFile, parse_rules, reload_rules
from carbon.daemon.base import Composition, Daemon, log_lines
from carbon.daemon.cache import CacheDaemon
from carbon.instrumentation.reporter import Reporter
from carbon.pipeline import Batch, Processor
from carbon.relay.sink import RelaySink, relay_extra
from carbon.rewrite import RewriteProcessor, RewriteRulesFile


class AggregationStages:
    """The rewrite and aggregate processors plus their rule files, shared by both daemons."""

    def __init__(self, settings: Any, stats: Any, log: Any) -> None:
        self.settings = settings
        self.log = log
        cache_size = int(settings["AGGREGATION_RULE_CACHE_SIZE"])
        rules_path = settings.get("aggregation-rules") or os.path.join(
            settings.CONF_DIR, settings.AGGREGATION_RULES)
        rewrite_path = settings.get("rewrite-rules") or os.path.join(
            settings.CONF_DIR, settings.REWRITE_RULES)
        if os.path.exists(rules_path):
            self.rules_file: RulesFile | None = RulesFile(rules_path, cache_size)
            ruleset = self.rules_file.ruleset
        else:
            log.aggregator("%s not found, no aggregation rules" % rules_path)
            self.rules_file = None
            ruleset = parse_rules("", rules_path, cache_size)
        log.aggregator("loaded %d aggregation rules from %s" % (len(ruleset.rules), rules_path))
        self.rewrite_file = RewriteRulesFile(rewrite_path)
        for error in self.rewrite_file.rules.errors:
            log.aggregator("rewrite rule skipped: %s" % error)
        self.pre = RewriteProcessor(self.rewrite_file.rules, "pre")
        self.post = RewriteProcessor(self.rewrite_file.rules, "post")
        self.buffers = BufferManager.from_settings(settings)
        self.aggregate = AggregationProcessor(ruleset, self.buffers,
                                              AggregationConfig.from_settings(settings), stats,
                                              log=log.aggregator)

    @property
    def ruleset(self) -> RuleSet:
        return self.aggregate.ruleset

    def processors(self) -> list[Processor]:
        return [self.pre, self.aggregate, self.post]

    def check_files(self, force: bool = False) -> None:
        """Reload changed rule files (by mtime, as carbon 1.1.10 polls them); ``force``
        (SIGHUP) reads them whatever their mtime and logs only rules that changed. A
        file that does not parse keeps the old rules."""
        said = "SIGHUP: " if force else ""
        if self.rules_file is not None:
            if force:
                new, error = reload_rules(self.rules_file.path, self.rules_file.ruleset)
                changed = error is None and [rule.key for rule in new.rules] != \
                    [rule.key for rule in self.rules_file.ruleset.rules]
                if changed:
                    self.rules_file.ruleset = new
            else:
                changed, error = self.rules_file.check()
            if error is not None:
                self.log.aggregator("%skeeping previous aggregation rules: %s" % (said, error))
            if changed:
                self.aggregate.set_ruleset(self.rules_file.ruleset)
                self.log.aggregator("%sreloaded %d aggregation rules"
                                    % (said, len(self.rules_file.ruleset.rules)))
        changed, errors = self.rewrite_file.check(force)
        for error in errors:
            self.log.aggregator("%srewrite rules: %s" % (said, error))
        if changed:
            self.pre.set_rules(self.rewrite_file.rules)
            self.post.set_rules(self.rewrite_file.rules)
            self.log.aggregator("%sreloaded rewrite rules (%d)" % (said, sum(
                len(rules) for rules in self.rewrite_file.rules.sections.values())))

    def gauges(self) -> dict[str, Callable[[], float]]:
        settle = self.aggregate.settle  # staged values count as buffered
        return {"allocatedBuffers": lambda: (settle(), len(self.buffers))[1],
                "bufferedDatapoints": lambda: (settle(), self.buffers.buffered_datapoints())[1]}


def aggregator_extra(counters: dict[str, float], samples: dict[str, Any],
                     record: Callable[[str, float], None]) -> None:
    record("aggregateDatapointsSent", counters.get("aggregateDatapointsSent", 0))
    for name in ("aggregateDatapointsTooLate", "aggregateDatapointsInvalid"):
        if counters.get(name):
            record(name, counters[name])
    relay_extra(counters, samples, record)


class AggregationTicks:
    """Mixin: emit due aggregates every second, poll rule files (SIGHUP: ``reload``)."""

    aggregation_stages: AggregationStages
    reactor: Any
    every: Callable[..., None]

    def start_aggregation(self, put_many: Callable[[Batch], None]) -> None:
        self._put_aggregates = put_many
        self.every(1, self.tick)
        self.every(10, self.aggregation_stages.check_files)

    def tick(self, force: bool = False) -> None:
        batch = self.aggregation_stages.aggregate.flush(self.reactor.seconds(), force)
        if batch:
            self._put_aggregates(batch)


class AggregatorDaemon(AggregationTicks, Daemon):
    """carbon-aggregator: aggregates leave through the relay's routing and clients."""

    metric_kind = "aggregator"

    def stages(self) -> Composition:
        """[white/blacklist] -> rewrite [pre] -> aggregate -> rewrite [post] -> RelaySink."""
        # carbon 1.1.10 always routes aggregator output by consistent hashing.
        self.settings["RELAY_METHOD"] = "consistent-hashing"
        self.relay = RelaySink.from_settings(self.settings, self.flow, self.stats, self.reactor,
                                             log=self.log)
        self.aggregation_stages = AggregationStages(self.settings, self.stats, self.log)
        return Composition(receivers=self.listeners(),
                           processors=self.lists() + self.aggregation_stages.processors(),
                           sink=self.relay)

    def make_reporter(self) -> Reporter:
        gauges: dict[str, Callable[[], float]] = {
            "activeConnections": lambda: len(self.receivers.connections)}
        gauges.update(self.aggregation_stages.gauges())
        gauges.update(self.relay.gauges())
        return Reporter(self.reporter_config(), self.stats, self.pipeline.process,
                        gauges=gauges, extra=aggregator_extra)

    def start_sink(self) -> None:
        self.relay.start()
        self.start_aggregation(self.relay.put_many)

    def reload(self) -> list[str]:
        """SIGHUP (carbon.daemon.cli): the rule files whatever their mtime, and the
        white/blacklist. (carbon-aggregator-cache: CacheDaemon.reload, with
        ``reload_rules`` below.)"""
        self.aggregation_stages.check_files(force=True)
        lines: list[str] = []
        self.reload_lists(log_lines(lines, self.log))
        return lines

    @defer.inlineCallbacks
    def stop_sink(self) -> Any:
        self.tick(force=True)
        yield self.relay.stop()


class AggregatorCacheDaemon(AggregationTicks, CacheDaemon):
    """carbon-aggregator-cache: aggregates (and FORWARD_ALL inputs) go to the cache."""

    def aggregation(self) -> list[Processor]:
        """Between the white/blacklist and the cache: rewrite [pre] -> aggregate ->
        rewrite [post]."""
        self.aggregation_stages = AggregationStages(self.settings, self.stats, self.log)
        return self.aggregation_stages.processors()

    def reload_rules(self) -> None:
        """SIGHUP: the aggregation and rewrite rules whatever their mtime."""
        self.aggregation_stages.check_files(force=True)

    def make_reporter(self) -> Reporter:
        reporter = super().make_reporter()
        reporter.gauges.update(self.aggregation_stages.gauges())
        return reporter

    def start_sink(self) -> None:
        super().start_sink()
        self.start_aggregation(self.cache_sink.put_many)

    def stop_sink(self) -> Any:
        self.tick(force=True)
        return super().stop_sink()
