"""A daemon is receivers -> a pipeline of processors -> a sink, all batched.

A *batch* (:mod:`carbon.batch`) is a list of ``(metric, timestamp, value)``
tuples. Receivers parse a whole socket read into one batch and hand it to
``Pipeline.process``; each processor takes a batch and returns the (possibly
filtered, rewritten or extended) batch; the sink's ``put_many`` receives what is
left. No per-datapoint callbacks.

A second representation, ``LineBatch`` (:mod:`carbon.formats.plaintext`), carries
plaintext lines that were checked a whole read at a time and are already in the
form a line destination sends: a pipeline whose processors all declare
``handles_lines`` and whose sink declares ``accepts_lines`` (``Pipeline.accepts_lines``)
moves them without ever making tuples (``Pipeline.process_lines``). A stage that does
not handle lines gets the tuple form (``LineBatch.points()``) instead.

A third, ``Pipeline.process_chunk``, hands a whole read (bytes, complete lines) to
the first processor that declares ``handles_chunks`` when every processor before it
lets reads through untouched (``passes_chunks`` true). That processor either
consumes the read entirely (nothing continues down the pipeline) and returns its
number of datapoints, or returns None and the caller parses the read as usual. A
pipeline without processors hands whole reads to its sink instead when the sink
declares ``accepts_chunks`` (carbon-cache's CacheSink: parse, journal and cache in
one pass), with the same contract.

The contracts are the ``Processor`` and ``Sink`` protocols below. A stage or sink
states what it can do by subclassing them and setting the capability attributes;
the defaults (no lines, no whole reads) come with the protocol, so a class that
declares only ``process`` (or ``put_many``) still works. Nothing is probed: the
pipeline reads the declared capabilities once, when its processors are set.
"""

from __future__ import annotations

from typing import ClassVar, Iterable, Protocol

from carbon.batch import Batch, Datapoint
from carbon.formats.plaintext import LineBatch

__all__ = ["Batch", "Datapoint", "LineBatch", "Processor", "Sink", "Pipeline"]


class Processor(Protocol):
    """A pipeline stage: ``process`` is the contract, the rest are capabilities.

    A stage declares what else it does by subclassing this protocol and setting
    ``handles_lines`` (its ``process_lines`` takes a LineBatch and may answer one),
    ``handles_chunks`` (its ``process_chunk`` may consume a whole read) or
    ``passes_chunks`` (whole reads go through it untouched, now: it may change on a
    reload, so it is read per read). Unset, they say no, and the default
    ``process_lines`` hands the tuple form to ``process``.
    """

    handles_lines: ClassVar[bool] = False
    handles_chunks: ClassVar[bool] = False

    def process(self, batch: Batch) -> Batch: ...

    @property
    def passes_chunks(self) -> bool:
        return False

    def process_lines(self, batch: LineBatch) -> Batch | LineBatch:
        return self.process(batch.points())

    def process_chunk(self, chunk: bytes, max_length: int = 0) -> int | None:
        return None


class Sink(Protocol):
    """Where a pipeline ends: ``put_many`` is the contract. A sink that also takes
    LineBatches declares ``accepts_lines`` and overrides ``put_lines``; one that takes
    whole reads when no processor comes before it declares ``accepts_chunks`` and
    overrides ``put_chunk`` (consume the read and answer its datapoints, or None and
    touch nothing)."""

    accepts_lines: bool = False
    accepts_chunks: bool = False

    def put_many(self, batch: Batch) -> None: ...

    def put_lines(self, batch: LineBatch) -> None:
        self.put_many(batch.points())

    def put_chunk(self, chunk: bytes, max_length: int = 0) -> int | None:
        return None


class Pipeline:
    """Runs each batch through the processors in order, then into the sink.

    The stages' declared capabilities are read once, whenever ``processors`` is set.
    """

    def __init__(self, processors: Iterable[Processor], sink: Sink) -> None:
        self.sink = sink
        self.processors = tuple(processors)

    @property
    def processors(self) -> tuple[Processor, ...]:
        return self._processors

    @processors.setter
    def processors(self, processors: Iterable[Processor]) -> None:
        self._processors = stages = tuple(processors)
        self._sink_lines = bool(self.sink.accepts_lines)
        #: True if every processor handles lines and the sink takes them
        self.accepts_lines = self._sink_lines and all(p.handles_lines for p in stages)
        # the stages a whole read goes through: up to the first that may consume it
        self._chunk_path: tuple[Processor, ...] | None = None
        # no stage at all: the sink may take whole reads itself
        self._sink_chunks = not stages and bool(self.sink.accepts_chunks)
        for index, stage in enumerate(stages):
            if stage.handles_chunks:
                self._chunk_path = stages[:index + 1]
                break

    def process(self, batch: Batch) -> None:
        for processor in self._processors:
            if not batch:
                return
            batch = processor.process(batch)
        if batch:
            self.sink.put_many(batch)

    def _chunk_stage(self) -> Processor | None:
        path = self._chunk_path
        if path is None:
            return None
        for processor in path[:-1]:
            if not processor.passes_chunks:
                return None
        return path[-1]

    @property
    def accepts_chunks(self) -> bool:
        """True if a processor (or, with none, the sink) consumes whole reads (see the
        module docstring)."""
        return self._sink_chunks or self._chunk_stage() is not None

    def process_chunk(self, chunk: bytes, max_length: int = 0) -> int | None:
        """The datapoints of ``chunk`` a processor (or the sink) consumed whole, or None
        if the read must go the usual way (parsed, then ``process_lines`` or
        ``process``)."""
        if self._sink_chunks:
            return self.sink.put_chunk(chunk, max_length)
        stage = self._chunk_stage()
        if stage is None:
            return None
        return stage.process_chunk(chunk, max_length)

    def process_lines(self, batch: LineBatch) -> None:
        """Like ``process`` for a LineBatch; goes on with tuples after a stage that
        answered with a tuple batch (a list), as one that does not handle lines does."""
        processors = self._processors
        for index, processor in enumerate(processors):
            if not batch:
                return
            result = processor.process_lines(batch)
            if isinstance(result, list):  # the stage answered with tuples: go on with them
                for rest in processors[index + 1:]:
                    if not result:
                        return
                    result = rest.process(result)
                if result:
                    self.sink.put_many(result)
                return
            batch = result
        if not batch:
            return
        if self._sink_lines:
            self.sink.put_lines(batch)
        else:
            self.sink.put_many(batch.points())
