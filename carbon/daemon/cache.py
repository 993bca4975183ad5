"""carbon-cache: receivers -> cache -> writer thread -> whisper, plus carbonlink; its
SIGHUP reload (``CacheDaemon.reload``)."""

from __future__ import annotations

import os
import pwd
import sys
from typing import Any

from twisted.internet import defer, task, threads
from twisted.python import failure

from carbon.cache.journal import Journal, JournalConfig
from carbon.cache.sink import CacheSink, CacheSinkConfig
from carbon.cache.store import MetricCache
from carbon.cache.strategies import Strategy, StrategyConfig, make_strategy
from carbon.carbonlink.server import CarbonLinkConfig, CarbonLinkFactory, CarbonLinkHandler
from carbon.config.errors import ConfigError
from carbon.config.schemas import SchemaFiles
from carbon.config.loader import load_settings
from carbon.daemon.base import (WHOLE_READ_BYTES, Composition, Daemon, Opener, collect_rarely,
                                log_lines)
from carbon.daemon.notify import notify
from carbon.instrumentation.reporter import Reporter, cache_extra
from carbon.pipeline import Batch, Processor
from carbon.plugins import RATE_LIMITERS, WRITE_STRATEGIES
from carbon.receivers.limits import GuardedPort, listen_tcp
from carbon.receivers.listeners import ReceiverSpec
from carbon.storage.backend import open_database
from carbon.writer.tagfeed import TagFeed, TagFeedConfig
from carbon.writer.schemacheck import SchemaCheck
from carbon.writer.writer import Writer, WriterConfig

SWITCH_INTERVAL = 0.001
# While the cache drains at shutdown under systemd: every DRAIN_STATUS_SECONDS the unit's
# status says what is left, and while the drain makes progress its stop timeout is pushed
# to DRAIN_EXTEND_SECONDS from then (EXTEND_TIMEOUT_USEC), so a drain longer than
# TimeoutStopSec still finishes and only a stuck one is killed (its points are in the
# journal).
DRAIN_STATUS_SECONDS = 5.0
DRAIN_EXTEND_SECONDS = 60.0
# The keys a SIGHUP reads again from carbon.conf (CacheDaemon.reload).
RELOADABLE = ("MAX_UPDATES_PER_SECOND", "MAX_CREATES_PER_MINUTE", "CACHE_WRITE_STRATEGY",
              "MAX_CACHE_SIZE")
INF = float("inf")


