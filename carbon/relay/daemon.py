"""carbon-relay: receivers -> (whitelist) -> RelaySink -> destinations."""

from __future__ import annotations

from typing import Any

from carbon.daemon.base import Daemon
from carbon.instrumentation.reporter import Reporter
from carbon.relay.linefilter import LineListFilter
from carbon.relay.sink import RelaySink, relay_extra


class RelayDaemon(Daemon):
    """Routes every received batch to DESTINATIONS; self-metrics under carbon.relays.

    With DESTINATION_PROTOCOL = line, reads of canonical lines take the lean path
    (``LineBatch`` through ``Pipeline.process_lines`` to ``RelaySink.put_lines``); the
    white/blacklist is wrapped so that it filters LineBatches too.
    """

    metric_kind = "relays"

    def __init__(self, settings: Any, log: Any, reactor: Any) -> None:
        super().__init__(settings, log, reactor)
        if self.list_filter is not None:
            size = int(settings.get("RELAY_HASH_CACHE_SIZE", 100000) or 0)
            self.pipeline.processors = [
                LineListFilter(p, size) if p is self.list_filter else p
                for p in self.pipeline.processors]

    def make_sink(self) -> RelaySink:
        self.relay = RelaySink(self.settings, self.flow, self.stats, self.reactor, log=self.log)
        return self.relay

    def make_reporter(self) -> Reporter:
        gauges = {"activeConnections": lambda: len(self.receivers.connections)}
        gauges.update(self.relay.gauges())  # destinations.<d>.queued / .spool
        return Reporter(self.settings, self.metric_kind, self.stats, self.pipeline.process,
                        gauges=gauges, extra=relay_extra)

    def start_sink(self) -> None:
        self.relay.start()
        import gc, os
        if os.environ.get("GCF"):
            gc.collect()
            gc.freeze()
        if os.environ.get("GCT"):
            gc.set_threshold(int(os.environ["GCT"]), 10, 10)

    def stop_sink(self) -> Any:
        return self.relay.stop()
