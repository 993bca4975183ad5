"""Turns a daemon's per-interval Stats into carbon's self-metrics.

Names follow carbon 1.1.10: ``carbon.agents.<host>-<instance>.*`` for caches,
``carbon.relays.<host>-<instance>.*`` for relays and
``carbon.aggregator.<host>-<instance>.*`` for aggregators.
"""

from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass
from typing import Callable

from carbon.config.settings import Settings
from carbon.instrumentation.stats import Sample, Stats
from carbon.pipeline import Batch

PAGESIZE = os.sysconf("SC_PAGESIZE")


def memory_usage() -> int:
    """Resident bytes of this process (Linux)."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * PAGESIZE


class CpuMeter:
    """CPU usage percent since the previous call."""

    def __init__(self) -> None:
        self.last_cpu = time.process_time()
        self.last_wall = time.time()

    def percent(self) -> float:
        cpu, wall = time.process_time(), time.time()
        used = (cpu - self.last_cpu) / max(wall - self.last_wall, 1e-6) * 100.0
        self.last_cpu, self.last_wall = cpu, wall
        return used


@dataclass(frozen=True)
class ReporterConfig:
    """What the Reporter reads of carbon.conf, built once (``from_settings``): the
    self-metrics' prefix, ``carbon.agents.host-a`` (CARBON_METRIC_PREFIX, the kind:
    agents, relays or aggregator, the host name and the instance)."""

    prefix: str

    @classmethod
    def from_settings(cls, settings: Settings, kind: str) -> ReporterConfig:
        host = socket.gethostname().replace(".", "_")
        instance = settings.get("instance")  # from the command line, not carbon.conf
        name = "%s-%s" % (host, instance) if instance else host
        return cls("%s.%s.%s" % (settings["CARBON_METRIC_PREFIX"], kind, name))


#: a daemon's derived self-metrics: (counters, samples, record(name, value))
Extra = Callable[[dict[str, float], dict[str, Sample], Callable[[str, float], None]], None]


class Reporter:
    """Builds the interval's self-metrics and hands them to ``emit``.

    ``gauges`` are callables evaluated at report time (cache size, connections).
    ``extra`` lets a daemon add its own derived values from the interval's stats.
    """

    def __init__(self, config: ReporterConfig, stats: Stats,
                 emit: Callable[[Batch], None],
                 gauges: dict[str, Callable[[], float]] | None = None,
                 extra: Extra | None = None) -> None:
        self.config = config
        self.prefix = config.prefix
        self.stats = stats
        self.emit = emit
        self.gauges = gauges or {}
        self.extra = extra
        self.cpu = CpuMeter()

    def report(self, now: float | None = None) -> Batch:
        now = time.time() if now is None else now
        counters, samples = self.stats.snapshot_and_reset()
        batch: Batch = []

        def record(name: str, value: float) -> None:
            batch.append(("%s.%s" % (self.prefix, name), now, float(value)))

        for name, gauge in self.gauges.items():
            record(name, gauge())
        if self.extra is not None:
            self.extra(counters, samples, record)
        record("metricsReceived", counters.get("metricsReceived", 0))
        record("blacklistMatches", counters.get("blacklistMatches", 0))
        record("whitelistRejects", counters.get("whitelistRejects", 0))
        record("invalidLines", counters.get("invalidLines", 0))
        record("cpuUsage", self.cpu.percent())
        try:
            record("memUsage", memory_usage())
        except OSError:
            pass
        self.emit(batch)
        return batch


def cache_extra(counters: dict[str, float], samples: dict[str, Sample],
                record: Callable[[str, float], None]) -> None:
    """The cache's derived metrics, with carbon 1.1.10's names and semantics."""
    update_times = samples.get("updateTimes") or Sample()
    committed = counters.get("committedPoints", 0)
    if update_times.count:
        record("avgUpdateTime", update_times.mean())
        if committed:
            record("pointsPerUpdate", committed / update_times.count)
    sizes = samples.get("cacheBulkQuerySize")
    if sizes:
        record("cache.bulk_queries_average_size", sizes.mean())
    record("updateOperations", update_times.count)
    record("committedPoints", committed)
    record("creates", counters.get("creates", 0))
    record("deferredCreates", counters.get("deferredCreates", 0))
    record("errors", counters.get("errors", 0))
    record("cache.queries", counters.get("cacheQueries", 0))
    record("cache.bulk_queries", counters.get("cacheBulkQueries", 0))
    record("cache.overflow", counters.get("cache.overflow", 0))
    if counters.get("tagRetryDropped"):
        record("tagRetryDropped", counters["tagRetryDropped"])
