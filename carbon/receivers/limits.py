"""Limits that announce themselves: open files and receiver connections.

* ``raise_open_file_limit`` lifts the soft RLIMIT_NOFILE to the hard limit at start
  and says so in the log.
* ``ConnectionLimit`` decides how many receiver connections may be open at once: the
  smaller of MAX_RECEIVER_CONNECTIONS and what the open-file limit leaves once the
  descriptors open at start, those other parts claim (the whisper descriptor cache,
  spools, destinations) and a reserve (RECEIVER_FD_RESERVE: carbonlink, new whisper
  files, log files, self-metrics) are set aside. Past it, new connections are accepted
  and closed at once (the sender sees the close and can retry elsewhere) and counted;
  one line per interval gives the counts.
* ``GuardedPort`` is a listening TCP port that, should accept() still fail for want of
  descriptors, counts it for that line (Twisted closes the waiting connections and
  logs nothing we keep).
"""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass
from typing import Any, Callable

from twisted.internet import tcp

EXHAUSTED = (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM)
BACKOFF_SECONDS = 1.0


def open_file_limit() -> tuple[int, int]:
    """(soft, hard) RLIMIT_NOFILE; -1 stands for unlimited or unknown."""
    try:
        import resource
    except ImportError:  # pragma: no cover - not POSIX
        return -1, -1
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    unlimited = resource.RLIM_INFINITY
    return (-1 if soft == unlimited else soft), (-1 if hard == unlimited else hard)


def raise_open_file_limit(log: Callable[[str], None]) -> tuple[int, int]:
    """Soft open-file limit up to the hard one (the whisper descriptor cache and the
    receivers want room); logs both. Returns the (soft, hard) now in force."""
    import resource

    soft, hard = open_file_limit()
    if soft != hard:
        try:
            raw_hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
            resource.setrlimit(resource.RLIMIT_NOFILE, (raw_hard, raw_hard))
        except (ValueError, OSError) as exc:
            log("Open-file limit: could not raise soft %d to hard %d: %s" % (soft, hard, exc))
            return soft, hard
        log("Open-file limit: soft %s raised to the hard limit %s"
            % (_text(soft), _text(hard)))
        return hard, hard
    log("Open-file limit: soft %s, hard %s" % (_text(soft), _text(hard)))
    return soft, hard


def _text(limit: int) -> str:
    return "unlimited" if limit < 0 else str(limit)


def open_descriptors() -> int:
    """Descriptors this process has open now (-1 if it cannot tell)."""
    try:
        return len(os.listdir("/proc/self/fd")) - 1  # minus listdir's own
    except OSError:
        return -1


@dataclass(frozen=True)
class LimitConfig:
    """What the connection limit reads of carbon.conf (``from_settings``; the defaults
    are carbon.config.defaults')."""

    max_connections: float  # MAX_RECEIVER_CONNECTIONS (inf: no limit of its own)
    fd_reserve: int  # RECEIVER_FD_RESERVE

    @classmethod
    def from_settings(cls, settings: Any) -> LimitConfig:
        return cls(max_connections=settings["MAX_RECEIVER_CONNECTIONS"],
                   fd_reserve=int(settings["RECEIVER_FD_RESERVE"]))


