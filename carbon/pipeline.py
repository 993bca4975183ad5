"""A daemon is receivers -> a pipeline of processors -> a sink, all batched.

A *batch* is a list of ``(metric, timestamp, value)`` tuples: metric is a str,
timestamp and value are floats. Receivers parse a whole socket read into one
batch and hand it to ``Pipeline.process``; each processor takes a batch and
returns the (possibly filtered, rewritten or extended) batch; the sink's
``put_many`` receives what is left. No per-datapoint callbacks.
"""

from __future__ import annotations

from typing import Protocol

Datapoint = tuple[str, float, float]
Batch = list[Datapoint]


class Processor(Protocol):
    def process(self, batch: Batch) -> Batch: ...


class Sink(Protocol):
    def put_many(self, batch: Batch) -> None: ...


class Pipeline:
    """Runs each batch through the processors in order, then into the sink."""

    def __init__(self, processors: list[Processor], sink: Sink) -> None:
        self.processors = list(processors)
        self.sink = sink

    def process(self, batch: Batch) -> None:
        for processor in self.processors:
            if not batch:
                return
            batch = processor.process(batch)
        if batch:
            self.sink.put_many(batch)
