"""Per-output, per-interval aggregation buffers.

A point (timestamp, value) for an output with frequency F lands in the interval
``timestamp - timestamp % F``. ``flush(now)`` is the tick (the daemon calls it
from a LoopingCall, about once a second; tests pass ``now`` themselves). Each
output is computed every ``min(WRITE_BACK_FREQUENCY, F)`` seconds (F when
WRITE_BACK_FREQUENCY is unset or 0), on boundaries of that period: every interval
that received data since it was last emitted is emitted as
``(output, interval, value)`` computed over *all* of the interval's values.

Retention and late data (improving on carbon 1.1.10):

* An interval stays buffered while it is within MAX_AGGREGATION_INTERVALS
  intervals of the current one, and after that until a tick finds it without new
  data (so a replayed interval that straddles a tick is emitted whole). Late
  points for a buffered interval are merged and the full value is re-emitted,
  as the reference does.
* When an interval expires the buffer remembers it (a bitmask "tombstone" over
  the last ``horizon`` intervals). A point arriving later for an emitted and
  expired interval cannot be aggregated with the values already written, so it
  is discarded and counted (``late_discarded``) instead of being emitted alone:
  the reference starts a fresh buffer and overwrites the full aggregate with a
  partial one (graphite-project/carbon#751). Points for intervals this output
  never emitted (replays, backfill) are aggregated normally.
* Memory is bounded (carbon#45, #588): an output whose intervals have all
  expired keeps only its tombstone, and is dropped entirely once that is
  ``idle_keep`` (default MAX_AGGREGATION_INTERVALS) intervals old, so a quiet
  output costs memory for about twice as long as in the reference but far less
  per name (no LoopingCall per buffer); a late point for an output dropped that
  way is aggregated as a new interval, as the reference does. Intervals more
  than ``horizon`` intervals in the future are dropped once emitted; the
  output dicts are rebuilt after they shrink to a quarter of their peak so
  freed slots go back to the allocator.
"""

from __future__ import annotations

from typing import Any

from carbon.aggregator.methods import AggregationMethod
from carbon.pipeline import Batch


class OutputBuffer:
    """The intervals of one aggregate metric, configured by the rule that created it."""

    __slots__ = ("name", "rule", "frequency", "method", "new_acc", "intervals",
                 "tomb_base", "tomb_mask")

    def __init__(self, name: str, rule, frequency: int, method: AggregationMethod) -> None:
        self.name = name
        self.rule = rule
        self.frequency = frequency
        self.method = method
        self.new_acc = method.new
        self.intervals: dict[float, object] = {}
        self.tomb_base: float | None = None
        self.tomb_mask = 0

    @property
    def size(self) -> int:
        """Datapoints currently buffered (the reference's MetricBuffer.size)."""
        return sum(acc.n for acc in self.intervals.values())


