"""carbon-relay: receivers -> (whitelist) -> RelaySink -> destinations."""

from __future__ import annotations

import gc
import signal
from typing import Any

from twisted.internet import defer

from carbon.config.defaults import DEFAULTS
from carbon.daemon.base import Daemon
from carbon.daemon.reload import reload_relay_daemon
from carbon.instrumentation.reporter import Reporter
from carbon.relay.chunks import ChunkStage
from carbon.relay.linefilter import LineListFilter
from carbon.relay.sink import RelaySink, relay_extra
from carbon.relay.workers import WorkerPool, worker_count


GC_THRESHOLD = 20000  # the relay's young-generation collection threshold
READ_BYTES = 256 * 1024  # a receiver's read: one C routing call per read (Twisted: 64 KiB)


class RelayDaemon(Daemon):
    """Routes every received batch to DESTINATIONS; self-metrics under carbon.relays.

    A whole read is routed (and its lines written) in C
    (``carbon.relay.chunks``); else reads of canonical lines take the lean path
    (``LineBatch`` through ``Pipeline.process_lines`` to ``RelaySink.put_lines``); the
    white/blacklist is wrapped so that it filters LineBatches too. With RELAY_WORKERS > 1
    inbound TCP connections are spread over worker processes (``carbon.relay.workers``).
    """

    metric_kind = "relays"

    def __init__(self, settings: Any, log: Any, reactor: Any) -> None:
        self.workers = worker_count(settings)
        self.pool: WorkerPool | None = None
        super().__init__(settings, log, reactor)
        self.receivers.read_size = READ_BYTES
        if self.list_filter is not None:
            size = int(settings.get("RELAY_HASH_CACHE_SIZE",
                                    DEFAULTS["RELAY_HASH_CACHE_SIZE"]) or 0)
            self.pipeline.processors = [
                LineListFilter(p, size) if p is self.list_filter else p
                for p in self.pipeline.processors]

    def make_processors(self) -> list:
        """The whole-read stage last: used when no filter before it changes reads."""
        return [ChunkStage(self.relay)]

    def make_sink(self) -> RelaySink:
        self.relay = RelaySink(self.settings, self.flow, self.stats, self.reactor, log=self.log)
        return self.relay

    def make_reporter(self) -> Reporter:
        gauges = {"activeConnections": lambda: len(self.receivers.connections)}
        gauges.update(self.relay.gauges())  # destinations.<d>.queued / .spool
        return Reporter(self.settings, self.metric_kind, self.stats, self.pipeline.process,
                        gauges=gauges, extra=relay_extra)

    def start_sink(self) -> None:
        # Points in flight are short-lived tuples (pickle messages, tuple batches): at
        # CPython's default of 700 net allocations a young-generation collection runs
        # every few hundred points and scans what is still queued (~12% of the CPU of
        # pickle relaying). The relay holds few long-lived objects, so collect rarely.
        threshold = gc.get_threshold()
        gc.set_threshold(max(threshold[0], GC_THRESHOLD), *threshold[1:])
        self.relay.start()
        if self.workers > 1:
            self.pool = WorkerPool(self.settings, self.workers, self.log, self.reactor,
                                   foreground=self.log.logdir is None)
            self.pool.start()
            self.receivers.hand_off = self.pool.dispatch

    def reload(self) -> None:
        """SIGHUP: a new ring from carbon.conf (swapped in place), the relay rules and
        the white/blacklist (carbon.daemon.reload), in the RELAY_WORKERS processes too."""
        workers = []
        if self.pool is not None:
            for proc, _channel in self.pool.workers.values():
                if proc.poll() is None:
                    proc.send_signal(signal.SIGHUP)
                    workers.append(proc.pid)
        reload_relay_daemon(self, workers)

    def descriptor_claims(self) -> int:
        """A connection and two spool files per destination."""
        return 3 * len(self.relay.clients)

    def stop_sink(self) -> Any:
        waits = [self.relay.stop()]
        if self.pool is not None:
            waits.append(self.pool.stop())
        return defer.gatherResults(waits)
