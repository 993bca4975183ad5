"""What a daemon listens on, declared: one ``ReceiverSpec`` per receiver (kind,
interface, port, options), built from carbon.conf once (``metric_listeners``,
``carbon.receivers.amqp.amqp_receiver``), and ``listen``, which opens a line (TCP),
pickle (TCP) or UDP one."""

from __future__ import annotations

import socket
from dataclasses import dataclass
from typing import Any

from carbon.config.settings import Settings
from carbon.receivers.context import ReceiverContext
from carbon.receivers.handoff import HandOffPort
from carbon.receivers.limits import listen_tcp
from carbon.receivers.protocols import LineReceiver, PickleReceiver, ReceiverFactory, UDPReceiver

UDP_MAX_PACKET = 65536
# TCP metric receivers by kind (UDP has no connections)
TCP_PROTOCOLS: dict[str, type] = {"line": LineReceiver, "pickle": PickleReceiver}


@dataclass(frozen=True)
class ReceiverOptions:
    """What one kind of receiver needs besides interface and port (a subclass per kind:
    ``carbon.receivers.amqp.AMQPConfig``, ``carbon.daemon.manhole.ManholeConfig``)."""


@dataclass(frozen=True)
class ReceiverSpec:
    """One receiver of a daemon's composition: ``kind`` (``line``, ``pickle``, ``udp``,
    ``amqp``, ``carbonlink``, ``manhole``), where it listens (or, for ``amqp``, the
    broker it connects to), the TCP listen backlog (0 where there is none) and the
    kind's own options."""

    kind: str
    interface: str
    port: int
    backlog: int = 0
    options: ReceiverOptions | None = None


def metric_listeners(settings: Settings) -> list[ReceiverSpec]:
    """LINE_RECEIVER_PORT, PICKLE_RECEIVER_PORT and (ENABLE_UDP_LISTENER) UDP_RECEIVER_PORT,
    in that order; a port of 0 disables that receiver (as in carbon)."""
    specs = []
    for kind in TCP_PROTOCOLS:
        prefix = kind.upper()
        port = int(settings["%s_RECEIVER_PORT" % prefix] or 0)
        if port:
            specs.append(ReceiverSpec(kind, str(settings["%s_RECEIVER_INTERFACE" % prefix]),
                                      port, int(settings["%s_RECEIVER_BACKLOG" % prefix])))
    if settings["ENABLE_UDP_LISTENER"] and int(settings["UDP_RECEIVER_PORT"] or 0):
        specs.append(ReceiverSpec("udp", str(settings["UDP_RECEIVER_INTERFACE"]),
                                  int(settings["UDP_RECEIVER_PORT"])))
    return specs


def listen(reactor: Any, context: ReceiverContext, spec: ReceiverSpec) -> Any:
    """Open a line, pickle or UDP receiver; returns the listening port.

    TCP ports back off when accept() runs out of descriptors (``limits.GuardedPort``).
    With ``context.hand_off`` set, TCP ports accept themselves and hand each connection
    to it (``HandOffPort``).
    """
    if spec.kind == "udp":
        return reactor.listenUDP(spec.port, UDPReceiver(context), interface=spec.interface,
                                 maxPacketSize=UDP_MAX_PACKET)
    factory = ReceiverFactory(TCP_PROTOCOLS[spec.kind], context)
    hand_off = context.hand_off
    if hand_off is not None:  # connections spread over worker processes
        kind = spec.kind

        def dispatch(conn: socket.socket) -> None:
            hand_off(conn, kind, factory)

        return HandOffPort(reactor, spec.port, dispatch, backlog=spec.backlog,
                           interface=spec.interface, limit=context.limit)
    return listen_tcp(reactor, spec.port, factory, backlog=spec.backlog,
                      interface=spec.interface, limit=context.limit)
