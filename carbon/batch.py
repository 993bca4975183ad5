"""The batch every stage passes on: a list of ``(metric, timestamp, value)`` tuples.

Metric is a str, timestamp and value are floats. Receivers parse a whole socket read
into one batch; no per-datapoint callbacks anywhere.
"""

from __future__ import annotations

Datapoint = tuple[str, float, float]
Batch = list[Datapoint]
