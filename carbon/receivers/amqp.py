"""AMQP listener (ENABLE_AMQP): consume metrics from a topic exchange into the pipeline.

Each message is one batch. By default the routing key is the metric name and
each body line is ``value timestamp``; with AMQP_METRIC_NAME_IN_BODY each line
is ``metric value timestamp``. The listener declares the durable topic exchange
AMQP_EXCHANGE and an exclusive queue bound with each of BIND_PATTERNS, then
consumes with a bounded prefetch and acknowledges what the pipeline accepted; a
message whose processing fails is not acknowledged but handed back to the broker
after RETRY_DELAY seconds, to be delivered again. Flow control stops reading the
connection, so unread messages wait at the broker. Lost connections are retried
with capped exponential backoff. The AMQP client is txAMQP (``carbon.amqp``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from twisted.internet import defer
from twisted.internet.protocol import ReconnectingClientFactory

from carbon.amqp.client import AMQPConnection, describe
from carbon.amqp.fields import AMQPError, short_wire, text
from carbon.amqp.spec import load_spec
from carbon.config.settings import Settings
from carbon.pipeline import Batch
from carbon.receivers.context import ReceiverContext
from carbon.receivers.listeners import ReceiverOptions, ReceiverSpec
from carbon.formats.plaintext import parse_lines, printable

PREFETCH = 256
CONSUMER_TAG = "graphite_consumer"
MAX_LOGGED_BODY = 1000
RETRY_DELAY = 1.0


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


def bind_patterns(settings: Settings) -> list[str]:
    """BIND_PATTERNS as a list (a comma-separated string is accepted too)."""
    patterns = settings["BIND_PATTERNS"]
    if isinstance(patterns, str):
        patterns = patterns.split(",")
    return [str(p).strip() for p in patterns if str(p).strip()]


@dataclass(frozen=True)
class AMQPConfig(ReceiverOptions):
    """What the AMQP listener reads of carbon.conf besides AMQP_HOST and AMQP_PORT
    (the receiver's interface and port), built once (``from_settings``)."""

    user: str  # AMQP_USER
    password: str  # AMQP_PASSWORD
    vhost: str  # AMQP_VHOST
    exchange: str  # AMQP_EXCHANGE
    queue: str  # AMQP_QUEUE ("": an exclusive queue, carbon's)
    bind_patterns: tuple[str, ...]  # BIND_PATTERNS
    name_in_body: bool  # AMQP_METRIC_NAME_IN_BODY
    verbose: bool  # AMQP_VERBOSE
    spec_given: bool  # AMQP_SPEC set (ignored, and said so)

    @classmethod
    def from_settings(cls, settings: Settings) -> AMQPConfig:
        return cls(user=str(settings["AMQP_USER"]), password=str(settings["AMQP_PASSWORD"]),
                   vhost=str(settings["AMQP_VHOST"]), exchange=str(settings["AMQP_EXCHANGE"]),
                   queue=str(settings["AMQP_QUEUE"] or ""),
                   bind_patterns=tuple(bind_patterns(settings)),
                   name_in_body=bool(settings["AMQP_METRIC_NAME_IN_BODY"]),
                   verbose=bool(settings["AMQP_VERBOSE"]),
                   spec_given=bool(settings["AMQP_SPEC"]))


def amqp_receiver(settings: Settings) -> ReceiverSpec:
    """The AMQP listener as a receiver of a daemon's composition (ENABLE_AMQP): the
    broker AMQP_HOST:AMQP_PORT and its AMQPConfig."""
    return ReceiverSpec("amqp", str(settings["AMQP_HOST"]), int(settings["AMQP_PORT"]),
                        options=AMQPConfig.from_settings(settings))


class FlowHandle:
    """What FlowControl pauses and resumes: reads on the AMQP connection.

    While reads are paused the broker stops delivering once PREFETCH messages
    are unacknowledged; everything else stays queued at the broker.
    """

    def __init__(self, protocol: AMQPMetricListener) -> None:
        self.protocol = protocol

    def pauseProducing(self) -> None:  # noqa: N802
        self.protocol.context.log.listener("Pausing AMQP consumer (flow control)")
        self.protocol.reads_paused = True
        self.protocol.transport.pauseProducing()

    def resumeProducing(self) -> None:  # noqa: N802
        self.protocol.context.log.listener("Resuming AMQP consumer")
        self.protocol.reads_paused = False
        self.protocol.transport.resumeProducing()


class AMQPMetricListener(AMQPConnection):
    """One broker connection: set up the queue, consume, hand batches to the pipeline.

    Acknowledgements go once per read: one cumulative ack while no message is held
    back, single acks for the messages above a held (failed) one until it is
    handed back.
    """

    def __init__(self, factory: AMQPListenerFactory) -> None:
        config = factory.config
        super().__init__(factory.spec, config.user, config.password, config.vhost,
                         clock=factory.clock)
        self.factory = factory
        self.context = factory.context
        self.config = config
        self.name_in_body = config.name_in_body
        self.verbose = config.verbose
        self.processed: list[int] = []  # delivery tags of this read to acknowledge
        self.held: dict[int, Any] = {}  # failed delivery tag -> its delayed requeue
        self.flow_handle: FlowHandle | None = None

    def connectionMade(self) -> None:  # noqa: N802
        super().connectionMade()
        self.factory.current = self
        self.ready.addCallback(self._setup).addErrback(self._setup_failed)

    @defer.inlineCallbacks
    def _setup(self, channel: Any) -> Any:
        log = self.context.log.listener
        config = self.config
        exchange = short_wire(config.exchange)
        log("New AMQP connection made")
        yield channel.exchange_declare(exchange=exchange, type=b"topic", durable=True)
        named = config.queue
        if named:
            # Opt-in: a durable named queue keeps messages while the daemon is stopped
            # (carbon's exclusive queue, the default, is deleted with the connection).
            reply = yield channel.queue_declare(queue=short_wire(named), durable=True)
        else:
            reply = yield channel.queue_declare(exclusive=True, auto_delete=True)
        queue = text(reply.queue)
        for pattern in config.bind_patterns:
            log("binding exchange '%s' to queue '%s' with pattern %s" % (
                text(exchange), queue, pattern))
            yield channel.queue_bind(queue=short_wire(queue), exchange=exchange,
                                     routing_key=short_wire(pattern))
        yield channel.basic_qos(prefetch_count=PREFETCH)
        yield channel.basic_consume(queue=short_wire(queue), consumer_tag=CONSUMER_TAG)
        self.factory.resetDelay()
        self.flow_handle = FlowHandle(self)
        self.context.flow.register(self.flow_handle)
        log("Consuming AMQP queue '%s' on exchange '%s'" % (queue, text(exchange)))

    def _setup_failed(self, failure: Any) -> None:
        self.error = self.error or AMQPError(describe(failure))
        self.context.log.listener("AMQP setup failed: %s" % self.error)
        self.transport.loseConnection()

    def connectionLost(self, reason: Any = None) -> None:  # noqa: N802
        if self.flow_handle is not None:
            self.context.flow.unregister(self.flow_handle)
            self.flow_handle = None
        for call in self.held.values():  # the broker requeues whatever is unacknowledged
            if call.active():
                call.cancel()
        self.held.clear()
        if self.factory.current is self:
            self.factory.current = None
        super().connectionLost(reason)
        self.factory.last_error = self.error

    def stop(self) -> defer.Deferred:
        """Close the connection: politely, or at once if flow control holds reads."""
        paused = self.reads_paused
        if self.flow_handle is not None:
            self.context.flow.unregister(self.flow_handle)
            self.flow_handle = None
        return self.shutdown(timeout=0 if paused else 1.0)

    def blocked(self, reason: str | None) -> None:
        self.context.log.listener("AMQP broker blocked the connection: %s" % reason
                                  if reason is not None else
                                  "AMQP broker unblocked the connection")

    def message_received(self, routing_key: bytes, body: bytes, delivery_tag: int) -> None:
        if self.process(routing_key, body):
            self.processed.append(delivery_tag)
        else:
            self.held[delivery_tag] = self.clock.callLater(RETRY_DELAY, self._hand_back,
                                                           delivery_tag)

    def process(self, routing_key: bytes, body: bytes) -> bool:
        """Parse one message into the pipeline; False if processing it failed."""
        context = self.context
        if self.verbose:
            shown = body if len(body) <= MAX_LOGGED_BODY else body[:MAX_LOGGED_BODY] + b"..."
            context.log.listener("Message received: routing_key=%s body=%r" % (
                routing_key.decode("utf-8", "backslashreplace"), shown))
        batch, bad = message_batch(routing_key, body, self.name_in_body, context.resolution)
        if bad:
            context.stats.increment("invalidLines", len(bad))
            context.bad_lines.record("from AMQP [%s]" % printable(bad[0]), len(bad))
        if not batch:
            return True
        try:
            context.pipeline.process(batch)
        except Exception as exc:  # one broken batch must not drop the connection
            self.context.failed_batches.record("%d datapoints, handed back to the broker: %r" % (
                len(batch), exc))
            return False
        context.stats.increment("metricsReceived", len(batch))
        if self.verbose:
            for metric, stamp, value in batch:
                context.log.listener("Metric posted: %s %s %s" % (metric, value, stamp))
        return True

    def _hand_back(self, delivery_tag: int) -> None:
        del self.held[delivery_tag]
        self.requeue(delivery_tag)

    def data_processed(self) -> None:
        tags, self.processed = self.processed, []
        if not tags or self.channel1 is None:
            return
        lowest_held = min(self.held, default=tags[-1] + 1)
        below = [tag for tag in tags if tag < lowest_held]
        if below:
            self.ack(below[-1], multiple=True)
        for tag in tags[len(below):]:
            self.ack(tag)

class AMQPListenerFactory(ReconnectingClientFactory):
    """Reconnects with capped exponential backoff; the delay resets once consuming."""

    initialDelay = 1.0
    factor = 1.5
    maxDelay = 30.0
    noisy = False

    def __init__(self, reactor: Any, context: ReceiverContext, config: AMQPConfig) -> None:
        self.clock = reactor
        self.context = context
        self.config = config
        self.spec = load_spec()
        self.current: AMQPMetricListener | None = None
        self.last_error: Exception | None = None

    def buildProtocol(self, addr: Any) -> AMQPMetricListener:  # noqa: N802
        return AMQPMetricListener(self)

    def _where(self, connector: Any) -> str:
        dest = connector.getDestination()
        # Twisted's address: a UNIX socket's has no host or port
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
    """Handle returned by ``start_amqp_listener``: ``protocol`` and ``stop()``.
    ``receiver``: the broker (interface and port) and the AMQPConfig."""

    def __init__(self, reactor: Any, context: ReceiverContext, receiver: ReceiverSpec) -> None:
        assert isinstance(receiver.options, AMQPConfig), receiver
        self.reactor = reactor
        self.context = context
        self.receiver = receiver
        self.factory = AMQPListenerFactory(reactor, context, receiver.options)
        self.connector: Any = None

    @property
    def protocol(self) -> AMQPMetricListener | None:
        return self.factory.current

    def start(self) -> None:
        if self.factory.config.spec_given:
            self.context.log.listener(
                "AMQP_SPEC is ignored: the listener speaks AMQP 0-9-1 with its own spec")
        self.connector = self.reactor.connectTCP(self.receiver.interface, self.receiver.port,
                                                 self.factory, timeout=10)

    def stop(self) -> defer.Deferred:
        """Stop reconnecting and close the connection (connection.close, then TCP)."""
        self.factory.stopTrying()
        protocol = self.factory.current
        if protocol is not None:
            return protocol.stop()
        return defer.succeed(None)


def start_amqp_listener(reactor: Any, context: ReceiverContext,
                        receiver: ReceiverSpec) -> AMQPListener:
    """Connect to the broker (AMQP_HOST:AMQP_PORT) and consume until the reactor stops."""
    listener = AMQPListener(reactor, context, receiver)
    listener.start()
    reactor.addSystemEventTrigger("before", "shutdown", listener.stop)
    return listener
