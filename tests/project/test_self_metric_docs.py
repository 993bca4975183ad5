"""Every self-metric carbon 1.1.10 does not have is listed, with its meaning, in README."""

from __future__ import annotations

import re
from collections import Counter

from carbon.daemon.aggregator import aggregator_extra
from carbon.config.settings import Settings
from carbon.instrumentation.reporter import Reporter, ReporterConfig, cache_extra
from carbon.instrumentation.stats import Sample, Stats
from tests.support import ROOT

# carbon 1.1.10's own self-metric names (carbon/instrumentation.py, client.py, aggregator)
REFERENCE = {
    "metricsReceived", "blacklistMatches", "whitelistRejects", "cpuUsage", "memUsage",
    "avgUpdateTime", "pointsPerUpdate", "updateOperations", "committedPoints", "creates",
    "droppedCreates", "errors", "cache.queries", "cache.bulk_queries", "cache.overflow",
    "cache.bulk_queries_average_size", "cache.size", "cache.queues", "activeConnections",
    "aggregateDatapointsSent", "allocatedBuffers", "bufferedDatapoints",
    "destinations.*.sent", "destinations.*.batchesSent", "destinations.*.attemptedRelays",
    "destinations.*.queuedUntilConnected", "destinations.*.queuedUntilReady",
    "destinations.*.relayMaxQueueLength", "destinations.*.fullQueueDrops",
    "destinations.*.slowConnectionReset",
}
DESTINATION_KEYS = ["sent", "batchesSent", "attemptedRelays", "queuedUntilConnected",
                    "queuedUntilReady", "relayMaxQueueLength", "fullQueueDrops", "spooled",
                    "dropped", "replayed", "queued", "spool"]


def readme_table() -> dict[str, str]:
    text = (ROOT / "README.md").read_text()
    section = text.split("### Self-metrics carbon 1.1.10 does not have", 1)[1].split("\n#", 1)[0]
    rows = re.findall(r"^\| `([^`]+)` \| [^|]+ \| ([^|]+) \|$", section, re.M)
    return {name.replace("<dest>", "*"): meaning.strip() for name, meaning in rows}


def emitted() -> set[str]:
    names: list[str] = []

    def record(name: str, _value: float) -> None:
        names.append(re.sub(r"^destinations\.[^.]+\.", "destinations.*.", name))

    counters = Counter({key: 1 for key in (
        "committedPoints", "creates", "droppedCreates", "deferredCreates", "errors",
        "cacheQueries", "cacheBulkQueries", "cache.overflow", "aggregateDatapointsSent",
        "aggregateDatapointsTooLate", "aggregateDatapointsInvalid", "relayUnroutable",
        "tagRetryDropped")})
    counters.update({"destinations.d1.%s" % key: 1 for key in DESTINATION_KEYS})
    samples = {"updateTimes": Sample(1, 0.1), "cacheBulkQuerySize": Sample(1, 3)}
    cache_extra(counters, samples, record)
    aggregator_extra(counters, samples, record)
    reporter = Reporter(ReporterConfig.from_settings(Settings(CARBON_METRIC_PREFIX="carbon"),
                                                     "agents"), Stats(),
                        lambda batch: None)
    names += [name.rsplit(".", 1)[-1] for name, _t, _v in reporter.report()]
    return set(names)


def test_every_extra_self_metric_is_in_the_readme_with_a_meaning() -> None:
    table = readme_table()
    extra = emitted() - REFERENCE
    assert extra, "nothing beyond the reference's names?"
    assert extra <= set(table), sorted(extra - set(table))
    assert all(len(meaning) > 15 for meaning in table.values()), table
    # and the README lists nothing carbon already has, nor anything we never send
    assert not set(table) & REFERENCE
    source = "".join(p.read_text() for p in (ROOT / "carbon").rglob("*.py"))
    for name in table:
        assert name.rsplit(".", 1)[-1] in source, name
