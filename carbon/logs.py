"""Carbon's log files: console.log plus one file per log type (creates, updates, ...).

Same layout and line format as carbon 1.1.10 (``dd/mm/YYYY HH:MM:SS :: message``,
daily rotation unless ENABLE_LOGROTATION is off; unlike carbon, only the newest
LOG_ROTATION_COUNT rotated files of each log are kept). With --debug or --nodaemon lines
go to stdout prefixed with ``[type]`` (unless --log-to=files). One CarbonLog per daemon,
passed in.
"""

from __future__ import annotations

import os
import re
import sys
import threading
import time
import traceback
from typing import Any, Callable, TextIO

from twisted.python.logfile import DailyLogFile

LOG_TYPES = ("console", "creates", "updates", "listener", "query", "clients", "aggregator",
             "relay", "cache")


class _ReopeningLogFile(DailyLogFile):
    """A daily log file that, with rotation off, follows external logrotate moves, and
    with rotation on keeps only the ``keep`` newest rotated files (0: all)."""

    def __init__(self, name: str, directory: str, rotate: bool, keep: int = 0) -> None:
        self.rotate_daily = rotate
        self.keep = keep
        super().__init__(name, directory)

    def shouldRotate(self) -> bool:  # noqa: N802 (twisted API)
        return self.rotate_daily and super().shouldRotate()

    def rotate(self) -> None:
        super().rotate()
        if self.keep > 0:
            remove_old_rotations(self.directory, self.name, self.keep)

    def write(self, data: str) -> None:
        if not self.rotate_daily:
            try:
                on_disk = os.stat(self.path)
                opened = os.fstat(self._file.fileno())
                moved = (on_disk.st_ino, on_disk.st_dev) != (opened.st_ino, opened.st_dev)
            except OSError:
                moved = True
            if moved:
                self.reopen()
        super().write(data)


def rotated_files(directory: str, name: str) -> list[str]:
    """The rotated copies of log ``name`` in ``directory`` (``name.YYYY_M_D``, Twisted's
    DailyLogFile suffix), oldest first."""
    pattern = re.compile(re.escape(name) + r"\.(\d+)_(\d+)_(\d+)$")
    dated = []
    try:
        entries = os.listdir(directory)
    except OSError:
        return []
    for entry in entries:
        match = pattern.match(entry)
        if match:
            dated.append((tuple(int(part) for part in match.groups()), entry))
    return [entry for _date, entry in sorted(dated)]


def remove_old_rotations(directory: str, name: str, keep: int) -> list[str]:
    """Remove all but the ``keep`` newest rotated copies of log ``name``; returns them."""
    old = rotated_files(directory, name)[:-keep] if keep > 0 else []
    for entry in old:
        try:
            os.unlink(os.path.join(directory, entry))
        except OSError:
            pass
    return old