class CacheDaemon(Daemon):
    """Stores received points in the cache and writes them to the database."""

    metric_kind = "agents"
    syncing: defer.Deferred[None] | None = None  # a journal fdatasync under way
    carbonlink_port: GuardedPort | None = None  # with CACHE_QUERY_PORT
    # the parts' typed configs, each built once from the settings (make_cache_sink)
    strategy_config: StrategyConfig
    writer_config: WriterConfig
    carbonlink_config: CarbonLinkConfig
    tag_feed_config: TagFeedConfig | None  # with ENABLE_TAGS

    def stages(self) -> Composition:
        """carbon-cache: [carbonlink (CACHE_QUERY_PORT), receivers] -> [white/blacklist]
        -> cache (written by the writer thread); carbon-aggregator-cache puts its
        aggregation stages between them. With no stage the cache sink takes whole reads
        (one C pass a read: carbon.cache.sink), of WHOLE_READ_BYTES."""
        sink = self.make_cache_sink()
        processors = self.lists() + self.aggregation()
        whole = not processors and sink.accepts_chunks
        return Composition(receivers=self.query_listeners() + self.listeners(),
                           processors=processors, sink=sink,
                           read_size=WHOLE_READ_BYTES if whole else None)

    def query_listeners(self) -> list[ReceiverSpec]:
        """Carbonlink on CACHE_QUERY_INTERFACE:CACHE_QUERY_PORT (0: none)."""
        carbonlink = self.carbonlink_config
        if not carbonlink.port:
            return []
        return [ReceiverSpec("carbonlink", carbonlink.interface, carbonlink.port,
                             carbonlink.backlog)]

    def openers(self) -> dict[str, Opener]:
        """Besides the metric receivers: carbonlink, on the handler ``start_sink`` made
        (which opens it); it stays open until the cache has drained (``stop_sink``
        closes it)."""
        def carbonlink(spec: ReceiverSpec) -> None:
            self.carbonlink_port = listen_tcp(
                self.reactor, spec.port, CarbonLinkFactory(self.carbonlink_handler),
                backlog=spec.backlog, interface=spec.interface)

        return {**super().openers(), "carbonlink": carbonlink}

    def aggregation(self) -> list[Processor]:
        """carbon-aggregator-cache's aggregation stages (none in carbon-cache)."""
        return []

    def make_cache_sink(self) -> CacheSink:
        """The cache, its storage backend, write strategy, writer (and creator), journal
        and sink; each part gets its typed config, built here from the settings."""
        settings = self.settings
        strategy_name = settings.CACHE_WRITE_STRATEGY
        if strategy_name not in WRITE_STRATEGIES:
            raise ConfigError("%s is not a valid value for CACHE_WRITE_STRATEGY (known: %s)"
                              % (strategy_name, ", ".join(WRITE_STRATEGIES.names())),
                              settings.get("config_file"), key="CACHE_WRITE_STRATEGY")
        self.log.msg("Using %s write strategy for cache" % strategy_name)
        RATE_LIMITERS.resolve(settings["RATE_LIMITER"], "RATE_LIMITER",
                              settings.get("config_file"))
        self.strategy_config = StrategyConfig.from_settings(settings)
        self.writer_config = WriterConfig.from_settings(settings)
        self.carbonlink_config = CarbonLinkConfig.from_settings(settings)
        self.tag_feed_config = TagFeedConfig.from_settings(settings) \
            if settings.ENABLE_TAGS else None
        self.cache = MetricCache()
        self.database = open_database(settings)
        self.schemas = SchemaFiles(settings.get("CONF_DIR") or ".")
        for warning in self.schemas.warnings:
            self.log.msg(warning)
        self.strategy = self.make_strategy(strategy_name)
        self.writer = Writer(self.cache, self.strategy, self.database, self.schemas,
                             self.writer_config, self.stats, self.log)
        if self.database.capabilities.whisper_files:
            self.writer.schema_check = SchemaCheck(
                self.database.get_filesystem_path, self.schemas, self.log.msg,
                limit=self.writer_config.known_files)
        self.journal = self.make_journal(JournalConfig.from_settings(settings))
        self.writer.journal = self.journal
        self.cache_sink = CacheSink(self.cache, CacheSinkConfig.from_settings(settings),
                                    self.stats, self.flow, self.log, journal=self.journal)
        return self.cache_sink

    def make_strategy(self, name: str) -> Strategy:
        """The write strategy ``name`` (CACHE_WRITE_STRATEGY; a SIGHUP may change it)."""
        return make_strategy(name, self.cache, self.strategy_config, self.log)

    def make_journal(self, config: JournalConfig) -> Journal | None:
        """The journal (CACHE_JOURNAL), its segments owned by USER when root starts it."""
        if not config.enabled:
            return None
        settings = self.settings
        owner = None
        if settings.USER and os.getuid() == 0:  # the daemon drops to USER once started
            user = pwd.getpwnam(settings.USER)
            owner = (user.pw_uid, user.pw_gid)
        return Journal.configured(config, self.cache, self.log, owner)

    def make_reporter(self) -> Reporter:
        def emit(batch: Batch) -> None:
            self.cache_sink.store_internal(batch)

        return Reporter(self.reporter_config(), self.stats, emit, gauges={
            "cache.size": lambda: self.cache.size,
            "cache.queues": lambda: len(self.cache),
            "activeConnections": lambda: len(self.receivers.connections),
            "cache.journal.bytes": lambda: self.journal.size if self.journal else 0,
        }, extra=cache_extra)

    def start_sink(self) -> None:
        collect_rarely()
        journal = self.journal
        if journal is not None:
            journal.open()  # replays what an earlier run left, before anything listens
            self.every(0.5, self.cache_sink.check_journal)
            if journal.fsync_interval > 0:
                self.every(journal.fsync_interval, self.sync_journal)
        handler = CarbonLinkHandler(self.cache, self.database, self.carbonlink_config,
                                    self.stats, self.log, writer=self.writer)
        self.carbonlink_handler = handler
        self.open_receivers(sink_side=True)  # carbonlink (CACHE_QUERY_PORT), as listed
        if self.tag_feed_config is not None:
            self.writer.tag_feed = TagFeed(self.tag_feed_config, self.log, self.stats)
            self.writer.tag_feed.start()
        # The reactor, writer and creator threads hand the GIL to each other around every
        # file-system call; a thread back from one waits for the switch interval before a
        # busy thread lets go. 1 ms instead of 5 ms: ~10% faster end to end when filling
        # new files (docs/performance.md).
        sys.setswitchinterval(SWITCH_INTERVAL)
        self.writer.start()
        if self.writer.schema_check is not None:
            self.writer.schema_check.start()
        self.every(0.05, self.cache_sink.check_space)
        self.every(60, self.reload_schemas)

    def descriptor_claims(self) -> int:
        """The whisper descriptor cache's room (it opens files as it writes)."""
        return self.database.descriptor_capacity

    def flush_logs(self) -> None:
        """One summary line per interval for every bounded log of the cache daemon."""
        super().flush_logs()
        self.cache_sink.overflow_log.flush()
        self.cache_sink.bad_names.flush()
        self.writer.errors.flush()
        self.writer.disk_errors.flush()
        if self.writer.schema_check is not None:
            self.writer.schema_check.flush()
        self.cache_sink.journal_log.flush()
        if self.writer.tag_feed is not None:
            self.writer.tag_feed.errors.flush()
            self.writer.tag_feed.retry_full.flush()

    def sync_journal(self) -> Any:
        """fdatasync the journal on a pool thread (one at a time)."""
        if self.syncing is not None or self.journal is None:
            return None
        self.syncing = threads.deferToThread(self.journal.sync)

        def finished(result: Any) -> None:
            self.syncing = None
            if isinstance(result, failure.Failure):
                self.log.msg("Journal sync failed: %s" % result.getErrorMessage())

        self.syncing.addBoth(finished)
        return None

    def reload_schemas(self) -> None:
        problem = self.schemas.reload_if_changed()
        if problem:
            self.log.msg(problem)

    def watch_drain(self) -> task.LoopingCall:
        """Tell systemd how the shutdown drain goes (nothing is sent outside systemd)."""
        last = [self.cache.size]

        def tick() -> None:
            size = self.cache.size
            notify("STATUS=Draining %d datapoints to disk" % size)
            if size < last[0]:
                notify("EXTEND_TIMEOUT_USEC=%d" % int(DRAIN_EXTEND_SECONDS * 1e6))
            last[0] = size

        loop = task.LoopingCall(tick)
        loop.clock = self.reactor
        loop.start(DRAIN_STATUS_SECONDS, now=False)
        return loop

    @defer.inlineCallbacks
    def stop_sink(self) -> Any:
        port = self.carbonlink_port
        self.writer.stop_event.set()
        if self.writer.schema_check is not None:
            self.writer.schema_check.stop()
        yield threads.deferToThread(self.writer.stop, 5.0)
        journal = self.journal
        if self.syncing is not None:
            yield self.syncing
        if journal is not None and not self.settings.SHUTDOWN_DRAIN_CACHE:
            journal.close(remove=self.cache.is_empty())
            self.log.msg("Journal flushed with %d datapoints of %d metrics in the cache: "
                         "the next start writes them (SHUTDOWN_DRAIN_CACHE = False)"
                         % (self.cache.size, len(self.cache)))
        else:
            self.log.msg("Draining %d datapoints of %d metrics to disk before exit"
                         % (self.cache.size, len(self.cache)))
            watch = self.watch_drain()
            try:
                drained = yield threads.deferToThread(self.writer.drain)
            finally:
                watch.stop()
            if not drained:
                self.log.msg("Could not write %d datapoints before exit" % self.cache.size)
            if journal is not None:
                journal.close(remove=drained and self.cache.is_empty())
        if port is not None:
            yield defer.maybeDeferred(port.stopListening)
        self.database.close()

    # -- SIGHUP ---------------------------------------------------------
    def reload(self) -> list[str]:
        """SIGHUP: MAX_UPDATES_PER_SECOND, MAX_CREATES_PER_MINUTE, CACHE_WRITE_STRATEGY
        and MAX_CACHE_SIZE read again from carbon.conf and applied to the running writer
        and cache sink, the storage schemas (and carbon-aggregator-cache's rule files)
        re-read, and the white/blacklist. Returns the log lines written (one per changed
        value or file); a file that no longer parses keeps what runs and says why."""
        settings = self.settings
        lines: list[str] = []
        say = log_lines(lines, self.log)
        try:
            fresh = load_settings(settings["program"], settings.get("instance"),
                                  settings["config_file"], settings.get("GRAPHITE_ROOT"))
        except ConfigError as exc:
            say("SIGHUP: kept the running settings: %s" % exc)
            fresh = None
        if fresh is not None:
            # derived from MAX_UPDATES_PER_SECOND unless set: follows it silently
            settings["MAX_UPDATES_PER_SECOND_ON_SHUTDOWN"] = \
                fresh.MAX_UPDATES_PER_SECOND_ON_SHUTDOWN
            for key in RELOADABLE:
                old, new = settings[key], fresh[key]
                if old == new:
                    continue
                problem = self.apply_setting(key, new)
                if problem:
                    say("SIGHUP: kept %s = %s: %s" % (key, old, problem))
                    continue
                settings[key] = new
                say("SIGHUP: %s changed from %s to %s" % (key, old, new))
            # the rates a shutdown drain uses follow (the limiters have theirs already)
            self.writer_config = self.writer.config = WriterConfig.from_settings(settings)
        schemas = self.schemas
        before = (schemas.storage, schemas.aggregation)
        problem = schemas.reload_if_changed()
        if problem:
            say("SIGHUP: %s" % problem)
        elif (schemas.storage, schemas.aggregation) != before:
            say("SIGHUP: reloaded storage schemas (%d) and aggregation schemas (%d)"
                % (len(schemas.storage), len(schemas.aggregation)))
        self.reload_rules()
        self.reload_lists(say)
        return lines

    def reload_rules(self) -> None:
        """carbon-aggregator-cache re-reads its rule files here (carbon-cache has none)."""

    def apply_setting(self, key: str, value: Any) -> str | None:
        """Put one new value of RELOADABLE into the running parts; a reason when it
        cannot be used."""
        writer = self.writer
        if key == "MAX_UPDATES_PER_SECOND":
            writer.set_update_rate(float(value))
        elif key == "MAX_CREATES_PER_MINUTE":
            per_minute = float(value)
            writer.create_limiter.set_rate(per_minute, per_minute / 60.0 if per_minute != INF
                                           else INF)
        elif key == "CACHE_WRITE_STRATEGY":
            if value not in WRITE_STRATEGIES:
                return "unknown write strategy %r (known: %s)" % (
                    value, ", ".join(WRITE_STRATEGIES.names()))
            strategy = self.make_strategy(value)
            with writer.choose_lock:
                strategy.skip = writer.strategy.skip  # metrics the writer cannot take now
                writer.strategy = strategy
            self.strategy = strategy
        elif key == "MAX_CACHE_SIZE":
            sink = self.cache_sink
            sink.max_size = float(value)
            sink.low_watermark = float(value) * 0.95
            self.settings["CACHE_SIZE_LOW_WATERMARK"] = sink.low_watermark
            sink.check_space()
        return None
