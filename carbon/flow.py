"""Flow control: pause every receiver when a sink is full, resume when it drains (the
back-pressure contract between the receivers and the sinks, under both)."""

from __future__ import annotations

from typing import Any


class FlowControl:
    """Tracks live receiver transports and pauses/resumes them together.

    Sinks call ``pause(reason)`` when they reach their high watermark and
    ``resume(reason)`` at the low watermark. Each reason is tracked separately so
    the cache and a relay queue can both hold receivers paused. A paused TCP
    transport stops reading, so back-pressure reaches the sender; nothing is
    dropped.
    """

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        self.transports: set[Any] = set()
        self.reasons: set[str] = set()
        self.pause_count = 0

    @property
    def paused(self) -> bool:
        return bool(self.reasons)

    def register(self, transport: Any) -> None:
        self.transports.add(transport)
        if self.paused:
            transport.pauseProducing()

    def unregister(self, transport: Any) -> None:
        self.transports.discard(transport)

    def pause(self, reason: str = "sink") -> None:
        if not self.enabled or reason in self.reasons:
            return
        first = not self.reasons
        self.reasons.add(reason)
        if first:
            self.pause_count += 1
            for transport in list(self.transports):
                transport.pauseProducing()

    def resume(self, reason: str = "sink") -> None:
        if reason not in self.reasons:
            return
        self.reasons.discard(reason)
        if not self.reasons:
            for transport in list(self.transports):
                transport.resumeProducing()
