"""The listener and our txAMQP client in-process against the private RabbitMQ: a batch
that fails in the pipeline comes back from the broker and lands once; message headers
of field types txAMQP cannot decode and a non-ASCII routing key pass; confirms count."""

from __future__ import annotations

from twisted.internet import defer
from twisted.internet.protocol import ClientCreator

from carbon.amqp.client import AMQPConnection
from carbon.amqp.spec import load_spec
from carbon.config.settings import Settings
from carbon.instrumentation.stats import Stats
from carbon.logs import MemoryLog
from carbon.pipeline import Pipeline, Sink
from carbon.receivers.amqp import AMQPListener, amqp_receiver
from carbon.receivers.context import ReceiverConfig, ReceiverContext
from carbon.flow import FlowControl
from tests.relay.harness import run_reactor, wait_for

EXCHANGE = "client_test"


class FlakySink(Sink):
    """Fails the first ``failures`` batches that hold ``flaky``; records every attempt."""

    def __init__(self, flaky: str, failures: int) -> None:
        self.flaky = flaky
        self.failures = failures
        self.points: list = []
        self.attempts: list = []

    def put_many(self, batch):
        self.attempts.append([metric for metric, _, _ in batch])
        if self.failures and any(metric == self.flaky for metric, _, _ in batch):
            self.failures -= 1
            raise OSError("disk full")
        self.points += batch


def test_failed_batch_comes_back_and_odd_messages_pass(broker):
    sink, log = FlakySink("amqp.flaky", failures=2), MemoryLog()
    settings = Settings(AMQP_HOST="127.0.0.1", AMQP_PORT=broker.port, AMQP_EXCHANGE=EXCHANGE)
    context = ReceiverContext(ReceiverConfig.from_settings(settings), Pipeline([], sink),
                              Stats(), FlowControl(), log)
    messages = [("amqp.before", b"1 100\n", None), ("amqp.flaky", b"2 100\n", None),
                ("amqp.after", b"3 100\n", None), ("amqp.métrique.é", b"4 100\n", None),
                ("amqp.headers", b"5 100\n", {"n": -2 ** 40, "on": True, "list": [1.5, "x"],
                                             "nested": {"t": None}})]

    @defer.inlineCallbacks
    def body(reactor):
        listener = AMQPListener(reactor, context, amqp_receiver(settings))
        listener.start()
        yield wait_for(reactor, lambda: listener.protocol is not None
                       and listener.protocol.flow_handle is not None, what="consuming")
        client = yield ClientCreator(reactor, AMQPConnection, load_spec(), "guest", "guest",
                                     clock=reactor).connectTCP("127.0.0.1", broker.port)
        yield client.ready
        yield client.confirm_select()
        for key, data, headers in messages:
            client.publish(EXCHANGE, key, data, headers=headers)
        nacked = yield client.wait_confirms()
        yield client.shutdown()
        yield wait_for(reactor, lambda: len(sink.points) == len(messages), timeout=20,
                       what="every message processed")
        yield listener.stop()
        return nacked

    assert run_reactor(body, timeout=40) == 0
    assert sorted(sink.points) == sorted((key, 100.0, float(i)) for i, (key, _, _)
                                         in enumerate(messages, 1))
    assert sum(a == ["amqp.flaky"] for a in sink.attempts) == 3  # failed twice, then landed
    assert context.stats.get("metricsReceived") == len(messages)
    assert "batches failed in the pipeline: 1 datapoints" in log.text()
