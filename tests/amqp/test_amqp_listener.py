"""carbon-cache with ENABLE_AMQP against a private RabbitMQ: both message formats,
bad lines, flow control, broker restart. Messages are sent with our publisher CLI."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import pytest

from tests.support import ROOT, CarbonInstance, carbonlink, read_whisper, wait_for

NOW = int(time.time()) // 60 * 60
# Writes paused: received points stay in the cache where carbonlink shows them.
PAUSED = {"MAX_UPDATES_PER_SECOND": 0.0001, "MAX_CREATES_PER_MINUTE": 0.0001}
SELF = "carbon.agents.%s-a." % socket.gethostname().replace(".", "_")


def publish(broker, exchange: str, *args: str, stdin: str = "") -> str:
    """Run ``python -m carbon.relay.amqp_publisher`` against the test broker."""
    cmd = [sys.executable, "-m", "carbon.relay.amqp_publisher", "-t", "127.0.0.1",
           "-p", str(broker.port), "-e", exchange, "--timeout", "20", *args]
    done = subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=40,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert done.returncode == 0, done.stderr
    return done.stdout


def amqp_daemon(tmp_path, broker, exchange: str, **settings) -> CarbonInstance:
    instance = CarbonInstance(tmp_path, ENABLE_AMQP=True, AMQP_HOST="127.0.0.1",
                              AMQP_PORT=broker.port, AMQP_EXCHANGE=exchange, **settings)
    instance.start_foreground()
    wait_consuming(instance, 1)
    return instance


def wait_consuming(instance: CarbonInstance, times: int, timeout: float = 20) -> None:
    wait_for(lambda: instance.output().count("Consuming AMQP queue") >= times
             or instance.proc.poll() is not None, timeout=timeout, what="AMQP consumer")
    assert instance.proc.poll() is None, instance.output()


def cached(instance: CarbonInstance, names: list[str]) -> dict:
    return carbonlink(instance.query_port, {"type": "cache-query-bulk",
                                            "metrics": names})["datapointsByMetric"]


def counter(instance: CarbonInstance, name: str) -> float:
    """Sum of a self-metric over every report interval still in the cache."""
    return sum(v for _, v in cached(instance, [SELF + name])[SELF + name])


def stored(instance: CarbonInstance, metric: str) -> dict:
    return read_whisper(instance.whisper_path(metric), NOW - 7200, NOW + 60)


def test_routing_key_messages_and_bad_lines(tmp_path, broker):
    cache = amqp_daemon(tmp_path, broker, "rk_test", BIND_PATTERNS="amqp.#, other.bound",
                        AMQP_VERBOSE=True, CARBON_METRIC_INTERVAL=1, **PAUSED)
    try:
        lines = [
            "unbound.metric 9 %d" % NOW,          # matches no bind pattern
            "amqp.rk.a 1.5 %d" % (NOW - 120),
            "amqp.rk.a garbage",
            "amqp.rk.a 2.5 %d" % (NOW - 60),
            "amqp.rk.a 1 2 3",
            "amqp.rk.b nan %d" % NOW,
            "amqp.rk.b 7 %d" % (NOW - 60),
            "amqp.rk.c inf 5",
            "other.bound 3 %d" % NOW,
        ]
        assert "published 5 message(s)" in publish(broker, "rk_test", stdin="\n".join(lines))
        names = ["amqp.rk.a", "amqp.rk.b", "amqp.rk.c", "other.bound", "unbound.metric"]
        wait_for(lambda: all(cached(cache, names[:2] + names[3:4]).values()), what="points")
        found = cached(cache, names)
        assert found == {"amqp.rk.a": [(NOW - 120.0, 1.5), (NOW - 60.0, 2.5)],
                         "amqp.rk.b": [(NOW - 60.0, 7.0)], "amqp.rk.c": [],
                         "other.bound": [(float(NOW), 3.0)], "unbound.metric": []}
        wait_for(lambda: counter(cache, "invalidLines") == 4, what="4 invalid lines counted")
        wait_for(lambda: counter(cache, "metricsReceived") == 4, what="4 metrics received")
        out = cache.output()
        assert "invalid lines received: from AMQP [amqp.rk.a garbage]" in out
        assert "binding exchange 'rk_test' to queue" in out and "with pattern other.bound" in out
        assert "Message received: routing_key=amqp.rk.b" in out
        assert "Metric posted: amqp.rk.a 1.5 %.1f" % (NOW - 120) in out
    finally:
        cache.kill()


def test_metric_name_in_body(tmp_path, broker):
    cache = amqp_daemon(tmp_path, broker, "body_test", AMQP_METRIC_NAME_IN_BODY=True,
                        CARBON_METRIC_INTERVAL=1, **PAUSED)
    try:
        body = "\n".join(["amqp.body.x 1 %d" % (NOW - 60), "bogus line",
                          "amqp.body.y 2 %d" % (NOW - 60), "amqp.body.z NaN-ish %d" % NOW,
                          "", "amqp.body.y 3 %d\r" % NOW])
        publish(broker, "body_test", "--name-in-body", "-k", "any.key", stdin=body)
        publish(broker, "body_test", "--name-in-body", "amqp.body.w", "4", str(NOW - 60))
        names = ["amqp.body.%s" % c for c in "wxyz"]
        wait_for(lambda: all(cached(cache, names[:3]).values()), what="points")
        assert cached(cache, names) == {
            "amqp.body.w": [(NOW - 60.0, 4.0)], "amqp.body.x": [(NOW - 60.0, 1.0)],
            "amqp.body.y": [(NOW - 60.0, 2.0), (float(NOW), 3.0)], "amqp.body.z": []}
        wait_for(lambda: counter(cache, "invalidLines") == 2, what="2 invalid lines counted")
        wait_for(lambda: counter(cache, "metricsReceived") == 4, what="4 metrics received")
        assert "Message received" not in cache.output()  # AMQP_VERBOSE is off
    finally:
        cache.kill()


def test_flow_control_holds_messages_at_the_broker(tmp_path, broker):
    # One message of 5 metrics x 100 points overfills a 100-point cache at once; the writer
    # (a write every 2 s) takes ~7 s to get below the watermark again.
    cache = amqp_daemon(tmp_path, broker, "flow_test", MAX_CACHE_SIZE=100,
                        MAX_UPDATES_PER_SECOND=0.5, AMQP_METRIC_NAME_IN_BODY=True)
    try:
        metrics = ["amqp.flow.m%d" % i for i in range(5)]
        publish(broker, "flow_test", "--name-in-body", stdin="\n".join(
            "%s %d %d" % (m, k, NOW - 60 * k) for m in metrics for k in range(1, 101)))
        wait_for(lambda: "Pausing AMQP consumer" in cache.output(), what="consumer paused")
        publish(broker, "flow_test", "--name-in-body", "amqp.flow.after", "5", str(NOW - 60))
        time.sleep(0.5)
        held = cached(cache, ["amqp.flow.after"])["amqp.flow.after"]
        resumed = "Resuming AMQP consumer" in cache.output()
        assert not resumed, "cache drained too early for this test to observe the pause"
        assert held == []  # not consumed while paused: it waits at the broker
        wait_for(lambda: stored(cache, "amqp.flow.after") == {NOW - 60: 5.0}, timeout=30,
                 what="held message consumed after resume")
        wait_for(lambda: sum(len(stored(cache, m)) for m in metrics) == 500, timeout=30,
                 what="every point in whisper")
        out = cache.output()
        assert "MetricCache is full" in out and "Resuming AMQP consumer" in out
    finally:
        cache.kill()


def test_listener_reconnects_after_broker_restart(tmp_path, broker):
    cache = amqp_daemon(tmp_path, broker, "restart_test")
    try:
        publish(broker, "restart_test", "amqp.restart.before", "1", str(NOW - 120))
        wait_for(lambda: stored(cache, "amqp.restart.before") == {NOW - 120: 1.0},
                 what="point before restart")
        broker.restart()
        wait_consuming(cache, 2, timeout=45)
        publish(broker, "restart_test", "amqp.restart.after", "2", str(NOW - 60))
        wait_for(lambda: stored(cache, "amqp.restart.after") == {NOW - 60: 2.0},
                 what="point after restart")
        out = cache.output()
        assert "AMQP connection to 127.0.0.1:%d lost" % broker.port in out
        assert "AMQP connection to 127.0.0.1:%d failed" % broker.port in out
        started = time.monotonic()
        assert cache.terminate(timeout=30) == 0
        assert time.monotonic() - started < 10
        assert "Traceback" not in cache.output()
    finally:
        cache.kill()


def test_publisher_reports_refused_login(broker):
    cmd = [sys.executable, "-m", "carbon.relay.amqp_publisher", "-t", "127.0.0.1",
           "-p", str(broker.port), "-w", "wrong", "amqp.nope", "1"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=40,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert done.returncode == 1
    assert "ACCESS_REFUSED" in done.stderr


@pytest.mark.parametrize("argv", [["only.metric"], ["m", "notanumber"]])
def test_publisher_rejects_bad_arguments(argv):
    cmd = [sys.executable, "-m", "carbon.relay.amqp_publisher", "-p", "1", *argv]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=40,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert done.returncode == 2


def test_named_durable_queue_keeps_messages_while_stopped(tmp_path, broker):
    settings = {"AMQP_QUEUE": "carbon-durable-test"}
    first = amqp_daemon(tmp_path / "one", broker, "durable_test", **settings)
    first.kill()  # the queue stays, bound, with nobody consuming
    publish(broker, "durable_test", "amqp.durable.while_down", "7", str(NOW - 60))
    second = amqp_daemon(tmp_path / "two", broker, "durable_test", **settings)
    try:
        wait_for(lambda: stored(second, "amqp.durable.while_down") == {NOW - 60: 7.0},
                 what="message published while the daemon was down")
    finally:
        second.kill()
