"""What every daemon shares: receivers -> pipeline -> sink, self-metrics, shutdown."""

from __future__ import annotations

import gc
import os
from dataclasses import dataclass, field
from typing import Any, Callable

from twisted.internet import defer, task

from carbon.config.errors import ConfigError
from carbon.config.patternlist import PatternList
from carbon.config.settings import Settings
from carbon.daemon.manhole import listen_manhole, manhole_receiver
from carbon.instrumentation.reporter import Reporter, ReporterConfig
from carbon.instrumentation.stats import Stats
from carbon.logs import CarbonLog
from carbon.pipeline import Pipeline, Processor, Sink
from carbon.processors.filters import ListFilter
from carbon.receivers.context import ReceiverConfig, ReceiverContext
from carbon.receivers.drain import accept_waiting, drain_connections
from carbon.flow import FlowControl
from carbon.receivers.limits import release_reserved_descriptor
from carbon.receivers.listeners import TCP_PROTOCOLS, ReceiverSpec, listen, metric_listeners

Opener = Callable[[ReceiverSpec], Any]
# Listeners that serve the sink rather than feed it (carbonlink): listed first, opened by
# the sink's start once it can answer (before the receiver connection limit is worked
# out), closed by the sink once it drained.
SINK_KINDS = ("carbonlink",)


# A receiver's read where a C stage takes whole reads (the relay's router, carbon-cache's
# sink): one call per read (Twisted's default is 64 KiB).
WHOLE_READ_BYTES = 256 * 1024

# The young-generation collection threshold of a daemon's data path (CPython's default
# is 700 net allocations). Points in flight are short-lived tuples and lists (pickle
# messages, batches, a create batch's requests): at the default a collection ran every
# few hundred points and scanned what was still queued (~12% of the CPU of pickle
# relaying; ~10% of the cache's creator thread making 100,000 files). The daemons hold
# few long-lived container objects, so they collect rarely.
GC_THRESHOLD = 20000


def collect_rarely() -> None:
    """Raise the young-generation threshold to GC_THRESHOLD (never lower it)."""
    threshold = gc.get_threshold()
    gc.set_threshold(max(threshold[0], GC_THRESHOLD), *threshold[1:])

@dataclass(frozen=True)
class Composition:
    """A daemon as a list of stages: ``receivers`` (opened by ``Daemon.start`` in this
    order) read points (``read_size``: bytes a read, None for Twisted's default) that
    go through ``processors`` in order into ``sink``. Built once, by the daemon's
    ``stages``; nothing rewrites it afterwards."""

    receivers: list[ReceiverSpec]
    processors: list[Processor]
    sink: Sink
    read_size: int | None = field(default=None)


