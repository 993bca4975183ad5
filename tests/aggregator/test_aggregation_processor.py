"""AggregationProcessor: forwarding, self-metrics, reloads."""

from carbon.aggregator.buffers import BufferManager
from carbon.aggregator.processor import MISS_MESSAGE, AggregationConfig, AggregationProcessor
from carbon.aggregator.rules import parse_rules
from carbon.config.settings import Settings
from carbon.instrumentation.stats import Stats

RULES = """\
<env>.all.requests (60) = sum <env>.*.requests
<env>.all.latency (60) = p95 <env>.*.latency
passthrough.self (60) = sum passthrough.self
"""


def make(rules=RULES, log=None, forward_unmatched=None, **overrides):
    settings = Settings(**overrides)
    stats = Stats()
    proc = AggregationProcessor(parse_rules(rules), BufferManager.from_settings(settings),
                                AggregationConfig.from_settings(settings), stats, log=log,
                                forward_unmatched=forward_unmatched)
    return proc, stats


BATCH = [
    ("prod.web1.requests", 960.0, 1.0),
    ("prod.web2.requests", 961.0, 2.0),
    ("prod.web1.latency", 962.0, 0.5),
    ("unrelated.metric", 963.0, 9.0),
    ("passthrough.self", 964.0, 4.0),
]


def test_forward_all_passes_inputs_except_those_named_like_their_aggregate():
    proc, _ = make(FORWARD_ALL=True)
    assert proc.process(list(BATCH)) == BATCH[:4]
    assert sorted(proc.flush(1000)) == [
        ("passthrough.self", 960.0, 4.0),
        ("prod.all.latency", 960.0, 0.5),
        ("prod.all.requests", 960.0, 3.0),
    ]


def test_without_forward_all_only_aggregates_leave_like_the_reference():
    proc, _ = make(FORWARD_ALL=False)
    assert proc.process(list(BATCH)) == []
    assert len(proc.flush(1000)) == 3


def test_forward_unmatched_option_passes_non_matching_points_without_forward_all():
    proc, _ = make(FORWARD_ALL=False, forward_unmatched=True)
    assert proc.process(list(BATCH)) == [("unrelated.metric", 963.0, 9.0)]


def test_misses_are_logged_with_the_reference_text_only_when_enabled():
    lines = []
    proc, _ = make(log=lines.append)
    proc.process(list(BATCH))
    assert lines == [MISS_MESSAGE % "unrelated.metric"]
    assert "Couldn't match metric unrelated.metric" in lines[0]
    lines.clear()
    proc, _ = make(log=lines.append, LOG_AGGREGATOR_MISSES=False)
    proc.process(list(BATCH))
    assert lines == []


def test_self_metrics_use_the_reference_names():
    proc, stats = make()
    proc.process(list(BATCH))
    proc.update_gauges()
    assert stats.get("allocatedBuffers") == 3
    assert stats.get("bufferedDatapoints") == 4
    proc.flush(1000)
    proc.process([("prod.web3.requests", 965.0, 1.0)])
    proc.flush(1060)
    assert stats.get("aggregateDatapointsSent") == 4
    counters, _ = stats.snapshot_and_reset()
    assert counters["bufferedDatapoints"] == 5


def test_too_late_and_invalid_points_are_counted():
    proc, stats = make(MAX_AGGREGATION_INTERVALS=1)
    proc.process([("prod.web1.requests", 960.0, 1.0)])
    for now in (1000, 1060, 1120):
        proc.flush(now)
    late = ("prod.web1.requests", 970.0, 1.0)
    invalid = ("prod.web1.requests", float("nan"), 1.0)
    assert proc.process([late, invalid]) == [late, invalid]  # still forwarded (FORWARD_ALL)
    assert stats.get("aggregateDatapointsTooLate") == 1
    assert stats.get("aggregateDatapointsInvalid") == 1
    assert proc.flush(1180) == []


def test_processor_and_buffer_add_agree():
    proc, _ = make()
    other = BufferManager()
    for metric, ts, value in BATCH:
        for rule, name in proc.ruleset.matches(metric):
            other.add(name, rule, ts, value)
    proc.process(list(BATCH))
    assert sorted(proc.flush(1000)) == sorted(other.flush(1000))


def test_reloaded_identical_rules_keep_aggregating_the_same_interval():
    proc, _ = make()
    proc.process([("prod.web1.requests", 960.0, 1.0)])
    assert proc.flush(1000) == [("prod.all.requests", 960.0, 1.0)]
    proc.set_ruleset(parse_rules(RULES))
    proc.process([("prod.web2.requests", 970.0, 2.0)])
    assert proc.flush(1020) == [("prod.all.requests", 960.0, 3.0)]


def test_empty_ruleset_forwards_per_forward_all():
    proc, _ = make(rules="")
    assert proc.process(list(BATCH)) == BATCH
    proc, _ = make(rules="", FORWARD_ALL=False)
    assert proc.process(list(BATCH)) == []
