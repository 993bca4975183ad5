"""Publish metrics to an AMQP topic exchange, as carbon's AMQP listener consumes them.

Library: ``publish(reactor, messages, ...)`` sends ``(routing_key, body)`` pairs
with publisher confirms. CLI (like carbon's amqp_publisher.py)::

    python -m carbon.relay.amqp_publisher [options] <metric> <value> [timestamp]
    python -m carbon.relay.amqp_publisher [options] < lines

From stdin each line is ``<routing key> <body line>``; lines are grouped into one
message per routing key. With ``--name-in-body`` the whole input is one message
whose body is the lines as given (for AMQP_METRIC_NAME_IN_BODY listeners).
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any, Iterable

from twisted.internet import defer, protocol

from carbon.amqp.client import AMQPConnection
from carbon.amqp.fields import AMQPError, short_wire
from carbon.amqp.spec import load_spec


@defer.inlineCallbacks
def publish(reactor: Any, messages: Iterable[tuple[str, bytes]], host: str = "localhost",
            port: int = 5672, user: str = "guest", password: str = "guest", vhost: str = "/",
            exchange: str = "graphite", ssl: bool = False, timeout: float = 30.0) -> Any:
    """Declare the durable topic exchange and publish persistent messages.

    Fires with the number of messages the broker confirmed; fails if it refused any,
    or if it did not answer within ``timeout`` seconds.
    """
    creator = protocol.ClientCreator(reactor, AMQPConnection, load_spec(), user, password, vhost,
                                     clock=reactor)
    if ssl:
        try:
            from twisted.internet import ssl as tls
        except ImportError:
            raise AMQPError("--ssl needs pyOpenSSL (pip install 'twisted[tls]')")
        client = yield creator.connectSSL(host, port, tls.optionsForClientTLS(host),
                                          timeout=timeout)
    else:
        client = yield creator.connectTCP(host, port, timeout=timeout)
    watchdog = reactor.callLater(timeout, client.transport.abortConnection)
    try:
        channel = yield client.ready
        yield channel.exchange_declare(exchange=short_wire(exchange), type=b"topic",
                                       durable=True)
        yield client.confirm_select()
        count = 0
        for routing_key, body in messages:
            client.publish(exchange, routing_key, body, persistent=True)
            count += 1
        nacked = yield client.wait_confirms()
        if nacked:
            raise AMQPError("broker refused %d of %d messages" % (nacked, count))
        yield client.shutdown()
    finally:
        if watchdog.active():
            watchdog.cancel()
        client.transport.abortConnection()
    return count


def messages_from_lines(lines: Iterable[str], name_in_body: bool = False,
                        routing_key: str | None = None) -> list[tuple[str, bytes]]:
    """Group ``<routing key> <body line>`` lines into messages (see the module doc)."""
    lines = [line.rstrip("\r\n") for line in lines]
    lines = [line for line in lines if line.strip()]
    if not lines:
        return []
    if name_in_body:
        key = routing_key if routing_key is not None else lines[0].split()[0]
        return [(key, ("\n".join(lines) + "\n").encode("utf-8"))]
    grouped: dict[str, list[str]] = {}
    for line in lines:
        parts = line.strip().split(None, 1)
        grouped.setdefault(routing_key or parts[0], []).append(parts[1] if len(parts) > 1
                                                                else "")
    return [(key, ("\n".join(body) + "\n").encode("utf-8")) for key, body in grouped.items()]


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="amqp_publisher", usage="%(prog)s [options] [<metric> <value> [timestamp]]",
        description="Publish metrics to an AMQP exchange. Without arguments, lines "
                    "'<routing key> <body line>' are read from stdin.")
    parser.add_argument("-t", "--host", default="localhost")
    parser.add_argument("-p", "--port", type=int, default=5672)
    parser.add_argument("-u", "--user", dest="username", default="guest")
    parser.add_argument("-w", "--password", default="guest")
    parser.add_argument("-v", "--vhost", default="/")
    parser.add_argument("-s", "--ssl", action="store_true", default=False)
    parser.add_argument("-e", "--exchange", default="graphite")
    parser.add_argument("-n", "--name-in-body", action="store_true", default=False,
                        help="body lines are 'metric value timestamp' (AMQP_METRIC_NAME_IN_BODY)")
    parser.add_argument("-k", "--routing-key", default=None,
                        help="routing key for every message read from stdin")
    parser.add_argument("--timeout", type=float, default=30.0)
    parser.add_argument("args", nargs="*", help="metric value [timestamp]")
    return parser.parse_args(argv)


def build_messages(options: argparse.Namespace, stdin: Any) -> list[tuple[str, bytes]]:
    """The messages the CLI publishes for these options."""
    if not options.args:
        return messages_from_lines(stdin, options.name_in_body, options.routing_key)
    if len(options.args) not in (2, 3):
        raise ValueError("expected <metric> <value> [timestamp]")
    metric = options.args[0]
    value = float(options.args[1])
    stamp = int(options.args[2]) if len(options.args) > 2 else int(time.time())
    line = "%r %d" % (value, stamp)
    if options.name_in_body:
        return [(options.routing_key or metric, ("%s %s\n" % (metric, line)).encode("utf-8"))]
    return [(options.routing_key or metric, (line + "\n").encode("utf-8"))]


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; returns the exit status (0 once the broker confirmed every message)."""
    from twisted.internet import reactor

    options = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        messages = build_messages(options, sys.stdin)
    except ValueError as exc:
        sys.stderr.write("amqp_publisher: %s\n" % exc)
        return 2
    outcome: list[int] = []

    def done(count: int) -> None:
        outcome.append(count)
        sys.stdout.write("published %d message(s)\n" % count)

    def failed(failure: Any) -> None:
        sys.stderr.write("amqp_publisher: %s\n" % failure.getErrorMessage())

    def run() -> None:
        d = publish(reactor, messages, options.host, options.port, options.username,
                    options.password, options.vhost, options.exchange, options.ssl,
                    options.timeout)
        d.addCallbacks(done, failed)
        d.addBoth(lambda _: reactor.stop())

    reactor.callWhenRunning(run)
    reactor.run()
    return 0 if outcome else 1


if __name__ == "__main__":
    raise SystemExit(main())