class ConnectionLimit:
    """The receiver connection limit and the bookkeeping of refusals."""

    def __init__(self, config: LimitConfig, log: Callable[[str], None]) -> None:
        self.log = log
        self.configured = config.max_connections
        self.reserve = config.fd_reserve
        self.soft = -1
        self.by_descriptors: float = float("inf")
        self.limit: float = self.configured
        self.refused = 0
        self.exhausted = 0  # accept() failures for want of descriptors
        self.quiet = True  # nothing refused in the last interval: log the first at once
        self.announced = False  # this interval's first event was logged at once

    def plan(self, claimed: int = 0) -> None:
        """Work out the limit once the daemon's own descriptors are open (before any
        receiver connection): ``claimed`` are descriptors other parts may still open."""
        self.soft = open_file_limit()[0]
        opened = open_descriptors()
        if self.soft > 0 and opened >= 0:
            # a small limit keeps a smaller reserve (an eighth, at least 16)
            self.reserve = min(self.reserve, max(16, self.soft // 8))
            self.by_descriptors = max(1, self.soft - self.reserve - claimed - opened)
            self.log("Receiver connections limited to %d by the open-file limit %d "
                     "(%d open, %d claimed by other parts, %d reserved)"
                     % (self.by_descriptors, self.soft, opened, claimed, self.reserve)
                     if self.by_descriptors < self.configured else
                     "Receiver connections: MAX_RECEIVER_CONNECTIONS %s, open-file limit %d "
                     "leaves room for %d" % (self.configured, self.soft,
                                             self.by_descriptors))
        self.limit = min(self.configured, self.by_descriptors)

    def admit(self, open_connections: int) -> bool:
        """False (and counted) when a new connection would pass the limit."""
        if open_connections < self.limit:
            return True
        self.refused += 1
        if self.quiet:
            self.quiet, self.announced = False, True
            self.log(self.summary(open_connections, "connection refused"))
        return False

    def descriptors_exhausted(self, port: Any, exc: OSError) -> None:
        self.exhausted += 1
        if self.quiet:
            self.quiet, self.announced = False, True
            self.log(self.summary(-1, "%s: cannot accept (%s)" % (
                port, errno.errorcode.get(exc.errno or 0, exc.errno))))

    def summary(self, open_connections: int, what: str) -> str:
        reason = ("MAX_RECEIVER_CONNECTIONS" if self.configured <= self.by_descriptors
                  else "open-file limit %d less %d reserved" % (self.soft, self.reserve))
        opened = "" if open_connections < 0 else "%d " % open_connections
        return ("%s: %sreceiver connections open, limit %s (%s)"
                % (what, opened, _text(int(self.limit))
                   if self.limit != float("inf") else "none", reason))

    def flush(self, open_connections: int) -> None:
        """Once per interval: one line with the counts since the last, if any (a
        refusal after a quiet interval is logged at once, then counted here)."""
        events = self.refused + self.exhausted
        self.quiet = not events
        if events > 1 or (events and not self.announced):
            self.log(self.summary(open_connections, "%d connections refused and %d accept "
                                  "failures for want of descriptors in the last interval"
                                  % (self.refused, self.exhausted)))
        self.refused = 0
        self.exhausted = 0
        self.announced = False


class _CountingSocket:
    """A listening socket whose accept() failures for want of descriptors are reported to
    ``on_exhausted`` before they reach the port (unchanged)."""

    def __init__(self, sock: Any, on_exhausted: Callable[[OSError], None]) -> None:
        self._sock = sock
        self._on_exhausted = on_exhausted

    def accept(self) -> Any:
        try:
            return self._sock.accept()
        except OSError as exc:
            if exc.errno in EXHAUSTED:
                self._on_exhausted(exc)
            raise

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sock, name)


class GuardedPort(tcp.Port):
    """A TCP port whose accept() failures for want of descriptors are counted and logged
    once per interval. (Twisted itself, on EMFILE, frees a descriptor it keeps in
    reserve and closes the connections waiting in the backlog: they are refused, not
    left hanging, and the reactor does not spin; but it says so only at info level.)"""

    def __init__(self, port: int, factory: Any, backlog: int, interface: str, reactor: Any,
                 limit: ConnectionLimit | None) -> None:
        super().__init__(port, factory, backlog, interface, reactor)
        self.limit = limit

    def startListening(self) -> None:  # noqa: N802
        super().startListening()
        if self.limit is not None:
            self.socket = _CountingSocket(self.socket, self._exhausted)

    def _exhausted(self, exc: OSError) -> None:
        assert self.limit is not None  # (installed only with a limit)
        self.limit.descriptors_exhausted(self, exc)


def release_reserved_descriptor() -> None:
    """Close the descriptor Twisted holds in reserve for EMFILE recovery.

    Twisted's first TCP listen opens /dev/null (``tcp._reservedFD``) and keeps it for the
    life of the process, to free it when accept() fails with EMFILE; nothing closes it,
    so at exit the interpreter reports it unclosed (a ResourceWarning). A daemon calls
    this once its ports are closed; a later listen reserves it again."""
    reservation = getattr(tcp, "_reservedFD", None)
    if reservation is not None and hasattr(reservation, "available") and reservation.available():
        reservation.__enter__()  # the reservation's own release (its __exit__ re-reserves)


def listen_tcp(reactor: Any, port: int, factory: Any, backlog: int = 50,
               interface: str = "", limit: ConnectionLimit | None = None) -> GuardedPort:
    """``reactor.listenTCP`` with a ``GuardedPort``."""
    listening = GuardedPort(port, factory, backlog, interface, reactor, limit)
    listening.startListening()
    return listening
