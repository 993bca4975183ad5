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
        self._byte_matches: dict[bytes, tuple] = {}
        self._frequencies = frozenset(rule.frequency for rule in ruleset.rules)

    def set_ruleset(self, ruleset: RuleSet) -> None:
        """Switch to reloaded rules; buffers of unchanged rules carry on."""
        self.buffers.rebind(ruleset)
        self.ruleset = ruleset
        self._byte_matches = {}
        self._frequencies = frozenset(rule.frequency for rule in ruleset.rules)

    def process_lines(self, batch: LineBatch) -> Batch | LineBatch:
        """``process`` for canonical lines, without building tuples when nothing can pass.

        With FORWARD_ALL (or forward_unmatched) off, matched points are grouped per
        output, in arrival order, and each group is added at once, which gives the
        same buffers and counters as ``process``; a batch whose timestamps do not all
        fall in one interval per rule frequency goes through ``process``. Otherwise
        the tuple form goes through ``process`` and its result continues as tuples.
        """
        if not self.ruleset.rules:
            return batch if self.forward_unmatched else []
        if self.forward_unmatched or batch.values is None or batch.stamps is None:
            return self.process(batch.points())
        stamps = batch.stamps
        distinct = set(stamps)
        first = float(stamps[0])
        if len(distinct) > 1:
            times = [float(stamp) for stamp in distinct]
            for freq in self._frequencies:
                interval = first - first % freq
                if any(t - t % freq != interval for t in times):
                    return self.process(batch.points())
        self._add_grouped(batch.names, batch.values, first)
        return []

    def _add_grouped(self, names: list[bytes], values: list[bytes], timestamp: float) -> None:
        """Buffer every matched point, all with intervals those of ``timestamp``."""
        cache = self._byte_matches
        cache_get = cache.get
        limit = self.ruleset.cache_size
        matches = self.ruleset.matches
        groups: dict[str, tuple] = {}
        groups_get = groups.get
        for name, text in zip(names, values):
            found = cache_get(name)
            if found is None:
                found = matches(name.decode())
                if limit:
                    if len(cache) >= limit:
                        cache.clear()
                    cache[name] = found
            if not found:
                continue
            value = float(text)
            for rule, output in found:
                group = groups_get(output)
                if group is None:
                    group = groups[output] = (rule, [])
                group[1].append(value)
        buffers = self.buffers
        outputs = buffers.outputs
        horizon = buffers.horizon
        late = invalid = 0
        for output, (rule, points) in groups.items():
            ob = outputs.get(output)
            if ob is None:
                ob = buffers.get_buffer(output, rule)
                outputs = buffers.outputs
            freq = ob.frequency
            interval = timestamp - timestamp % freq
            acc = ob.intervals.get(interval)
            if acc is None:
                if interval != interval:
                    invalid += len(points)
                    continue
                base = ob.tomb_base
                if base is not None and interval <= base:
                    k = round((base - interval) / freq)
                    if k < horizon and (ob.tomb_mask >> k) & 1:
                        late += len(points)
                        continue
                acc = ob.intervals[interval] = ob.new_acc()
            acc.add_many(points)
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
        out = self.buffers.flush(now, force)
        if out:
            self.stats.increment("aggregateDatapointsSent", len(out))
        if self.buffers.groups_flushed or out:
            self.update_gauges()
        return out

    def update_gauges(self) -> None:
        """Set the allocatedBuffers and bufferedDatapoints gauges in Stats."""
        self.stats.counters["allocatedBuffers"] = len(self.buffers)
        self.stats.counters["bufferedDatapoints"] = self.buffers.buffered_datapoints()
