"""Find results (branch and leaf nodes), graphite's glob helpers and graphite-web's
unpickler table (on carbon.formats.unpickler)."""

from __future__ import annotations

import fnmatch
import re
from collections import deque
from typing import Any, Callable, Iterable, Optional

from carbon.formats import unpickler
from carbon.formats.unpickler import CARBON_GLOBALS, SafeUnpickler

_BRACES = re.compile(r'(\{([^\{\}]*)\})')

Interval = tuple  # (start, end) in epoch seconds


class Node:
    """A find result: ``path`` (dotted), ``name`` (last element), ``is_leaf``, ``local``."""

    __slots__ = ('path', 'name', 'is_leaf', 'local', '_intervals', 'fetcher')

    def __init__(self, path: str, is_leaf: bool, local: bool = True,
                 intervals: Optional[list[Interval]] = None,
                 fetcher: Optional[Callable[[], list[Interval]]] = None) -> None:
        self.path = path
        self.name = path.split('.')[-1]
        self.is_leaf = is_leaf
        self.local = local
        self._intervals = intervals
        self.fetcher = fetcher

    @property
    def intervals(self) -> list[Interval]:
        """Time ranges (start, end) the leaf holds data for; computed on first use."""
        if self._intervals is None:
            self._intervals = self.fetcher() if self.fetcher else []
        return self._intervals

    def merge(self, other: Node) -> None:
        """Absorb another finder's node for the same path (intervals are unioned)."""
        if other.is_leaf and self.is_leaf:
            self._intervals = union_intervals(self.intervals + other.intervals)
            self.fetcher = None
        self.local = self.local and other.local

    def __repr__(self) -> str:
        return '<%s %s>' % ('LeafNode' if self.is_leaf else 'BranchNode', self.path)


def union_intervals(intervals: Iterable[Interval]) -> list[Interval]:
    """Merge overlapping or touching (start, end) pairs, sorted."""
    out: list[list[float]] = []
    for start, end in sorted(intervals):
        if out and start <= out[-1][1]:
            out[-1][1] = max(out[-1][1], end)
        else:
            out.append([start, end])
    return [(s, e) for s, e in out]


def expand_braces(pattern: str) -> list[str]:
    """``a{b,c}d`` -> ['abd', 'acd'] (recursively, deduplicated)."""
    if '{' not in pattern:
        return [pattern]
    out: list[str] = []
    stack = [pattern]
    seen = set()
    while stack:
        s = stack.pop()
        m = _BRACES.search(s)
        if m is None:
            if s not in seen:
                seen.add(s)
                out.append(s)
            continue
        start, end = m.span(1)
        for alt in m.group(2).split(','):
            stack.append(s[:start] + alt + s[end:])
    return out


def match_entries(entries: list[str], pattern: str) -> list[str]:
    """Entries matching a glob with braces (fnmatch semantics, case-sensitive on POSIX)."""
    matching: set[str] = set()
    for variant in expand_braces(pattern):
        matching.update(fnmatch.filter(entries, variant))
    return sorted(matching)


class _Stand:
    """Stand-in for graphite-web's pickled interval classes (only the data is kept)."""

    def __setstate__(self, state: Any) -> None:
        if isinstance(state, tuple):  # (dict state, slots state)
            for part in state:
                if isinstance(part, dict):
                    self.__dict__.update(part)
        elif isinstance(state, dict):
            self.__dict__.update(state)


class IntervalStandIn(_Stand):
    pass


class IntervalSetStandIn(_Stand):
    pass


class GraphiteUnpickler(SafeUnpickler):
    """graphite-web 1.1.10's table (graphite.util's unpickler): carbon's, and list, set,
    frozenset, deque and its interval classes (as stand-ins), which a graphite-web
    cluster peer's find answers carry; carbon's receivers refuse them, as carbon
    1.1.10's do."""

    allowed = {
        **CARBON_GLOBALS,
        ('builtins', 'list'): list, ('builtins', 'set'): set,
        ('builtins', 'frozenset'): frozenset, ('__builtin__', 'list'): list,
        ('__builtin__', 'set'): set, ('collections', 'deque'): deque,
        ('graphite.intervals', 'Interval'): IntervalStandIn,
        ('graphite.intervals', 'IntervalSet'): IntervalSetStandIn,
    }


def safe_loads(data: bytes) -> Any:
    """``pickle.loads`` restricted to plain data and graphite-web's table."""
    return unpickler.safe_loads(data, GraphiteUnpickler)


def intervals_from_wire(value: Any) -> list[Interval]:
    """Intervals from a remote find result: list of pairs or graphite-web's IntervalSet."""
    if value is None:
        return []
    if isinstance(value, IntervalSetStandIn):
        # built from an untrusted pickle: may lack it
        value = getattr(value, 'intervals', [])
    out = []
    for item in value:
        if isinstance(item, IntervalStandIn):
            out.append((item.start, item.end))
        elif isinstance(item, dict):
            out.append((item['start'], item['end']))
        else:
            out.append((item[0], item[1]))
    return out
