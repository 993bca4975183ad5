"""A daemon is receivers -> a pipeline of processors -> a sink, all batched.

A *batch* (:mod:`carbon.batch`) is a list of ``(metric, timestamp, value)``
tuples. Receivers parse a whole socket read into one batch and hand it to
``Pipeline.process``; each processor takes a batch and returns the (possibly
filtered, rewritten or extended) batch; the sink's ``put_many`` receives what is
left. No per-datapoint callbacks.

A second representation, ``LineBatch`` (:mod:`carbon.formats.plaintext`), carries
plaintext lines that were checked a whole read at a time and are already in the
form a line destination sends: a pipeline whose processors and sink all accept it
(``Pipeline.accepts_lines``) moves them without ever making tuples
(``Pipeline.process_lines``). Any stage that does not handle lines gets the tuple
form (``LineBatch.points()``) instead.

A third, ``Pipeline.process_chunk``, hands a whole read (bytes, complete lines) to
the first processor with a ``process_chunk`` method when every processor before it
lets reads through untouched (``passes_chunks`` true). That processor either
consumes the read entirely (nothing continues down the pipeline) and returns its
number of datapoints, or returns None and the caller parses the read as usual.
"""

from __future__ import annotations

from typing import Protocol

from carbon.batch import Batch, Datapoint
from carbon.formats.plaintext import LineBatch

__all__ = ["Batch", "Datapoint", "LineBatch", "Processor", "Sink", "Pipeline"]


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

    def _chunk_stage(self) -> Processor | None:
        for processor in self.processors:
            if hasattr(processor, "process_chunk"):
                return processor
            if not getattr(processor, "passes_chunks", False):
                return None
        return None

    @property
    def accepts_chunks(self) -> bool:
        """True if a processor consumes whole reads (see the module docstring)."""
        return self._chunk_stage() is not None

    def process_chunk(self, chunk: bytes, max_length: int = 0) -> int | None:
        """The datapoints of ``chunk`` a processor consumed whole, or None if the
        read must go the usual way (parsed, then ``process_lines`` or ``process``)."""
        stage = self._chunk_stage()
        if stage is None:
            return None
        return stage.process_chunk(chunk, max_length)  # type: ignore[attr-defined]

    @property
    def accepts_lines(self) -> bool:
        """True if every processor has ``process_lines`` and the sink takes lines
        (``accepts_lines`` true and a ``put_lines`` method)."""
        return bool(getattr(self.sink, "accepts_lines", False)) and all(
            hasattr(p, "process_lines") for p in self.processors)

    def process_lines(self, batch: LineBatch) -> None:
        """Like ``process`` for a LineBatch; falls back to tuples at the first stage
        that cannot handle lines, or after a stage whose ``process_lines`` returned a
        tuple batch (a list)."""
        for index, processor in enumerate(self.processors):
            if not batch:
                return
            handle = getattr(processor, "process_lines", None)
            if handle is None:
                points = batch.points()
                for rest in self.processors[index:]:
                    if not points:
                        return
                    points = rest.process(points)
                if points:
                    self.sink.put_many(points)
                return
            result = handle(batch)
            if isinstance(result, list):  # the stage answered with tuples: go on with them
                for rest in self.processors[index + 1:]:
                    if not result:
                        return
                    result = rest.process(result)
                if result:
                    self.sink.put_many(result)
                return
            batch = result
        if not batch:
            return
        if getattr(self.sink, "accepts_lines", False):
            self.sink.put_lines(batch)  # type: ignore[attr-defined]
        else:
            self.sink.put_many(batch.points())
