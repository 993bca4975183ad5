"""Tell operators when existing files no longer follow the schema rules.

Editing storage-schemas.conf / storage-aggregation.conf changes only the files made
afterwards; existing ones keep their header until ``carbon-resize`` (or
``carbon-cluster resize``) rewrites them. The writer offers each metric whose file it
found existing (once per metric per process: the first time it learns the file is
there); a background thread reads that file's header and compares it with the rules
(carbon.storage.whisper_resize.compare), off the writer's path. ``flush`` (once per log
interval) logs one line with the count and an example, e.g.::

    3 files' headers no longer match storage-schemas.conf / storage-aggregation.conf,
    e.g. a.b.c (60:1440 (average, xff 0.5) vs 10:8640,60:43200 (average, xff 0.5));
    carbon-resize applies the rules to existing files

Memory is bounded: at most ``limit`` names are remembered (then forgotten all at once)
and at most ``queue_size`` wait for their check (more are not checked).
"""

from __future__ import annotations

import threading
from collections import deque
from typing import Callable

from carbon.config.schemas import SchemaFiles
from carbon.storage.whisper_format import WhisperError, parse_header
from carbon.storage.whisper_resize import UNCHANGED, Target, compare, describe, read_header

__all__ = ["SchemaCheck", "schema_target"]


def schema_target(schemas: SchemaFiles, metric: str) -> Target:
    """The archives, xFilesFactor and aggregation method the rules give ``metric``."""
    storage, aggregation = schemas.for_metric(metric)
    xff, method = aggregation.value
    return Target(storage.value, xff, method)


class SchemaCheck:
    """Checks offered metrics' headers on its own thread; ``flush`` reports."""

    def __init__(self, path_of: Callable[[str], str | None], schemas: SchemaFiles,
                 log: Callable[[str], None], limit: int = 100_000,
                 queue_size: int = 10_000) -> None:
        self.path_of = path_of  # metric -> file path (None: a backend without files)
        self.schemas = schemas
        self.log = log
        self.limit = limit
        self.queue_size = queue_size
        self.offered: set[str] = set()
        self.queue: deque[str] = deque()
        self.wake = threading.Event()
        self.stopping = False
        self.lock = threading.Lock()
        self.count = 0  # mismatches found since the last flush
        self.example = ""
        self.checked = 0  # files checked (all time)
        self.thread: threading.Thread | None = None

    def offer(self, metric: str) -> None:
        """Check ``metric``'s file soon, unless already offered (cheap: the writer's)."""
        offered = self.offered
        if metric in offered:
            return
        if len(offered) >= self.limit:
            offered.clear()
        offered.add(metric)
        if len(self.queue) < self.queue_size:
            self.queue.append(metric)
            self.wake.set()

    def check(self, metric: str) -> str | None:
        """The mismatch of ``metric``'s file as text (None: it matches or is unreadable)."""
        path = self.path_of(metric)
        if not path:
            return None
        try:
            header = read_header(path)
            target = schema_target(self.schemas, metric)
            change = compare(header, target)
        except (OSError, WhisperError, ValueError):
            return None  # the writer reports files it cannot use
        if change.kind == UNCHANGED:
            return None
        return "%s (%s vs %s)" % (metric, describe(header),
                                  describe(parse_header(change.new_header, path)))

    def run(self) -> None:
        while not self.stopping:
            self.wake.wait(1.0)
            self.wake.clear()
            while self.queue and not self.stopping:
                metric = self.queue.popleft()
                found = self.check(metric)
                with self.lock:
                    self.checked += 1
                    if found is not None:
                        self.count += 1
                        if not self.example:
                            self.example = found

    def start(self) -> None:
        if self.thread is None:
            self.thread = threading.Thread(target=self.run, name="carbon-schema-check",
                                           daemon=True)
            self.thread.start()

    def stop(self) -> None:
        self.stopping = True
        self.wake.set()

    def flush(self) -> None:
        """One log line for the mismatches found since the last flush, if any."""
        with self.lock:
            count, example = self.count, self.example
            self.count, self.example = 0, ""
        if count:
            self.log("%d files' headers no longer match storage-schemas.conf / "
                     "storage-aggregation.conf, e.g. %s; carbon-resize applies the rules "
                     "to existing files" % (count, example))
