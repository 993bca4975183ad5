"""Whitelist / blacklist filtering as a pipeline processor."""

from __future__ import annotations

from carbon.config.patternlist import PatternList
from carbon.instrumentation.stats import Stats
from carbon.pipeline import Batch, Processor


class ListFilter(Processor):
    """Drops blacklisted names and, if a whitelist exists, names it does not match.

    Counts ``blacklistMatches`` and ``whitelistRejects`` like carbon 1.1.10.
    """

    def __init__(self, whitelist: PatternList | None, blacklist: PatternList | None,
                 stats: Stats) -> None:
        self.whitelist = whitelist
        self.blacklist = blacklist
        self.stats = stats

    def reload(self) -> None:
        for patterns in (self.whitelist, self.blacklist):
            if patterns is not None:
                patterns.reload()

    def process(self, batch: Batch) -> Batch:
        blacklist = self.blacklist if self.blacklist else None
        whitelist = self.whitelist if self.whitelist else None
        if blacklist is None and whitelist is None:
            return batch
        kept: Batch = []
        black = white = 0
        for point in batch:
            name = point[0]
            if blacklist is not None and blacklist.matches(name):
                black += 1
            elif whitelist is not None and not whitelist.matches(name):
                white += 1
            else:
                kept.append(point)
        if black:
            self.stats.increment("blacklistMatches", black)
        if white:
            self.stats.increment("whitelistRejects", white)
        return kept
