"""``graphite-render --workers N``: N server processes sharing one listening socket.

One process runs Python on one core at a time; gunicorn's answer is worker processes
and so is this. The parent binds the port, forks the workers (each then builds its own
app, thread pool and Twisted reactor on the inherited socket; the kernel hands each
connection to one of them), and afterwards only supervises: SIGHUP is passed on to
every worker (each re-reads the settings file), SIGTERM/SIGINT stop them all (by PID)
and then the parent, and a worker that dies is replaced (one log line each). A worker
that exits with an error status within its first seconds stops the whole server
instead, with that status (a broken setting would otherwise be restarted forever).

A worker starts with SIGHUP blocked: one sent while it builds its app stays pending
until ``run_worker`` has its handler in place and unblocks it (webapp.server's
``install_reload``), instead of ending the worker. A worker started after the server
took a SIGHUP (a replacement) finds one pending too, so it re-reads the settings file
as the others did.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import sys
import time
from typing import Callable

log = logging.getLogger("webapp")
EARLY_EXIT_SECONDS = 5.0
BACKLOG = 1024
SUPERVISOR_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def listening_socket(bind: str, port: int) -> socket.socket:
    """A bound, listening, non-blocking TCP socket (raises OSError)."""
    family = socket.AF_INET6 if ':' in bind else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((bind, port))
        sock.listen(BACKLOG)
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return sock


class Supervisor:
    """Forks ``workers`` children running ``run_worker(sock)`` and keeps them running."""

    def __init__(self, sock: socket.socket, workers: int,
                 run_worker: Callable[[socket.socket], int]) -> None:
        self.sock = sock
        self.workers = workers
        self.run_worker = run_worker
        self.children: dict[int, float] = {}      # pid -> start time
        self.stopping = False
        self.hups = 0                              # SIGHUPs taken (passed on to the workers)
        self.status = 0

    def _spawn(self) -> None:
        # Blocked across fork: the child must not run the parent's handlers (before it
        # resets them). Blocking does not cover a signal that arrived just before: its
        # Python handler runs at the interpreter's next check, which can come after the
        # fork and before the child is in self.children (seen on 3.13), so the SIGHUP
        # count is compared once the child is registered.
        hups = self.hups
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, SUPERVISOR_SIGNALS)
        try:
            pid = os.fork()
        except BaseException:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
            raise
        if pid == 0:                               # the worker
            code = 1
            try:
                for signum in SUPERVISOR_SIGNALS:
                    signal.signal(signum, signal.SIG_DFL)
                signal.pthread_sigmask(signal.SIG_SETMASK, set(mask) | {signal.SIGHUP})
                if hups:                           # read the settings file as the others did
                    os.kill(os.getpid(), signal.SIGHUP)
                code = self.run_worker(self.sock)
            except BaseException:                  # noqa: BLE001 - report, then exit
                logging.getLogger("webapp").exception("graphite-render worker failed")
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        self.children[pid] = time.monotonic()
        if self.hups != hups:                      # taken after the fork, before the line above
            os.kill(pid, signal.SIGHUP)            # (pending in the child until it can reload)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)

    def _signal_children(self, signum: int) -> None:
        for pid in list(self.children):
            try:
                os.kill(pid, signum)
            except ProcessLookupError:
                pass

    def _on_stop(self, signum: int, frame: object) -> None:
        self.stopping = True
        self._signal_children(signal.SIGTERM)

    def _on_hup(self, signum: int, frame: object) -> None:
        self.hups += 1
        self._signal_children(signal.SIGHUP)

    def run(self, announce: Callable[[], None] | None = None) -> int:
        """Serve until SIGTERM/SIGINT (or a worker's early failure); the exit status.
        ``announce`` (say where it listens) is called once the signals are handled."""
        signal.signal(signal.SIGTERM, self._on_stop)
        signal.signal(signal.SIGINT, self._on_stop)
        signal.signal(signal.SIGHUP, self._on_hup)
        if announce is not None:
            announce()
        for _ in range(self.workers):
            self._spawn()
        while self.children:
            try:
                pid, status = os.wait()
            except ChildProcessError:
                break
            started = self.children.pop(pid, None)
            if started is None or self.stopping:
                continue
            code = os.waitstatus_to_exitcode(status)
            if code > 0 and time.monotonic() - started < EARLY_EXIT_SECONDS:
                log.error('graphite-render worker %d exited with status %d within %.0f s of '
                          'starting; stopping', pid, code, EARLY_EXIT_SECONDS)
                self.status = code or 1
                self._on_stop(signal.SIGTERM, None)
                continue
            log.error('graphite-render worker %d exited with status %d; starting another',
                      pid, code)
            self._spawn()
        self.sock.close()
        return self.status
