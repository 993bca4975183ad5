"""The aggregate stage of carbon-aggregator's pipeline.

The reference pipeline is ``rewrite:pre -> aggregate -> rewrite:post -> relay``
for received points; aggregates it generates skip the rewrite stages and go
straight to the relay. So: run received batches through ``process`` (what it
returns continues to rewrite:post), and send ``flush(now)``'s batch directly to
the relay sink.

Forwarding follows carbon 1.1.10: with FORWARD_ALL = True a received point
passes through unless its own name is one of the aggregates it feeds (so a
rule ``a (60) = sum a`` does not pass the raw ``a`` on to overwrite the
aggregate); with FORWARD_ALL = False nothing received passes through, matching
or not ("the carbon-aggregator will only ever send the output of aggregation").
``forward_unmatched=True`` makes points no rule matches pass even then.

When several rules send a point to the same output, the point is added once per
rule and the output's frequency and method are those of the first rule that
created its buffer, as in the reference.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from carbon.aggregator.buffers import BufferManager
from carbon.aggregator.rules import AggregationRule, RuleSet
from carbon.aggregator.staging import append_values, stage
from carbon.instrumentation.stats import Stats
from carbon.pipeline import Batch, LineBatch, Processor

_MIN_STAMP, _MAX_STAMP = 0, 1 << 62  # bounds that hold every canonical timestamp
SETTLE_AFTER = 100_000  # staged lines that make process_lines/process_chunk settle
MISS_MESSAGE = "Couldn't match metric %s with any aggregation rule. Passing on un-aggregated."


class _Slot(list[float]):
    """Values staged for one output (``rule`` creates its buffer if needed)."""

    __slots__ = ("output", "rule")

    def __init__(self, output: str, rule: AggregationRule) -> None:
        super().__init__()
        self.output = output
        self.rule = rule


@dataclass(frozen=True)
class AggregationConfig:
    """What the aggregate stage reads of carbon.conf (``from_settings``; the defaults
    are carbon.config.defaults')."""

    forward_all: bool  # FORWARD_ALL
    log_misses: bool  # LOG_AGGREGATOR_MISSES

    @classmethod
    def from_settings(cls, settings: Any) -> AggregationConfig:
        return cls(forward_all=bool(settings["FORWARD_ALL"]),
                   log_misses=bool(settings["LOG_AGGREGATOR_MISSES"]))


class AggregationProcessor(Processor):
    """Feeds matching points into buffers and forwards the rest per FORWARD_ALL.

    Self-metrics (the reference's aggregator instrumentation names):
    ``aggregateDatapointsSent`` is counted per emitted aggregate;
    ``allocatedBuffers`` and ``bufferedDatapoints`` are gauges set by
    ``update_gauges``: ``flush`` calls it after a tick that computed something,
    and the reporter should call it just before taking its snapshot. Points discarded
    as too late / with a non-finite timestamp are counted as
    ``aggregateDatapointsTooLate`` / ``aggregateDatapointsInvalid``.
    """

    handles_lines = True
    handles_chunks = True

    def __init__(self, ruleset: RuleSet, buffers: BufferManager, config: AggregationConfig,
                 stats: Stats, log: Callable[[str], None] | None = None,
                 forward_unmatched: bool | None = None) -> None:
        self.ruleset = ruleset
        self.buffers = buffers
        self.config = config
        self.stats = stats
        self.forward_all = config.forward_all
        self.forward_unmatched = (self.forward_all if forward_unmatched is None
                                  else bool(forward_unmatched))
        self.log_miss = log if (log is not None and config.log_misses
                                and self.forward_all) else None
        # The read stager (C when built; tests swap in the pure-Python twin).
        self.stage: Callable[..., int | list[bytes] | None] = stage
        self._touched: list[_Slot] = []
        self._staged_points = 0  # lines staged since the last settle
        self._staged_key: tuple[float, ...] | None = None
        self._staged_stamp = 0.0
        self._reset_staging()

    def _reset_staging(self) -> None:
        self._staged_key = None  # keys of other frequencies are not comparable
        self._byte_matches: dict[bytes, tuple[_Slot, ...]] = {}
        self._slots: dict[str, _Slot] = {}
        self._shared_outputs = False
        self._frequencies = tuple(sorted({rule.frequency for rule in self.ruleset.rules}))

    def set_ruleset(self, ruleset: RuleSet) -> None:
        """Switch to reloaded rules; buffers of unchanged rules carry on."""
        self.settle()
        self.buffers.rebind(ruleset)
        self.ruleset = ruleset
        self._reset_staging()

    def process_lines(self, batch: LineBatch) -> Batch | LineBatch:
        """``process`` for canonical lines, without tuples when nothing can pass.

        With FORWARD_ALL and forward_unmatched off, a batch whose timestamps all fall
        in the same interval (per rule frequency) as the values already staged has its
        matched values appended to per-output staging lists in arrival order; they are
        added to the buffers (``settle``) before anything reads or changes them, which
        gives the same buffers and counters as ``process``. Any other batch goes
        through ``process`` (after settling) and its result continues as tuples.
        """
        if not self.ruleset.rules:
            return batch if self.forward_unmatched else []
        if (self.forward_all or self.forward_unmatched or batch.values is None
                or batch.stamps is None or self._shared_outputs):
            return self.process(batch.points())
        stamps = batch.stamps
        first = float(stamps[0])
        key = tuple(first - first % freq for freq in self._frequencies)
        if len(set(stamps)) > 1:
            for t in map(float, set(stamps)):
                if tuple(t - t % freq for freq in self._frequencies) != key:
                    return self.process(batch.points())
        for name in set(batch.names).difference(self._byte_matches):
            self._slots_for(name)  # before staging: it may find a shared output
        if self._shared_outputs:
            return self.process(batch.points())
        if key != self._staged_key:
            self.settle()
            self._staged_key = key
            self._staged_stamp = first
        self._stage(batch.names, batch.values)
        self._staged(len(batch))
        return []

    def process_chunk(self, chunk: bytes, max_length: int = 0) -> int | None:
        """Stage a whole read of complete lines; the number of lines, or None.

        The same buffers and counters as ``process_lines(canonical_lines(chunk))``
        when nothing can pass on (FORWARD_ALL and forward_unmatched off): the read is
        checked and staged by ``staging.stage`` (C when built), names seen for the
        first time are matched in one ``_slots_for_many`` call. None (nothing done
        but maybe a ``settle``) when the read needs the line or tuple path: a line
        that is not canonical or over ``max_length``, timestamps in more than one
        interval, or an output fed by two rules.
        """
        if self.forward_all or self.forward_unmatched:
            return None
        if not self.ruleset.rules:
            return self.stage(chunk, max_length, None, None, _MIN_STAMP, _MAX_STAMP, None)
        if self._shared_outputs:
            return None
        bounds = self._bounds(chunk)
        if bounds is None:
            return None
        lo, hi = bounds
        extra: dict[bytes, tuple[_Slot, ...]] = {}
        result = self.stage(chunk, max_length, self._byte_matches, None, lo, hi, self._touched)
        while isinstance(result, list):  # new names (again if a full cache was just cleared)
            extra.update(self._slots_for_many(result))
            if self._shared_outputs:
                return None
            result = self.stage(chunk, max_length, self._byte_matches, extra, lo, hi,
                                self._touched)
        if result is not None:
            self._staged(result)
        return result

    def _staged(self, count: int) -> None:
        """Settle once SETTLE_AFTER lines are staged: staging stays bounded and the
        work is done as the input arrives rather than all at the next tick."""
        self._staged_points += count
        if self._staged_points >= SETTLE_AFTER:
            self.settle()

    def _bounds(self, chunk: bytes) -> tuple[int, int] | None:
        """Timestamps ``lo <= t < hi`` share the first line's intervals (staged key).

        Settles and re-keys the staging when the first line's intervals differ from
        the staged ones; None if its timestamp is not a canonical integer.
        """
        first_line = chunk[:chunk.find(b"\n")]
        text = first_line.rstrip(b"\r").rpartition(b" ")[2]
        if not (text.isdigit() and len(text) <= 15):
            return None
        first = int(text)
        key = tuple(float(first - first % freq) for freq in self._frequencies)
        if key != self._staged_key:
            self.settle()
            self._staged_key = key
            self._staged_stamp = float(first)
        lo = max(first - first % freq for freq in self._frequencies)
        hi = min(first - first % freq + freq for freq in self._frequencies)
        return lo, hi

    def _stage(self, names: list[bytes], values: list[bytes]) -> None:
        cache_get = self._byte_matches.get
        found = []
        for name in names:
            slots = cache_get(name)
            if slots is None:  # the cache is full or off
                slots = self._slots_for(name)
            found.append(slots)
        append_values(found, values, self._touched)

    def _slots_of(self, found: tuple[tuple[AggregationRule, str], ...]) -> tuple[_Slot, ...]:
        """The staging lists of a name's (rule, output) matches; flags an output that
        two rules feed."""
        known = self._slots
        slots: list[_Slot] = []
        for rule, output in found:
            slot = known.get(output)
            if slot is None:
                slot = known[output] = _Slot(output, rule)
            elif slot.rule is not rule or any(s is slot for s in slots):
                self._shared_outputs = True
            slots.append(slot)
        return tuple(slots)

    def _slots_for(self, name: bytes) -> tuple[_Slot, ...]:
        """The staging lists ``name`` feeds (cached)."""
        result = self._slots_of(self.ruleset.matches(name.decode()))
        cache = self._byte_matches
        if self.ruleset.cache_size:
            if len(cache) >= self.ruleset.cache_size:
                cache.clear()
            cache[name] = result
        return result

    def _slots_for_many(self, names: list[bytes]) -> dict[bytes, tuple[_Slot, ...]]:
        """``_slots_for`` for many new names at once (one ``resolve_many``), as a dict."""
        slots_of = self._slots_of
        resolved = self.ruleset.resolve_many(list(map(bytes.decode, names)))
        result = dict(zip(names, map(slots_of, resolved), strict=True))
        size = self.ruleset.cache_size
        cache = self._byte_matches
        if size:
            if len(cache) + len(result) > size:
                cache.clear()
            if len(result) <= size:
                cache.update(result)
        return result

    def settle(self) -> None:
        """Add the staged values to the buffers, outputs in order of first value."""
        touched = self._touched
        self._staged_points = 0
        if not touched:
            return
        self._touched = []
        timestamp = self._staged_stamp
        buffers = self.buffers
        outputs = buffers.outputs
        horizon = buffers.horizon
        late = invalid = 0
        for slot in touched:
            ob = outputs.get(slot.output)
            if ob is None:
                ob = buffers.get_buffer(slot.output, slot.rule)
                outputs = buffers.outputs
            freq = ob.frequency
            interval = timestamp - timestamp % freq
            acc = ob.intervals.get(interval)
            if acc is None:
                if interval != interval:
                    invalid += len(slot)
                    slot.clear()
                    continue
                base = ob.tomb_base
                if base is not None and interval <= base:
                    k = round((base - interval) / freq)
                    if k < horizon and (ob.tomb_mask >> k) & 1:
                        late += len(slot)
                        slot.clear()
                        continue
                acc = ob.intervals[interval] = ob.new_acc()
            acc.add_many(slot)
            slot.clear()
        self._count_discarded(late, invalid)

    def _count_discarded(self, late: int, invalid: int) -> None:
        if late:
            self.buffers.late_discarded += late
            self.stats.increment("aggregateDatapointsTooLate", late)
        if invalid:
            self.buffers.invalid_discarded += invalid
            self.stats.increment("aggregateDatapointsInvalid", invalid)

    def process(self, batch: Batch) -> Batch:
        """Buffer matching points; return the points that pass through."""
        if self._touched:
            self.settle()
        if not self.ruleset.rules:
            return batch if self.forward_unmatched else []
        matches = self.ruleset.matches
        buffers = self.buffers
        outputs = buffers.outputs
        get_buffer = buffers.get_buffer
        forward_all = self.forward_all
        forward_unmatched = self.forward_unmatched
        log_miss = self.log_miss
        horizon = buffers.horizon
        passed: Batch = []
        late = invalid = 0
        for point in batch:
            metric, timestamp, value = point
            found = matches(metric)
            if not found:
                if forward_unmatched:
                    passed.append(point)
                    if log_miss is not None:
                        log_miss(MISS_MESSAGE % metric)
                continue
            own = False
            for rule, name in found:
                if name == metric:
                    own = True
                # Inlined BufferManager.add (the hot path).
                ob = outputs.get(name)
                if ob is None:
                    ob = get_buffer(name, rule)
                    outputs = buffers.outputs
                freq = ob.frequency
                interval = timestamp - timestamp % freq
                acc = ob.intervals.get(interval)
                if acc is None:
                    if interval != interval:
                        invalid += 1
                        continue
                    base = ob.tomb_base
                    if base is not None and interval <= base:
                        k = round((base - interval) / freq)
                        if k < horizon and (ob.tomb_mask >> k) & 1:
                            late += 1
                            continue
                    acc = ob.intervals[interval] = ob.new_acc()
                acc.add(value)
            if forward_all and not own:
                passed.append(point)
        self._count_discarded(late, invalid)
        return passed

    def flush(self, now: float, force: bool = False) -> Batch:
        """Aggregates due at ``now`` (all pending ones with ``force``, e.g. at shutdown)."""
        self.settle()
        out = self.buffers.flush(now, force)
        if out:
            self.stats.increment("aggregateDatapointsSent", len(out))
        if self.buffers.groups_flushed or out:
            self.update_gauges()
        return out

    def update_gauges(self) -> None:
        """Set the allocatedBuffers and bufferedDatapoints gauges in Stats."""
        self.settle()
        self.stats.counters["allocatedBuffers"] = len(self.buffers)
        self.stats.counters["bufferedDatapoints"] = self.buffers.buffered_datapoints()
