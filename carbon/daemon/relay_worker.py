"""One RELAY_WORKERS worker process: a whole relay that serves the connections its
master hands over a Unix socket (the master's side is :mod:`carbon.daemon.relay_workers`)."""

from __future__ import annotations

import json
import signal
import socket
import sys
from typing import Any

from twisted.internet.error import ReactorNotRunning
from twisted.internet.interfaces import IReadDescriptor
from zope.interface import implementer

from carbon.config.settings import Settings
from carbon.logs import log_for, log_twisted_errors
from carbon.receivers.handoff import adopt
from carbon.receivers.listeners import TCP_PROTOCOLS
from carbon.receivers.protocols import ReceiverFactory
from carbon.daemon.relay import RelayDaemon
from carbon.daemon.relay_workers import FAMILIES, KINDS, READY, worker_settings


@implementer(IReadDescriptor)
class ChannelReader:
    """A worker's side of the Unix socket: adopt each connection the master passes."""

    def __init__(self, reactor: Any, channel: socket.socket, factories: dict[str, Any],
                 log: Any) -> None:
        self.reactor = reactor
        self.channel = channel
        self.factories = factories
        self.log = log
        channel.setblocking(False)

    def fileno(self) -> int:
        return self.channel.fileno()

    def logPrefix(self) -> str:  # noqa: N802
        return "RelayWorkerChannel"

    def doRead(self) -> None:  # noqa: N802
        while True:
            try:
                message, fds, _, _ = socket.recv_fds(self.channel, 16, 4)
            except BlockingIOError:
                return
            except OSError:
                message, fds = b"", []
            if not message and not fds:  # the master is gone: stop like on SIGTERM
                self.stopListening()
                self.log.msg("relay master went away; shutting down")
                try:
                    self.reactor.stop()
                except ReactorNotRunning:  # (already shutting down)
                    pass
                return
            for fd in fds:
                try:
                    family = FAMILIES.get(message[1:2], socket.AF_INET)
                    factory = self.factories[KINDS.get(message[:1], "line")]
                    with socket.socket(family, socket.SOCK_STREAM, fileno=fd) as conn:
                        adopt(self.reactor, conn, factory)
                except OSError as exc:
                    self.log.msg("cannot adopt a connection from the master: %s" % exc)

    def connectionLost(self, reason: Any = None) -> None:  # noqa: N802
        self.channel.close()

    def stopListening(self) -> None:  # noqa: N802
        """At shutdown, once the connections waiting here are adopted (the daemon's
        ``stop_input``): take no more."""
        if self.channel.fileno() >= 0:
            self.reactor.removeReader(self)
            self.channel.close()


def install_sighup(reactor: Any, daemon: Any, log: Any, index: int) -> None:
    """SIGHUP reloads the worker's rules and lists (in the reactor thread, queued until it
    runs). The master starts a worker with SIGHUP blocked: one it passed on while the
    worker was starting is pending and becomes one reload as soon as it is unblocked here,
    before the receivers start."""
    def reload() -> None:
        log.msg("relay worker %d: SIGHUP, re-reading rules and lists" % index)
        daemon.reload()

    try:
        signal.signal(signal.SIGHUP, lambda signum, frame: reactor.callFromThread(reload))
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGHUP})


def worker_main(argv: list[str] | None = None) -> None:
    """Entry point of a worker process (started by WorkerPool; settings on stdin)."""
    argv = sys.argv[1:] if argv is None else argv
    channel_fd, index, mode = int(argv[0]), int(argv[1]), argv[2]
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the master decides when we stop
    base = Settings()
    base.update(json.loads(sys.stdin.read()))
    settings = worker_settings(base, index)
    from twisted.internet import epollreactor

    epollreactor.install()
    from twisted.internet import reactor  # only after the reactor is installed

    log = log_for(settings, to_files=mode != "fg")

    log_twisted_errors(log)
    daemon = RelayDaemon(settings, log, reactor)
    install_sighup(reactor, daemon, log, index)
    daemon.start()
    channel = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET, fileno=channel_fd)
    reader = ChannelReader(reactor, channel, {
        kind: ReceiverFactory(protocol, daemon.receivers)
        for kind, protocol in TCP_PROTOCOLS.items()}, log)
    reactor.addReader(reader)
    # at shutdown, connections the master passed and we have not adopted yet are
    # adopted and drained like the others (their last lines would go with the channel)
    daemon.ports.append(reader)
    daemon.accepting.append(reader)
    log.msg("carbon-relay worker %d started" % index)
    channel.send(READY)
    reactor.run()