class CarbonLog:
    """Writes typed log lines to a directory of files, to a stream, or to a callback."""

    def __init__(self, logdir: str | None = None, stream: TextIO | None = None,
                 rotate: bool = True, debug: bool = False,
                 sink: Callable[[str, str], None] | None = None, keep: int = 0) -> None:
        self.logdir = logdir
        self.stream = stream if stream is not None else (None if logdir else sys.stdout)
        self.rotate = rotate
        self.keep = keep
        self.debug_enabled = debug
        self.sink = sink
        self._files: dict[str, _ReopeningLogFile] = {}
        self._lock = threading.Lock()
        if logdir:
            os.makedirs(logdir, exist_ok=True)

    def _file(self, kind: str) -> _ReopeningLogFile:
        handle = self._files.get(kind)
        if handle is None:
            handle = _ReopeningLogFile("%s.log" % kind, self.logdir, self.rotate, self.keep)
            self._files[kind] = handle
        return handle

    def write(self, kind: str, message: str) -> None:
        stamp = time.strftime("%d/%m/%Y %H:%M:%S")
        with self._lock:
            if self.sink is not None:
                self.sink(kind, message)
            if self.logdir:
                handle = self._file(kind)
                handle.write("%s :: %s\n" % (stamp, message))
                handle.flush()
            if self.stream is not None:
                self.stream.write("%s :: [%s] %s\n" % (stamp, kind, message))
                self.stream.flush()

    def msg(self, message: str) -> None:
        self.write("console", message)

    def err(self, message: str | None = None) -> None:
        """Log an error; inside an except block the traceback is included."""
        text = message or ""
        if sys.exc_info()[0] is not None:
            text = (text + "\n" if text else "") + traceback.format_exc().rstrip()
        self.write("console", text)

    def debug(self, message: str) -> None:
        if self.debug_enabled:
            self.write("console", message)

    def creates(self, message: str) -> None:
        self.write("creates", message)

    def updates(self, message: str) -> None:
        self.write("updates", message)

    def listener(self, message: str) -> None:
        self.write("listener", message)

    def query(self, message: str) -> None:
        self.write("query", message)

    def clients(self, message: str) -> None:
        self.write("clients", message)

    def aggregator(self, message: str) -> None:
        self.write("aggregator", message)

    def relay(self, message: str) -> None:
        self.write("relay", message)

    def close(self) -> None:
        for handle in self._files.values():
            handle.close()
        self._files.clear()


def log_for(settings: Any, to_files: bool, debug: bool = False) -> CarbonLog:
    """A daemon's log: carbon's files in LOG_DIR (rotation and retention from settings),
    or stdout lines prefixed with ``[type]`` (carbon's foreground format)."""
    if not to_files:
        return CarbonLog(None, stream=sys.stdout, rotate=False, debug=debug)
    return CarbonLog(settings.LOG_DIR, rotate=bool(settings["ENABLE_LOGROTATION"]),
                     debug=debug, keep=int(settings.get("LOG_ROTATION_COUNT") or 0))


def log_twisted_errors(log: CarbonLog) -> None:
    """Send Twisted's error events (unhandled errors in deferreds, protocol
    exceptions) to ``log``'s console log; other Twisted chatter is dropped."""
    from twisted.python import log as twisted_log

    def observer(event: dict) -> None:
        if event.get("isError"):
            text = twisted_log.textFromEventDict(event)
            if text:
                log.msg(text)

    twisted_log.startLoggingWithObserver(observer, setStdout=False)


class MemoryLog(CarbonLog):
    """A CarbonLog that keeps (type, message) pairs in memory, for tests and tools."""

    def __init__(self, debug: bool = False) -> None:
        self.lines: list[tuple[str, str]] = []
        super().__init__(logdir=None, stream=None, debug=debug,
                         sink=lambda kind, message: self.lines.append((kind, message)))
        self.stream = None

    def text(self, kind: str | None = None) -> str:
        return "\n".join(m for k, m in self.lines if kind is None or k == kind)


class IntervalLog:
    """Bounded logging for repeated problems: a few samples, then one summary a interval.

    ``record(sample)`` counts an event; at most ``samples`` of them are logged per
    interval. ``flush()`` (called by the daemon once per interval) logs one summary
    line with the total, so a flood of bad input never becomes a log storm.
    """

    def __init__(self, log: Callable[[str], None], what: str, samples: int = 5) -> None:
        self.log = log
        self.what = what
        self.samples = samples
        self.count = 0
        self.logged = 0
        self.total = 0

    def record(self, detail: str, count: int = 1) -> None:
        self.count += count
        self.total += count
        if self.logged < self.samples:
            self.logged += 1
            self.log("%s: %s" % (self.what, detail))

    def flush(self) -> None:
        if self.count > self.logged:
            self.log("%d %s in the last interval (%d shown)" % (self.count, self.what,
                                                                self.logged))
        self.count = 0
        self.logged = 0
