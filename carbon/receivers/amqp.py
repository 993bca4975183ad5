"""AMQP listener (ENABLE_AMQP): consume metrics from a topic exchange into the pipeline.

Each message is one batch. By default the routing key is the metric name and
each body line is ``value timestamp``; with AMQP_METRIC_NAME_IN_BODY each line
is ``metric value timestamp``. The listener declares the durable topic exchange
AMQP_EXCHANGE and an exclusive queue bound with each of BIND_PATTERNS, then
consumes with a bounded prefetch and acknowledges what the pipeline accepted.
Flow control stops reading the connection, so unread messages wait at the
broker. Lost connections are retried with capped exponential backoff.
"""

from __future__ import annotations

from typing import Any

from twisted.internet import defer
from twisted.internet.protocol import ReconnectingClientFactory

from carbon.pipeline import Batch
from carbon.receivers.amqp_wire import AMQPClient
from carbon.receivers.context import ReceiverContext
from carbon.formats.plaintext import parse_lines, printable

PREFETCH = 256
CONSUMER_TAG = "graphite_consumer"
MAX_LOGGED_BODY = 1000


def message_batch(routing_key: bytes, body: bytes, name_in_body: bool,
                  resolution: int = 0) -> tuple[Batch, list[bytes]]:
    """Parse one message into (batch, bad lines).

    Without ``name_in_body`` every non-empty body line must be ``value timestamp``
    and the routing key (one word) is the metric; bad lines come back prefixed with it.
    """
    lines = body.split(b"\n")
    if name_in_body:
        return parse_lines(lines, resolution=resolution)
    lines = [line for line in lines if line.strip()]
    if len(routing_key.split()) != 1:
        return [], [b"<routing key %r> %s" % (routing_key, line) for line in lines]
    return parse_lines([routing_key + b" " + line for line in lines], resolution=resolution)


def bind_patterns(settings: Any) -> list[str]:
    """BIND_PATTERNS as a list (a comma-separated string is accepted too)."""
    patterns = settings.BIND_PATTERNS
    if isinstance(patterns, str):
        patterns = patterns.split(",")
    return [str(p).strip() for p in patterns if str(p).strip()]


class FlowHandle:
    """What FlowControl pauses and resumes: reads on the AMQP connection.

    While reads are paused the broker stops delivering once PREFETCH messages
    are unacknowledged; everything else stays queued at the broker.
    """

    def __init__(self, protocol: AMQPMetricListener) -> None:
        self.protocol = protocol

    def pauseProducing(self) -> None:  # noqa: N802
        self.protocol.context.log.listener("Pausing AMQP consumer (flow control)")
        self.protocol.transport.pauseProducing()

    def resumeProducing(self) -> None:  # noqa: N802
        self.protocol.context.log.listener("Resuming AMQP consumer")
        self.protocol.last_received = self.protocol.clock.seconds()
        self.protocol.transport.resumeProducing()


