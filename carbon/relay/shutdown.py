"""Stopping the relay's clients: flush for SHUTDOWN_FLUSH_TIMEOUT, then spool the rest."""

from __future__ import annotations

from typing import Any, Callable

from twisted.internet import defer

from carbon.relay.destinations import Destination


def flush_then_close(clients: dict[Destination, Any], reactor: Any, seconds: float,
                     log: Any, before_finish: Callable[[], None]) -> defer.Deferred:
    """Keep flushing every client; close each once it is drained (or not connected).
    When all are closed, or after ``seconds``, ``before_finish()`` is called, the
    clients still open are aborted, every client spools what it still holds, and the
    Deferred fires."""
    done: defer.Deferred = defer.Deferred()
    deadline = reactor.seconds() + seconds
    for client in clients.values():
        client.begin_stop()
    closing: dict[Destination, defer.Deferred] = {}

    def poll() -> None:
        for dest, client in clients.items():
            if dest in closing:
                continue
            client.flush()
            if client.drained() or not client.connected:
                closing[dest] = client.close()
        waiting = [d for d in closing.values() if not d.called]
        if (len(closing) == len(clients) and not waiting) or reactor.seconds() >= deadline:
            finish()
        else:
            reactor.callLater(0.02, poll)

    def finish() -> None:
        before_finish()
        left = 0
        for client in clients.values():
            left += client.queued
            if client.protocol is not None:
                client.close(abort=True)
            client.finish()
        spooled = sum(c.spool.points for c in clients.values())
        if spooled:
            log.msg("relay stopped with %d datapoints spooled for the next start "
                    "(%d of them still queued at the flush deadline)" % (spooled, left))
        done.callback(None)

    poll()
    return done
