"""RELAY_WORKERS = N: spread inbound TCP connections over N relay processes.

The daemon started by the command line (the master) keeps its pidfile, UDP, AMQP
and its own RelaySink, and starts N - 1 worker processes. Its line and pickle ports
accept connections themselves (``HandOffPort``) and deal them out in turn: its own
turn is adopted into its reactor, a worker's turn is passed over a Unix socket
(SCM_RIGHTS) and adopted there. Each process is a whole relay: receivers, flow
control, routing, its own destination connections and its own spool
(``relay-spool/<program>-<instance>-w<i>``) and self-metrics (instance ``<i>-w<i>``).
A connection stays in the process that took it, so a sender's order is kept.

Workers stop when asked (SIGTERM: flush, spool, exit) or when the master is gone
(its end of the Unix socket closes). The master restarts a worker that dies, and on
shutdown stops the workers and waits for them (SHUTDOWN_FLUSH_TIMEOUT plus 10 s).
This module is the master's side; a worker process runs
:mod:`carbon.daemon.relay_worker`.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from typing import Any

from twisted.internet import defer, task

from carbon.config.errors import ConfigError
from carbon.receivers.handoff import adopt

KINDS = {b"l": "line", b"p": "pickle"}
READY = b"ready"
FAMILIES = {b"4": socket.AF_INET, b"6": socket.AF_INET6}


def worker_count(settings: Any) -> int:
    """RELAY_WORKERS as an int >= 1 (1: a single process, no workers)."""
    value = settings.get("RELAY_WORKERS") or 1
    try:
        return max(1, int(value))
    except (TypeError, ValueError):
        raise ConfigError("RELAY_WORKERS must be a number, not %r" % (value,),
                          settings.get("config_file"), key="RELAY_WORKERS") from None


def worker_settings(settings: Any, index: int) -> Any:
    """A worker's settings: no ports of its own, its own instance name and log dir."""
    out = type(settings)()
    out.update(settings)
    out["instance"] = "%s-w%d" % (settings.get("instance") or "a", index)
    out["LOG_DIR"] = os.path.join(settings.get("LOG_DIR") or ".", "w%d" % index)
    for key in ("LINE_RECEIVER_PORT", "PICKLE_RECEIVER_PORT", "UDP_RECEIVER_PORT"):
        out[key] = 0
    out["ENABLE_UDP_LISTENER"] = False
    out["ENABLE_AMQP"] = False
    out["RELAY_WORKERS"] = 1
    return out


class WorkerPool:
    """The master's side: start, feed, watch and stop the worker processes."""

    def __init__(self, settings: Any, count: int, log: Any, reactor: Any,
                 foreground: bool = True, check_interval: float = 1.0) -> None:
        self.settings = settings
        self.count = count
        self.log = log
        self.reactor = reactor
        self.foreground = foreground
        self.check_interval = check_interval
        self.workers: dict[int, tuple[subprocess.Popen[bytes], socket.socket]] = {}
        self.turn = 0
        self.stopping = False
        self.holding = False  # (shutdown) connections accepted now stay in the master
        self._loop: task.LoopingCall | None = None

    def start(self, timeout: float = 30.0) -> None:
        """Start the workers and wait (blocking, before the reactor runs) until each says
        it is ready, so connections handed out at once are served at once."""
        for index in range(1, self.count):
            self._spawn(index)
        for index, (proc, channel) in self.workers.items():
            channel.settimeout(timeout)
            try:
                ready = channel.recv(16) == READY
            except OSError:
                ready = False
            channel.settimeout(1.0)
            if not ready:
                self.log.msg("relay worker %d (pid %d) did not report ready"
                             % (index, proc.pid))
        self._loop = task.LoopingCall(self._check)
        self._loop.clock = self.reactor
        self._loop.start(self.check_interval, now=False)

    def _spawn(self, index: int) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        code = "from carbon.daemon.relay_worker import worker_main; worker_main()"
        # The worker inherits our signal mask: SIGHUP blocked until it has a handler, so
        # a reload passed on while it starts stays pending instead of ending it. Blocked
        # here for the fork and exec only.
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGHUP})
        try:
            proc = subprocess.Popen(
                [sys.executable, "-c", code, str(theirs.fileno()), str(index),
                 "fg" if self.foreground else "bg"],
                stdin=subprocess.PIPE, pass_fds=[theirs.fileno()])
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
            theirs.close()
        assert proc.stdin is not None
        proc.stdin.write(json.dumps(dict(self.settings), default=str).encode())
        proc.stdin.close()
        ours.settimeout(1.0)
        self.workers[index] = (proc, ours)
        self.log.msg("started relay worker %d (pid %d)" % (index, proc.pid))

    def _check(self) -> None:
        for index, (proc, channel) in list(self.workers.items()):
            if proc.poll() is None or self.stopping:
                continue
            channel.close()
            self.log.msg("relay worker %d (pid %d) exited with %s; restarting"
                         % (index, proc.pid, proc.returncode))
            self._spawn(index)

    def dispatch(self, conn: socket.socket, kind: str, factory: Any) -> None:
        """Give an accepted connection to the next process in turn (ourselves at 0)."""
        self.turn = (self.turn + 1) % self.count
        worker = self.workers.get(self.turn)
        if worker is not None and worker[0].poll() is None and not (self.stopping
                                                                     or self.holding):
            message = kind[0].encode() + (b"6" if conn.family == socket.AF_INET6 else b"4")
            try:
                socket.send_fds(worker[1], [message], [conn.fileno()])
                return
            except OSError as exc:
                self.log.msg("cannot hand a connection to relay worker %d: %s"
                             % (self.turn, exc))
        adopt(self.reactor, conn, factory)

    def hold(self) -> None:
        """Shutdown: connections accepted from now on (those waiting in the listen
        backlog) are drained by the master, which stops its workers only afterwards."""
        self.holding = True

    def stop(self) -> defer.Deferred[None]:
        """SIGTERM every worker; fires once all have exited (SIGKILL after the deadline)."""
        self.stopping = True
        if self._loop is not None and self._loop.running:
            self._loop.stop()
        for proc, _ in self.workers.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        deadline = self.reactor.seconds() + float(
            self.settings.get("SHUTDOWN_FLUSH_TIMEOUT") or 0) + 10
        done: defer.Deferred[None] = defer.Deferred()

        def poll() -> None:
            running = [p for p, _ in self.workers.values() if p.poll() is None]
            if running and self.reactor.seconds() < deadline:
                self.reactor.callLater(0.05, poll)
                return
            for proc in running:
                self.log.msg("relay worker pid %d did not stop in time: killed" % proc.pid)
                proc.kill()
                proc.wait()
            for _, channel in self.workers.values():
                channel.close()
            done.callback(None)

        poll()
        return done