class AMQPMetricListener(AMQPClient):
    """One broker connection: set up the queue, consume, hand batches to the pipeline."""

    def __init__(self, factory: AMQPListenerFactory) -> None:
        settings = factory.context.settings
        super().__init__(str(settings.AMQP_USER), str(settings.AMQP_PASSWORD),
                         str(settings.AMQP_VHOST), clock=factory.clock)
        self.factory = factory
        self.context = factory.context
        self.name_in_body = bool(settings.AMQP_METRIC_NAME_IN_BODY)
        self.verbose = bool(settings.AMQP_VERBOSE)
        self.last_tag = 0
        self.acked_tag = 0
        self.flow_handle: FlowHandle | None = None

    def connectionMade(self) -> None:  # noqa: N802
        super().connectionMade()
        self.factory.current = self
        self.ready.addCallback(self._setup).addErrback(self._setup_failed)

    @defer.inlineCallbacks
    def _setup(self, _: Any) -> Any:
        log = self.context.log.listener
        settings = self.context.settings
        exchange = str(settings.AMQP_EXCHANGE)
        log("New AMQP connection made")
        yield self.exchange_declare(exchange, "topic", durable=True)
        named = str(settings.get("AMQP_QUEUE") or "")
        if named:
            # Opt-in: a durable named queue keeps messages while the daemon is stopped
            # (carbon's exclusive queue, the default, is deleted with the connection).
            queue = yield self.queue_declare(named, exclusive=False, durable=True)
        else:
            queue = yield self.queue_declare(exclusive=True)
        for pattern in bind_patterns(settings):
            log("binding exchange '%s' to queue '%s' with pattern %s" % (exchange, queue, pattern))
            yield self.queue_bind(queue, exchange, pattern)
        yield self.basic_qos(PREFETCH)
        yield self.basic_consume(queue, CONSUMER_TAG)
        self.factory.resetDelay()
        self.flow_handle = FlowHandle(self)
        self.context.flow.register(self.flow_handle)
        log("Consuming AMQP queue '%s' on exchange '%s'" % (queue, exchange))

    def _setup_failed(self, failure: Any) -> None:
        self.context.log.listener("AMQP setup failed: %s" % failure.getErrorMessage())
        if not self.dead:
            self.transport.loseConnection()

    def connectionLost(self, reason: Any = None) -> None:  # noqa: N802
        if self.flow_handle is not None:
            self.context.flow.unregister(self.flow_handle)
            self.flow_handle = None
        if self.factory.current is self:
            self.factory.current = None
        self.factory.last_error = self.error
        super().connectionLost(reason)

    def stop(self) -> defer.Deferred:
        """Close the connection: politely, or at once if flow control holds reads."""
        paused = self.reading_paused()
        if self.flow_handle is not None:
            self.context.flow.unregister(self.flow_handle)
            self.flow_handle = None
        return self.close(timeout=0 if paused else 1.0)

    def reading_paused(self) -> bool:
        return self.flow_handle is not None and self.context.flow.paused

    def blocked(self, blocked: bool) -> None:
        self.context.log.listener("AMQP broker %s the connection" % (
            "blocked" if blocked else "unblocked"))

    def message_received(self, routing_key: bytes, body: bytes, delivery_tag: int) -> None:
        context = self.context
        self.last_tag = delivery_tag
        if self.verbose:
            shown = body if len(body) <= MAX_LOGGED_BODY else body[:MAX_LOGGED_BODY] + b"..."
            context.log.listener("Message received: routing_key=%s body=%r" % (
                routing_key.decode("utf-8", "backslashreplace"), shown))
        batch, bad = message_batch(routing_key, body, self.name_in_body, context.resolution)
        if bad:
            context.stats.increment("invalidLines", len(bad))
            context.bad_lines.record("from AMQP [%s]" % printable(bad[0]), len(bad))
        if not batch:
            return
        context.stats.increment("metricsReceived", len(batch))
        try:
            context.pipeline.process(batch)
        except Exception:  # one broken batch must not drop the connection
            context.log.err("AMQP: processing a message of %d datapoints failed" % len(batch))
            return
        if self.verbose:
            for metric, stamp, value in batch:
                context.log.listener("Metric posted: %s %s %s" % (metric, value, stamp))

    def data_processed(self) -> None:
        # One cumulative ack per read: the pipeline holds everything up to last_tag.
        if self.last_tag > self.acked_tag and not self.dead:
            self.basic_ack(self.last_tag, multiple=True)
            self.acked_tag = self.last_tag


class AMQPListenerFactory(ReconnectingClientFactory):
    """Reconnects with capped exponential backoff; the delay resets once consuming."""

    initialDelay = 1.0
    factor = 1.5
    maxDelay = 30.0
    noisy = False

    def __init__(self, reactor: Any, context: ReceiverContext) -> None:
        self.clock = reactor
        self.context = context
        self.current: AMQPMetricListener | None = None
        self.last_error: Exception | None = None

    def buildProtocol(self, addr: Any) -> AMQPMetricListener:  # noqa: N802
        return AMQPMetricListener(self)

    def _where(self, connector: Any) -> str:
        dest = connector.getDestination()
        return "%s:%s" % (getattr(dest, "host", "?"), getattr(dest, "port", "?"))

    def clientConnectionFailed(self, connector: Any, reason: Any) -> None:  # noqa: N802
        self.context.log.listener("AMQP connection to %s failed: %s" % (
            self._where(connector), reason.getErrorMessage()))
        super().clientConnectionFailed(connector, reason)

    def clientConnectionLost(self, connector: Any, reason: Any) -> None:  # noqa: N802
        if self.continueTrying:
            self.context.log.listener("AMQP connection to %s lost: %s" % (
                self._where(connector), self.last_error or reason.getErrorMessage()))
        self.last_error = None
        super().clientConnectionLost(connector, reason)


class AMQPListener:
    """Handle returned by ``start_amqp_listener``: ``protocol`` and ``stop()``."""

    def __init__(self, reactor: Any, context: ReceiverContext) -> None:
        self.reactor = reactor
        self.context = context
        self.factory = AMQPListenerFactory(reactor, context)
        self.connector: Any = None

    @property
    def protocol(self) -> AMQPMetricListener | None:
        return self.factory.current

    def start(self) -> None:
        settings = self.context.settings
        if settings.AMQP_SPEC:
            self.context.log.listener("AMQP_SPEC is ignored: the listener speaks AMQP 0-9-1")
        self.connector = self.reactor.connectTCP(str(settings.AMQP_HOST), int(settings.AMQP_PORT),
                                                 self.factory, timeout=10)

    def stop(self) -> defer.Deferred:
        """Stop reconnecting and close the connection (connection.close, then TCP)."""
        self.factory.stopTrying()
        protocol = self.factory.current
        if protocol is not None:
            return protocol.stop()
        return defer.succeed(None)


def start_amqp_listener(reactor: Any, context: ReceiverContext) -> AMQPListener:
    """Connect to AMQP_HOST:AMQP_PORT and consume until the reactor stops."""
    listener = AMQPListener(reactor, context)
    listener.start()
    reactor.addSystemEventTrigger("before", "shutdown", listener.stop)
    return listener
