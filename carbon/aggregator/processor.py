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

from carbon.aggregator.buffers import BufferManager
from carbon.aggregator.rules import RuleSet
from carbon.instrumentation.stats import Stats
from carbon.pipeline import Batch, LineBatch

MISS_MESSAGE = "Couldn't match metric %s with any aggregation rule. Passing on un-aggregated."


class _Slot(list):
    """Values staged for one output (``rule`` creates its buffer if needed)."""

    __slots__ = ("output", "rule")

    def __init__(self, output: str, rule) -> None:
        super().__init__()
        self.output = output
        self.rule = rule


class AggregationProcessor:
    """Feeds matching points into buffers and forwards the rest per FORWARD_ALL.

    Self-metrics (the reference's aggregator instrumentation names):
    ``aggregateDatapointsSent`` is counted per emitted aggregate;
    ``allocatedBuffers`` and ``bufferedDatapoints`` are gauges set by
    ``update_gauges``: ``flush`` calls it after a tick that computed something,
    and the reporter should call it just before taking its snapshot. Points discarded
    as too late / with a non-finite timestamp are counted as
    ``aggregateDatapointsTooLate`` / ``aggregateDatapointsInvalid``.
    """

    def __init__(self, ruleset: RuleSet, buffers: BufferManager, settings, stats: Stats,
                 log: Callable[[str], None] | None = None,
                 forward_unmatched: bool | None = None) -> None:
        self.ruleset = ruleset
        self.buffers = buffers
        self.settings = settings
        self.stats = stats
        self.forward_all = bool(settings.FORWARD_ALL)
        self.forward_unmatched = (self.forward_all if forward_unmatched is None
                                  else bool(forward_unmatched))
        self.log_miss = log if (log is not None and settings.LOG_AGGREGATOR_MISSES
                                and self.forward_all) else None
        self._touched: list[_Slot] = []
        self._staged_key: tuple[float, ...] | None = None
        self._staged_stamp = 0.0
        self._reset_staging()

    def _reset_staging(self) -> None:
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
        if (self.forward_unmatched or batch.values is None or batch.stamps is None
                or self._shared_outputs):
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
        return []

    def _stage(self, names: list[bytes], values: list[bytes]) -> None:
        cache = self._byte_matches
        cache_get = cache.get
        touched = self._touched
        for name, text in zip(names, values, strict=True):
            slots = cache_get(name)
            if slots is None:  # the cache is full or off
                slots = self._slots_for(name)
            if slots:
                value = float(text)
                for slot in slots:
                    if not slot:
                        touched.append(slot)
                    slot.append(value)

    def _slots_for(self, name: bytes) -> tuple[_Slot, ...]:
        """The staging lists ``name`` feeds (cached); flags outputs two rules feed."""
        found = self.ruleset.matches(name.decode())
        slots = []
        for rule, output in found:
            slot = self._slots.get(output)
            if slot is None:
                slot = self._slots[output] = _Slot(output, rule)
            elif slot.rule is not rule or slot in slots:
                self._shared_outputs = True
            slots.append(slot)
        result = tuple(slots)
        cache = self._byte_matches
        if self.ruleset.cache_size:
            if len(cache) >= self.ruleset.cache_size:
                cache.clear()
            cache[name] = result
        return result

    def settle(self) -> None:
        """Add the staged values to the buffers, outputs in order of first value."""
        touched = self._touched
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