class Daemon:
    """A daemon is a composition of shared stages.

    Subclasses list their stages (``stages``: processors in order, then the sink) and
    say how self-metrics are reported (``make_reporter``). ``start`` opens the ports;
    ``shutdown`` (a 'before shutdown' trigger) stops input and lets the sink persist
    what it holds; ``reload`` (SIGHUP, if the class has one) is beside the stages.
    """

    metric_kind = "agents"

    def __init__(self, settings: Settings, log: CarbonLog, reactor: Any) -> None:
        self.settings = settings
        self.log = log
        self.reactor = reactor
        self.stats = Stats()
        self.flow = FlowControl(bool(settings.USE_FLOW_CONTROL))
        self.loops: list[task.LoopingCall] = []
        self.ports: list[Any] = []
        # what senders connect to with metrics (line and pickle TCP ports, a RELAY_WORKERS
        # worker's hand-off channel): accepted until empty before the ports close
        self.accepting: list[Any] = []
        self.list_filter = self._make_list_filter()
        self.composition = self.stages()
        self.sink = self.composition.sink
        self.pipeline = Pipeline(list(self.composition.processors), self.sink)
        self.receivers = ReceiverContext(ReceiverConfig.from_settings(settings), self.pipeline,
                                         self.stats, self.flow, log)
        if self.composition.read_size is not None:
            self.receivers.read_size = self.composition.read_size
        self.reporter = self.make_reporter()

    # -- parts subclasses provide ---------------------------------------
    def stages(self) -> Composition:
        """The daemon's receivers, its processors in order, and its sink."""
        raise NotImplementedError

    def listeners(self) -> list[ReceiverSpec]:
        """The receivers carbon.conf asks for, in the order they open: line, pickle, UDP
        (a port of 0 or ENABLE_UDP_LISTENER off leaves one out), the manhole
        (ENABLE_MANHOLE), AMQP (ENABLE_AMQP)."""
        settings = self.settings
        receivers = metric_listeners(settings)
        if settings["ENABLE_MANHOLE"]:
            receivers.append(manhole_receiver(settings))
        if settings["ENABLE_AMQP"]:
            from carbon.receivers.amqp import amqp_receiver  # txAMQP only when used

            receivers.append(amqp_receiver(settings))
        return receivers

    def openers(self) -> dict[str, Opener]:
        """How each kind of receiver opens; returns what ``stop_input`` closes (None:
        the kind closes itself, as AMQP at shutdown)."""
        def metrics(spec: ReceiverSpec) -> Any:
            return listen(self.reactor, self.receivers, spec)

        def manhole(spec: ReceiverSpec) -> Any:
            return listen_manhole(self.reactor, spec, {"daemon": self, "settings": self.settings})

        def amqp(spec: ReceiverSpec) -> None:
            from carbon.receivers.amqp import start_amqp_listener

            self.amqp = start_amqp_listener(self.reactor, self.receivers, spec)

        return {"line": metrics, "pickle": metrics, "udp": metrics, "manhole": manhole,
                "amqp": amqp}

    def lists(self) -> list[Processor]:
        """The white/blacklist stage (USE_WHITELIST), first in every daemon's list."""
        return [self.list_filter] if self.list_filter is not None else []

    def reporter_config(self) -> ReporterConfig:
        """The self-metrics' config (prefix ``carbon.<metric_kind>.<host>-<instance>``)."""
        return ReporterConfig.from_settings(self.settings, self.metric_kind)

    def make_reporter(self) -> Reporter:
        return Reporter(self.reporter_config(), self.stats, self.pipeline.process,
                        gauges={"activeConnections": lambda: len(self.receivers.connections)})

    def _make_list_filter(self) -> ListFilter | None:
        settings = self.settings
        if not settings.USE_WHITELIST:
            return None
        conf_dir = settings.get("CONF_DIR", ".")
        white = settings.get("whitelist") or os.path.join(conf_dir, "whitelist.conf")
        black = settings.get("blacklist") or os.path.join(conf_dir, "blacklist.conf")
        return ListFilter(PatternList(white), PatternList(black), self.stats)

    # -- lifecycle ------------------------------------------------------
    def every(self, seconds: float, func: Any, *args: Any) -> None:
        loop = task.LoopingCall(func, *args)
        loop.clock = self.reactor
        self.loops.append(loop)
        loop.start(seconds, now=False)

    def start(self) -> None:
        """Start the sink's services, then the receivers, then periodic tasks."""
        self.start_sink()  # opens the sink's own listeners (SINK_KINDS) when ready for them
        self.receivers.limit.plan(self.descriptor_claims())
        self.open_receivers()
        interval = float(self.settings.CARBON_METRIC_INTERVAL or 0)
        if interval > 0:
            self.every(interval, self.reporter.report)
        self.every(float(self.settings["BAD_LINE_LOG_INTERVAL"]), self.flush_logs)
        if self.list_filter is not None:
            self.every(10, self.list_filter.reload)
        self.reactor.addSystemEventTrigger("before", "shutdown", self.shutdown)

    def open_receivers(self, sink_side: bool = False) -> None:
        """Open the receivers of ``composition.receivers``, in their order: those that
        feed the pipeline, or (``sink_side``) the sink's own listeners (SINK_KINDS),
        which ``start_sink`` opens once the sink can answer."""
        openers = self.openers()
        for spec in self.composition.receivers:
            if (spec.kind in SINK_KINDS) == sink_side:
                port = openers[spec.kind](spec)
                if port is not None:
                    self.ports.append(port)
                    if spec.kind in TCP_PROTOCOLS:
                        self.accepting.append(port)

    def start_sink(self) -> None:
        """Start whatever the sink needs (writer thread, destination clients)."""

    def descriptor_claims(self) -> int:
        """Descriptors the sink may still open besides receiver connections (the
        receivers leave them free; see ``carbon.receivers.limits``)."""
        return 0

    def flush_logs(self) -> None:
        self.receivers.flush_logs()

    def stop_input(self) -> defer.Deferred[Any]:
        """Stop accepting and reading: pause live connections, accept the connections
        waiting in the TCP ports' listen backlogs (closing a port would reset them, and
        lose what their senders wrote), close listening ports, read what every connection
        holds."""
        self.flow.enabled = True
        self.flow.pause("shutdown")
        for loop in self.loops:
            if loop.running:
                loop.stop()
        opened = self.receivers.opened
        for port in self.accepting:
            accept_waiting(port)
        if self.receivers.opened > opened:
            self.log.msg("Accepted %d connections waiting in the listen backlog at shutdown; "
                         "reading them before exit" % (self.receivers.opened - opened))
        closing = [defer.maybeDeferred(port.stopListening) for port in self.ports]
        # Twisted's EMFILE reserve (/dev/null) goes once no port listens any more
        closed = defer.DeferredList(closing)
        closed.addCallback(lambda _: release_reserved_descriptor())
        # What senders already wrote is read before their connections close.
        waits = [closed, drain_connections(
            self.receivers.connections, self.reactor,
            limit=float(self.settings["RECEIVER_SHUTDOWN_DRAIN_SECONDS"]))]
        return defer.DeferredList(waits)

    @defer.inlineCallbacks
    def shutdown(self) -> Any:
        yield self.stop_input()
        yield self.stop_sink()
        self.log.msg("%s shut down cleanly" % self.settings.get("program", "carbon"))

    def stop_sink(self) -> defer.Deferred[Any]:
        return defer.succeed(None)

    # -- SIGHUP ---------------------------------------------------------
    def reload(self) -> list[str]:
        """SIGHUP (carbon.daemon.cli): re-read what the daemon can change while it runs;
        returns the log lines written (one per change). Here: the white/blacklist."""
        lines: list[str] = []
        self.reload_lists(log_lines(lines, self.log))
        return lines

    def reload_lists(self, say: Callable[[str], None]) -> None:
        """Re-read the whitelist and blacklist (USE_WHITELIST) if their files changed."""
        list_filter = self.list_filter
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


def log_lines(lines: list[str], log: Any) -> Callable[[str], None]:
    """A ``say`` that logs a line and keeps it in ``lines`` (a reload's return value)."""
    def say(line: str) -> None:
        lines.append(line)
        log.msg(line)
    return say
