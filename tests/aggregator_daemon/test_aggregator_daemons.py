"""carbon-aggregator and carbon-aggregator-cache as real processes, our carbon-cache downstream."""

from __future__ import annotations

import os
import signal
import time

import pytest

from tests.support import CarbonInstance, read_whisper, send_tcp, wait_for

FREQ = 5
BASE = (int(time.time()) - 600) // 60 * 60  # a minute boundary ten minutes ago
VALUES = [3.0, 1.0, 4.0, 1.5, 9.0, 2.5, 6.0, 5.0]


def percentile(values: list[float], p: float) -> float:
    """carbon 1.1.10's definition: linear interpolation between closest ranks."""
    ordered = sorted(values)
    k = (len(ordered) - 1) * p / 100.0
    low = int(k)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (k - low)


EXPECTED = {
    "sum": sum(VALUES), "avg": sum(VALUES) / len(VALUES), "min": min(VALUES),
    "max": max(VALUES), "count": float(len(VALUES)), "p50": percentile(VALUES, 50),
    "p90": percentile(VALUES, 90), "p99": percentile(VALUES, 99),
}
RULES = "".join("agg.<app>.all.%s (%d) = %s agg.<app>.*.requests\n" % (m, FREQ, m)
                for m in EXPECTED)


def value_at(instance: CarbonInstance, metric: str, stamp: int) -> float | None:
    return read_whisper(instance.whisper_path(metric), stamp - 1, stamp + FREQ).get(stamp)


def inputs(app: str = "web") -> bytes:
    return b"".join(b"agg.%s.host%d.requests %r %d\n" % (app.encode(), i, v, BASE + 1)
                    for i, v in enumerate(VALUES))


def schemas(instance: CarbonInstance) -> None:
    (instance.conf / "storage-schemas.conf").write_text(
        "[carbon]\npattern = ^carbon\\.\nretentions = 60:1d\n"
        "[all]\npattern = .*\nretentions = %d:1d\n" % FREQ)


@pytest.fixture
def downstream(tmp_path):
    cache = CarbonInstance(tmp_path / "cache")
    schemas(cache)
    cache.start_foreground()
    yield cache
    cache.kill()


def aggregator(tmp_path, downstream, rules: str = RULES, rewrite: str = "",
               **settings) -> CarbonInstance:
    agg = CarbonInstance(tmp_path / "agg", program="carbon-aggregator", section="aggregator",
                         DESTINATIONS="127.0.0.1:%d" % downstream.pickle_port,
                         **settings)
    (agg.conf / "aggregation-rules.conf").write_text(rules)
    (agg.conf / "rewrite-rules.conf").write_text(rewrite)
    return agg


def test_every_method_through_the_relay_into_our_cache(tmp_path, downstream):
    agg = aggregator(tmp_path, downstream)
    agg.start_foreground()
    try:
        send_tcp(agg.line_port, inputs())
        for method, expected in EXPECTED.items():
            metric = "agg.web.all.%s" % method
            got = wait_for(lambda m=metric: value_at(downstream, m, BASE), timeout=30,
                           what=metric)
            assert got == pytest.approx(expected), method
        # FORWARD_ALL (default True): the inputs are relayed too
        wait_for(lambda: value_at(downstream, "agg.web.host0.requests", BASE) == 3.0,
                 what="forwarded input")
    finally:
        agg.kill()


def test_forward_all_false_aggregates_canonical_and_other_reads(tmp_path, downstream):
    """Canonical reads take the whole-read path, the others the parsing path: the same
    aggregates, and no input is forwarded."""
    agg = aggregator(tmp_path, downstream, FORWARD_ALL=False)
    agg.start_foreground()
    try:
        canonical = b"".join(b"agg.lean.host%d.requests %s %d\n" % (
            i, ("%.10f" % v).rstrip("0").rstrip(".").encode(), BASE + 1)
            for i, v in enumerate(VALUES))
        send_tcp(agg.line_port, canonical)
        send_tcp(agg.line_port, inputs("parsed"))  # "3.0": valid, not canonical
        for app in ("lean", "parsed"):
            for method, expected in EXPECTED.items():
                metric = "agg.%s.all.%s" % (app, method)
                got = wait_for(lambda m=metric: value_at(downstream, m, BASE), timeout=30,
                               what=metric)
                assert got == pytest.approx(expected), metric
        assert not downstream.whisper_path("agg.lean.host0.requests").exists()
        assert not downstream.whisper_path("agg.parsed.host0.requests").exists()
    finally:
        agg.kill()


