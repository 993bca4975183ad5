"""The relay's lean-path routing index: metric name bytes -> a one-byte route code.

A route code stands for one set of destinations (an index into the sink's client
list, replicas included); ``tables[k]`` translates a string of codes into one byte a
line, 1 where destination ``k`` gets that line. So a whole read is routed with C-level
operations: ``bytes(map(index.__getitem__, names))``, one ``translate`` and one
``itertools.compress`` per destination.

The index is bounded like the router's LRU (RELAY_HASH_CACHE_SIZE names): two
generations, the full one retired when the current one fills, names found in the
retired one are carried over. It follows the router's ``generation`` (bumped by
``clear_cache()`` whenever placement may change: destinations added or removed,
rules reloaded).
"""

from __future__ import annotations

from operator import methodcaller
from typing import Callable, Sequence

from carbon.relay.destinations import Destination
from carbon.relay.routing import DatapointRouter

MAX_CODES = 256
_DECODE = methodcaller("decode", "utf-8", "replace")


class RouteIndex:
    """Name -> route code for the destinations of one RelaySink (see module doc)."""

    def __init__(self, router: DatapointRouter, destinations: Sequence[Destination],
                 size: int) -> None:
        self.router = router
        self.position = {dest: k for k, dest in enumerate(destinations)}
        self.size = max(0, int(size))
        self.compute_many: Callable[[list[str]], Sequence[Sequence[Destination]]] = \
            router.destinations_many
        self.current: dict[bytes, int] = {}
        self.retired: dict[bytes, int] = {}
        self.codes_of: dict[tuple[int, ...], int] = {}
        self.codes_by_answer: dict[tuple[Destination, ...], int] = {}  # answer -> code
        self.members: list[tuple[int, ...]] = []  # code -> destination positions
        self.tables = [bytearray(MAX_CODES) for _ in destinations]
        self.generation = router.generation
        self.code_for(())  # code 0: no destination

    def reset(self) -> None:
        self.current, self.retired = {}, {}
        self.generation = self.router.generation

    def code_for(self, positions: tuple[int, ...]) -> int | None:
        """The code of a destination set; None once all 256 codes are taken."""
        code = self.codes_of.get(positions)
        if code is None:
            if len(self.members) >= MAX_CODES:
                return None
            code = len(self.members)
            self.codes_of[positions] = code
            self.members.append(positions)
            for k in positions:
                self.tables[k][code] = 1
        return code

    def codes(self, names: list[bytes]) -> bytes | None:
        """One route code a name; None if the names need more than 256 codes."""
        if self.generation != self.router.generation:
            self.reset()
        current = self.current
        try:
            return bytes(map(current.__getitem__, names))
        except KeyError:
            pass
        known = self._learn(names)
        return None if known is None else bytes(map(known.__getitem__, names))

    def _learn(self, names: list[bytes]) -> dict[bytes, int] | None:
        """Add the unknown names of ``names``; returns a dict holding all of them.

        Every step is a C-level set, map or zip over the whole read: names found in the
        retired generation are carried over, the rest are placed by ``place``.
        """
        current, retired = self.current, self.retired
        missing = set(names).difference(current)
        carried = retired.keys() & missing
        if carried:
            current.update(zip(carried, map(retired.__getitem__, carried), strict=False))
            missing -= carried
        if missing:
            unknown = list(missing)
            codes = self.place(unknown)
            if codes is None:
                return None
            current.update(zip(unknown, codes, strict=True))
        if len(current) > self.size:
            self.retired, self.current = current, {}
        return current

    def place(self, unknown: list[bytes]) -> bytes | None:
        """The route codes of names (one byte each) by one ``destinations_many`` call,
        the answers turned into codes through a memo of the few distinct answers (keyed
        by ``id``: every answer stays alive in ``answers`` for the whole call, so no two
        of them share an id); None past 256 codes. Nothing is remembered."""
        answers = self.compute_many(list(map(_DECODE, unknown)))
        distinct = dict(zip(map(id, answers), answers, strict=True))
        memo: dict[int, int] = {}
        for key, found in distinct.items():
            code = self._answer_code(tuple(found))
            if code is None:
                return None
            memo[key] = code
        return bytes(map(memo.__getitem__, map(id, answers)))

    def _answer_code(self, answer: tuple[Destination, ...]) -> int | None:
        """The code of one router answer (a tuple of destinations); None past 256 codes."""
        code = self.codes_by_answer.get(answer)
        if code is None:
            code = self.code_for(tuple(sorted(
                {self.position[d] for d in answer if d in self.position})))
            if code is not None:
                self.codes_by_answer[answer] = code
        return code