class BufferManager:
    """All output buffers, grouped by compute period.

    ``add`` returns False when a point is discarded: too late (see module doc) or
    with a non-finite timestamp.
    """

    def __init__(self, max_intervals: int = 5, write_back_frequency: float | None = None,
                 horizon: int = 64, idle_keep: int | None = None) -> None:
        self.max_intervals = max(1, int(max_intervals))
        self.write_back_frequency = write_back_frequency
        self.horizon = max(1, int(horizon))
        self.idle_keep = self.max_intervals if idle_keep is None else max(0, int(idle_keep))
        self._limit = (1 << self.horizon) - 1
        self.outputs: dict[str, OutputBuffer] = {}
        self._groups: dict[float, dict[str, OutputBuffer]] = {}
        self._last_tick: dict[float, float] = {}
        self._pending: Batch = []
        self._peak = 0
        self.groups_flushed = 0
        self.late_discarded = 0
        self.invalid_discarded = 0

    @classmethod
    def from_settings(cls, settings: Any) -> BufferManager:
        """Built from MAX_AGGREGATION_INTERVALS and WRITE_BACK_FREQUENCY."""
        return cls(settings["MAX_AGGREGATION_INTERVALS"], settings["WRITE_BACK_FREQUENCY"])

    def __len__(self) -> int:
        """Outputs holding at least one interval (the allocatedBuffers gauge)."""
        return sum(1 for ob in self.outputs.values() if ob.intervals)

    def buffered_datapoints(self) -> int:
        """Values held across all intervals (the bufferedDatapoints gauge)."""
        return sum(ob.size for ob in self.outputs.values())

    def compute_period(self, frequency: int) -> float:
        wbf = self.write_back_frequency
        if wbf and wbf > 0:
            return min(wbf, frequency)
        return frequency

    def get_buffer(self, name: str, rule) -> OutputBuffer:
        """The buffer for ``name``; a new one takes ``rule``'s frequency and method."""
        ob = self.outputs.get(name)
        if ob is None:
            ob = OutputBuffer(name, rule, rule.frequency, rule.aggregation)
            self.outputs[name] = ob
            period = self.compute_period(rule.frequency)
            group = self._groups.get(period)
            if group is None:
                group = self._groups[period] = {}
            group[name] = ob
            if len(self.outputs) > self._peak:
                self._peak = len(self.outputs)
        return ob

    def add(self, name: str, rule, timestamp: float, value: float) -> bool:
        """Buffer one point for output ``name``."""
        ob = self.outputs.get(name)
        if ob is None:
            ob = self.get_buffer(name, rule)
        freq = ob.frequency
        interval = timestamp - timestamp % freq
        acc = ob.intervals.get(interval)
        if acc is None:
            if interval != interval:  # NaN or infinite timestamp: no interval to put it in
                self.invalid_discarded += 1
                return False
            base = ob.tomb_base
            if base is not None and interval <= base:
                k = round((base - interval) / freq)
                if k < self.horizon and (ob.tomb_mask >> k) & 1:
                    self.late_discarded += 1
                    return False
            acc = ob.intervals[interval] = ob.new_acc()
        acc.add(value)
        return True

    def _bury(self, ob: OutputBuffer, interval: float) -> None:
        base = ob.tomb_base
        if base is None or interval > base:
            shift = self.horizon if base is None else round((interval - base) / ob.frequency)
            if shift >= self.horizon:
                ob.tomb_mask = 1
            else:
                ob.tomb_mask = ((ob.tomb_mask << shift) | 1) & self._limit
            ob.tomb_base = interval
        else:
            k = round((base - interval) / ob.frequency)
            if k < self.horizon:
                ob.tomb_mask |= 1 << k

    def _flush_output(self, ob: OutputBuffer, now: float, out: Batch) -> bool:
        """Emit ``ob``'s dirty intervals, expire old ones; False once ``ob`` can go."""
        freq = ob.frequency
        current = now - now % freq
        oldest = current - self.max_intervals * freq
        newest = current + self.horizon * freq
        name = ob.name
        expired = []
        for interval, acc in ob.intervals.items():
            if acc.dirty:
                out.append((name, interval, acc.value()))
                acc.dirty = False
            elif interval < oldest or interval > newest:
                expired.append(interval)
        for interval in expired:
            del ob.intervals[interval]
            if interval < oldest:
                self._bury(ob, interval)
        if ob.intervals:
            return True
        base = ob.tomb_base
        return base is not None and base >= oldest - self.idle_keep * freq

    def flush(self, now: float, force: bool = False) -> Batch:
        """Aggregates due at ``now`` as (output, interval, value); ``force`` flushes all.

        A compute period is due when ``now`` has entered a new multiple of it since
        the last call (or on the first call after its first buffer appeared).
        """
        out: Batch = self._pending
        self._pending = []
        self.groups_flushed = 0
        for period, group in list(self._groups.items()):
            tick = now // period
            if not force and self._last_tick.get(period) == tick:
                continue
            self._last_tick[period] = tick
            self.groups_flushed += 1
            gone = [name for name, ob in group.items() if not self._flush_output(ob, now, out)]
            for name in gone:
                del group[name]
                del self.outputs[name]
            if not group:
                del self._groups[period]
        self._maybe_compact()
        return out

    def _maybe_compact(self) -> None:
        if self._peak > 1024 and len(self.outputs) < self._peak // 4:
            self.outputs = dict(self.outputs)
            self._groups = {p: dict(g) for p, g in self._groups.items()}
            self._peak = len(self.outputs)

    def rebind(self, ruleset) -> None:
        """Adopt a reloaded RuleSet without losing buffered data.

        An output whose configuring rule is still present (same pattern, output,
        method and frequency) keeps its intervals. Others are retired: their
        not-yet-emitted values go out with the next ``flush`` and the next point
        starts a buffer configured by the new rules.
        """
        for name, ob in list(self.outputs.items()):
            rule = ruleset.find_rule(ob.rule.key)
            if rule is not None:
                ob.rule = rule
                continue
            for interval, acc in ob.intervals.items():
                if acc.dirty:
                    self._pending.append((name, interval, acc.value()))
            del self.outputs[name]
            del self._groups[self.compute_period(ob.frequency)][name]
