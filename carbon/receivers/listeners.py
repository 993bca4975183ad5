"""Open the configured receiver ports: line (TCP), UDP and pickle."""

from __future__ import annotations

from typing import Any

from carbon.receivers.context import ReceiverContext
from carbon.receivers.handoff import HandOffPort
from carbon.receivers.limits import listen_tcp
from carbon.receivers.protocols import LineReceiver, PickleReceiver, ReceiverFactory, UDPReceiver


def start_receivers(reactor: Any, context: ReceiverContext) -> list[Any]:
    """Listen on LINE_RECEIVER_PORT, PICKLE_RECEIVER_PORT and (if enabled) UDP.

    A port of 0 in the settings disables that receiver (as in carbon). Returns
    the listening ports; TCP ones are also kept in ``context.ports``. TCP ports back off
    when accept() runs out of descriptors (``limits.GuardedPort``). With
    ``context.hand_off`` set, TCP ports accept themselves and hand each connection to it
    (``HandOffPort``).
    """
    settings = context.settings
    ports = []
    for prefix, protocol in (("LINE", LineReceiver), ("PICKLE", PickleReceiver)):
        port = int(settings.get("%s_RECEIVER_PORT" % prefix) or 0)
        if not port:
            continue
        factory = ReceiverFactory(protocol, context)
        backlog = int(settings.get("%s_RECEIVER_BACKLOG" % prefix, 1024))
        interface = settings.get("%s_RECEIVER_INTERFACE" % prefix, "0.0.0.0")
        if context.hand_off is not None:  # connections spread over worker processes
            kind = prefix.lower()
            listening: Any = HandOffPort(
                reactor, port, lambda conn, k=kind, f=factory: context.hand_off(conn, k, f),
                backlog=backlog, interface=interface, limit=context.limit)
        else:
            listening = listen_tcp(reactor, port, factory, backlog=backlog,
                                   interface=interface, limit=context.limit)
        context.ports.append(listening)
        ports.append(listening)
    if settings.ENABLE_UDP_LISTENER and int(settings.UDP_RECEIVER_PORT or 0):
        ports.append(reactor.listenUDP(int(settings.UDP_RECEIVER_PORT), UDPReceiver(context),
                                       interface=settings.UDP_RECEIVER_INTERFACE,
                                       maxPacketSize=65536))
    return ports
