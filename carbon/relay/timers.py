"""The relay's timed work on its reactor: repeating checks and the deferred flush.

Points are sent TIME_TO_DEFER_SENDING seconds after they are queued (or at once when a
queue reaches its high watermark), so a burst goes out in whole buffers.
"""

from __future__ import annotations

from typing import Any, Callable

from twisted.internet import task


class RelayTimers:
    """Repeating loops plus one pending flush at a time; ``flush_all`` answers whether
    anything is left to send (then another flush is scheduled)."""

    def __init__(self, reactor: Any, defer_seconds: float,
                 flush_all: Callable[[], bool]) -> None:
        self.reactor = reactor
        self.defer_seconds = defer_seconds
        self.flush_all = flush_all
        self._flush_call: Any = None
        self._loops: list[task.LoopingCall] = []

    def every(self, seconds: float, func: Callable[[], None]) -> None:
        """Call ``func`` every ``seconds`` (the first time after one interval)."""
        loop = task.LoopingCall(func)
        loop.clock = self.reactor
        loop.start(seconds, now=False)
        self._loops.append(loop)

    def stop_loops(self) -> None:
        for loop in self._loops:
            if loop.running:
                loop.stop()
        self._loops = []

    def schedule_flush(self) -> None:
        """Flush in TIME_TO_DEFER_SENDING seconds unless a flush is already pending."""
        if self._flush_call is None:
            self._flush_call = self.reactor.callLater(self.defer_seconds, self._flush)

    def cancel_flush(self) -> None:
        if self._flush_call is not None and self._flush_call.active():
            self._flush_call.cancel()
        self._flush_call = None

    def _flush(self) -> None:
        self._flush_call = None
        if self.flush_all():
            self.schedule_flush()
