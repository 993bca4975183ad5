"""Run a test body on a fresh, private Twisted reactor (no global reactor involved);
the processes of relay daemons a test started, and their cleanup."""

from __future__ import annotations

import os
import signal
import subprocess
from typing import Any, Callable

from twisted.internet import defer, task
from twisted.internet.epollreactor import EPollReactor
from twisted.logger import formatEvent, globalLogPublisher
from twisted.python.failure import Failure


def run_reactor(body: Callable[[Any], Any], timeout: float = 30.0) -> Any:
    """Call ``body(reactor)`` (which may return a Deferred) on a new reactor; re-raise."""
    reactor = EPollReactor()
    outcome: dict[str, Any] = {}

    def start() -> None:
        d = defer.maybeDeferred(body, reactor)

        def done(result: Any) -> None:
            outcome.setdefault("result", result)
            if reactor.running:
                reactor.stop()
        d.addBoth(done)

    def expire() -> None:
        outcome.setdefault("result", Failure(TimeoutError("test body ran over %.0f s" % timeout)))
        reactor.stop()

    errors: list[str] = []

    def observe(event: dict) -> None:  # errors raised in reactor callbacks fail the test
        if event.get("log_failure") is not None or event.get("isError"):
            errors.append(formatEvent(event) or repr(event.get("log_failure")))

    reactor.callWhenRunning(start)
    timer = reactor.callLater(timeout, expire)
    globalLogPublisher.addObserver(observe)
    try:
        reactor.run(installSignalHandlers=False)
    finally:
        globalLogPublisher.removeObserver(observe)
    if timer.active():
        timer.cancel()
    for call in reactor.getDelayedCalls():
        call.cancel()
    for selectable in reactor.removeAll():  # leftovers of a failed test: close their fds
        try:
            selectable.connectionLost(Failure(ConnectionError("test over")))
        except Exception:  # noqa: BLE001 - best-effort cleanup
            pass
    reactor.waker.connectionLost(None)
    reactor._poller.close()
    result = outcome.get("result")
    if isinstance(result, Failure):
        result.raiseException()
    if errors:
        raise AssertionError("errors logged in the reactor:\n" + "\n".join(errors))
    return result


def sleep(reactor: Any, seconds: float) -> defer.Deferred:
    return task.deferLater(reactor, seconds, lambda: None)


@defer.inlineCallbacks
def wait_for(reactor: Any, predicate: Callable[[], bool], timeout: float = 10.0,
             step: float = 0.02, what: str = "condition") -> Any:
    """Poll ``predicate`` until true; fail after ``timeout`` seconds."""
    deadline = reactor.seconds() + timeout
    while not predicate():
        if reactor.seconds() > deadline:
            raise AssertionError("timed out after %.1f s waiting for %s" % (timeout, what))
        yield sleep(reactor, step)


def children(pid: int) -> list[int]:
    """The pids whose parent is ``pid`` (a relay master's workers), from /proc."""
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open("/proc/%s/stat" % entry) as handle:
                    if int(handle.read().rsplit(")", 1)[1].split()[1]) == pid:
                        out.append(int(entry))
            except (OSError, ValueError):
                continue
    return out


def alive(pid: int) -> bool:
    """``pid`` runs (a zombie does not)."""
    try:
        with open("/proc/%d/stat" % pid) as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def run_relays(body: Callable[[Any], Any], procs: list[subprocess.Popen[Any]],
               timeout: float) -> Any:
    """``run_reactor(body)``; then, whatever happened, kill what is left of the relay
    daemons ``body`` started (the processes it put in ``procs``) and their workers."""
    try:
        return run_reactor(body, timeout=timeout)
    finally:
        for proc in procs:
            for child in children(proc.pid):
                try:
                    os.kill(child, signal.SIGKILL)
                except OSError:
                    pass
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)


def unread(port: int) -> int:
    """Bytes sent to 127.0.0.1:``port`` that no process has read yet, plus connections to
    it not yet accepted (a listener's receive queue), from /proc/net/tcp: 0 once a daemon
    listening there has read (and so routed) everything sent to it."""
    total = 0
    with open("/proc/net/tcp") as table:
        for row in list(table)[1:]:
            fields = row.split()
            address, local_port = fields[1].split(":")
            if address == "0100007F" and int(local_port, 16) == port:
                total += int(fields[4].split(":")[1], 16)
    return total
