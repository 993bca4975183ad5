"""Whitelist / blacklist for LineBatches: the relay's lean path keeps filtering.

``LineListFilter`` wraps a ``carbon.processors.filters.ListFilter``: tuple batches go
to it unchanged; a LineBatch is filtered by name with a bounded per-name verdict
cache, so a read whose names all pass costs one C-level lookup a line. The cache is
dropped when either pattern list is reloaded with new patterns.
"""

from __future__ import annotations

from itertools import compress
from carbon.pipeline import Batch, LineBatch, Processor
from carbon.processors.filters import ListFilter

KEEP, BLACK, WHITE = 1, 2, 3  # verdict bytes


class LineListFilter(Processor):
    """A ListFilter that also handles LineBatches (see the module docstring)."""

    handles_lines = True

    def __init__(self, list_filter: ListFilter, size: int = 100000) -> None:
        self.filter = list_filter
        self.size = max(1, size)
        self.verdicts: dict[bytes, int] = {}
        self._patterns: tuple[object, ...] = ()  # the pattern lists the verdicts are of

    def reload(self) -> None:
        self.filter.reload()

    def process(self, batch: Batch) -> Batch:
        return self.filter.process(batch)

    def _verdict(self, name: bytes) -> int:
        black, white = self.filter.blacklist, self.filter.whitelist
        try:
            text = name.decode("utf-8")
        except UnicodeDecodeError:  # canonical lines are UTF-8; be safe anyway
            return KEEP
        if black and black.matches(text):
            return BLACK
        if white and not white.matches(text):
            return WHITE
        return KEEP

    def process_lines(self, batch: LineBatch) -> LineBatch:
        black, white = self.filter.blacklist, self.filter.whitelist
        if not black and not white:
            return batch
        patterns = (black.patterns if black is not None else None,
                    white.patterns if white is not None else None)
        verdicts = self.verdicts
        if (len(verdicts) > self.size or len(self._patterns) != 2
                or patterns[0] is not self._patterns[0] or patterns[1] is not self._patterns[1]):
            verdicts.clear()  # a reload replaces the pattern lists
            self._patterns = patterns
        names = batch.names
        for name in set(names).difference(verdicts):
            verdicts[name] = self._verdict(name)
        marks = bytes(map(verdicts.__getitem__, names))
        if marks.count(KEEP) == len(marks):
            return batch
        stats = self.filter.stats
        if marks.count(BLACK):
            stats.increment("blacklistMatches", marks.count(BLACK))
        if marks.count(WHITE):
            stats.increment("whitelistRejects", marks.count(WHITE))
        keep = marks.translate(bytes([0, 1, 0, 0]) + bytes(252))
        values, stamps = batch.values, batch.stamps
        return LineBatch(list(compress(batch.lines, keep)), list(compress(names, keep)),
                         None if values is None else list(compress(values, keep)),
                         None if stamps is None else list(compress(stamps, keep)))