def test_aggregator_cache_writes_aggregates_and_inputs(tmp_path):
    inst = CarbonInstance(tmp_path, program="carbon-aggregator-cache",
                          section="aggregator-cache")
    schemas(inst)
    (inst.conf / "aggregation-rules.conf").write_text(RULES)
    inst.start_foreground()
    try:
        send_tcp(inst.line_port, inputs("api"))
        wait_for(lambda: value_at(inst, "agg.api.all.sum", BASE) == sum(VALUES), timeout=30,
                 what="sum aggregate")
        wait_for(lambda: value_at(inst, "agg.api.host1.requests", BASE) == 1.0, what="input")
    finally:
        inst.kill()


def test_rewrite_pre_applies_before_aggregation_and_post_after(tmp_path, downstream):
    rules = "totals.<app>.sum (%d) = sum raw.<app>.*.hits\n" % FREQ
    rewrite = "[pre]\n^legacy\\. = raw.\n[post]\n^raw\\. = clean.\n"
    agg = aggregator(tmp_path, downstream, rules=rules, rewrite=rewrite)
    agg.start_foreground()
    try:
        send_tcp(agg.line_port, b"legacy.shop.a.hits 2 %d\nlegacy.shop.b.hits 5 %d\n"
                 % (BASE + 1, BASE + 2))
        # [pre] renamed legacy.* so the rule matched; the aggregate skips [post]
        wait_for(lambda: value_at(downstream, "totals.shop.sum", BASE) == 7.0, timeout=30,
                 what="aggregate of pre-rewritten inputs")
        # forwarded inputs went through [post]
        wait_for(lambda: value_at(downstream, "clean.shop.a.hits", BASE) == 2.0,
                 what="post-rewritten input")
        assert not downstream.whisper_path("raw.shop.a.hits").exists()
    finally:
        agg.kill()


def test_bad_rule_stops_startup_with_file_and_line(tmp_path, downstream):
    agg = aggregator(tmp_path, downstream, rules="# ok\nout.x (60) = sum in.*\nthis is bad\n")
    result = agg.cli("start")
    assert result.returncode == 1
    assert "aggregation-rules.conf" in result.stderr and "line 3" in result.stderr


def test_reload_on_change_and_sighup_keeps_buffered_data(tmp_path, downstream):
    slow = "slow.total (60) = sum slow.*.v\n"
    agg = aggregator(tmp_path, downstream, rules=slow)
    proc = agg.start_foreground()
    try:
        now = int(time.time())
        current = now - now % 60
        send_tcp(agg.line_port, b"slow.a.v 1 %d\n" % (current + 1))
        # edit the rules: a broken file keeps the old rules (and their buffers)
        path = agg.conf / "aggregation-rules.conf"
        path.write_text(slow + "broken line\n")
        os.utime(path, (now + 5, now + 5))
        proc.send_signal(signal.SIGHUP)
        wait_for(lambda: "keeping previous aggregation rules" in agg.output(), what="reload log")
        # a valid edit adds a rule; the buffered point of the unchanged rule survives
        path.write_text(slow + "fast.total (%d) = sum fast.*.v\n" % FREQ)
        os.utime(path, (now + 10, now + 10))
        proc.send_signal(signal.SIGHUP)
        wait_for(lambda: "reloaded 2 aggregation rules" in agg.output(), what="reload")
        send_tcp(agg.line_port, b"slow.b.v 2 %d\nfast.a.v 4 %d\n" % (current + 2, BASE + 1))
        wait_for(lambda: value_at(downstream, "fast.total", BASE) == 4.0, timeout=30,
                 what="new rule active")
        # SIGTERM flushes pending intervals: the slow sum includes the point from before reloads
        assert agg.terminate() == 0
        wait_for(lambda: value_at(downstream, "slow.total", current) == 3.0, timeout=30,
                 what="buffered data kept across reloads")
    finally:
        agg.kill()


def test_self_metrics_reach_the_cache(tmp_path, downstream):
    import socket

    agg = aggregator(tmp_path, downstream, CARBON_METRIC_INTERVAL=1)
    agg.start_foreground()
    try:
        send_tcp(agg.line_port, inputs("selfm"))
        prefix = "carbon.aggregator.%s-a." % socket.gethostname().replace(".", "_")
        for name in ("aggregateDatapointsSent", "allocatedBuffers", "bufferedDatapoints",
                     "metricsReceived", "cpuUsage", "memUsage", "activeConnections"):
            wait_for(lambda n=name: downstream.whisper_path(prefix + n).exists(), timeout=30,
                     what=prefix + name)
    finally:
        agg.kill()
