"""Apply storage-schemas.conf / storage-aggregation.conf to existing whisper files, online.

Each file's header is compared with what the schema rules give its name
(carbon.storage.whisper_resize.compare): unchanged files are left alone, an
aggregation method / xFilesFactor change is written into the header in place, other
files are rewritten beside the old one (``NAME.wsp.resize-tmp``, whisper-resize.py's
algorithm) and renamed into place.

Online: before it touches a batch of files, the resize asks every local carbon-cache
(over carbonlink, one persistent connection per cache) to hold those metrics
(``resize-hold``): their writer stops writing them, new points wait in the cache
(carbonlink still serves them to the render app) and the hold answers once no write
of them is in flight. After the renames ``resize-release`` lets the writer go on: it
writes the held points into the new files (it reopens a path whose inode changed).
If the resize dies, its connections close and the caches resume by themselves; every
file is then the old or the new one (the rename is atomic) and the next run compares
headers again and goes on; leftover temp files are swept first.
"""

from __future__ import annotations

import fcntl
import os
from concurrent.futures import Future, ThreadPoolExecutor
import sys
import time
from dataclasses import dataclass, field
from typing import Callable, Iterator, Optional, Protocol, Sequence, TextIO

from carbon.carbonlink.client import Session
from carbon.config.schemas import SchemaFiles
from carbon.storage.whisper_create import CreateOptions
from carbon.storage.whisper_format import WhisperError
from carbon.storage.whisper_resize import (
    HEADER, REWRITE, TEMP_SUFFIX, UNCHANGED, Change, Target, compare, read_header, replace,
    rewrite, set_metadata,
)
from carbon.writer.ratelimit import RateLimiter, make_limiter
from carbon.writer.schemacheck import schema_target

__all__ = ["Rates", "Report", "LocalResize", "walk", "sweep_temps"]

BATCH = 32  # files held and replaced together
HOLD_TIMEOUT = 30.0  # seconds to wait for a cache to finish writing a held metric
LOCK_NAME = ".carbon-resize.lock"


class Out(Protocol):
    """Where progress goes (a terminal gets one redrawn line)."""

    def write(self, text: str, /) -> object: ...

    def flush(self) -> None: ...

    def isatty(self) -> bool: ...


@dataclass
class Rates:
    """Limits (0 = unlimited): files a second and bytes (old read + new written) a
    second; ``fsync``: new files reach the disk before they are renamed."""

    files: float = 0.0
    bytes: float = 0.0
    fsync: bool = True


@dataclass
class Report:
    """Counts of one run (or a dry run's plan)."""

    files: int = 0
    unchanged: int = 0
    header_only: int = 0
    rewrite: int = 0
    skipped_tagged: int = 0
    errors: list[str] = field(default_factory=list)
    bytes: int = 0  # header-only: 16 each; rewrite: old size + new size
    done: int = 0  # files changed (header-only + rewrite) by this run
    seconds: float = 0.0
    estimate: Optional[float] = None  # dry run: seconds for the changes at the rates
    swept: int = 0
    not_running: list[str] = field(default_factory=list)  # caches not held (down)
    hold_seconds: float = 0.0  # spent asking the caches to hold and release

    def summary(self, dry_run: bool) -> str:
        head = "would change" if dry_run else "changed"
        text = ("%s %d of %d files: %d header-only, %d rewritten (%d bytes), %d unchanged"
                % (head, self.header_only + self.rewrite, self.files, self.header_only,
                   self.rewrite, self.bytes, self.unchanged))
        if self.skipped_tagged:
            text += ", %d tagged skipped" % self.skipped_tagged
        if dry_run:
            text += "; estimated %s" % (_duration(self.estimate) if self.estimate is not None
                                        else "n/a")
        else:
            text += " in %.1f s" % self.seconds
            if self.hold_seconds:
                text += " (%.1f s holding)" % self.hold_seconds
            if self.swept:
                text += "; %d leftover temp files swept" % self.swept
        if self.not_running:
            text += "; caches not running (nothing to hold): %s" % ", ".join(self.not_running)
        if self.errors:
            text += "; %d errors" % len(self.errors)
        return text


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    if seconds >= 3600:
        return "%dh%02dm" % (seconds // 3600, seconds % 3600 // 60)
    if seconds >= 60:
        return "%dm%02ds" % (seconds // 60, seconds % 60)
    return "%ds" % seconds


def walk(whisper_dir: str) -> Iterator[tuple[str, str]]:
    """(metric, path) of every whisper file under ``whisper_dir``, sorted by path;
    tagged series (``_tagged/``, named by hash) come as metric None."""
    for folder, dirs, files in os.walk(whisper_dir):
        dirs.sort()
        for name in sorted(files):
            if not name.endswith(".wsp") or name.startswith("."):
                continue
            path = os.path.join(folder, name)
            rel = os.path.relpath(path, whisper_dir)[:-4]
            metric = rel.replace(os.sep, ".")
            yield ("" if rel.split(os.sep, 1)[0] == "_tagged" else metric), path


def sweep_temps(whisper_dir: str) -> int:
    """Remove temp files a killed resize left (the old files are intact)."""
    count = 0
    for folder, _, files in os.walk(whisper_dir):
        for name in files:
            if name.endswith(".wsp" + TEMP_SUFFIX):
                try:
                    os.unlink(os.path.join(folder, name))
                    count += 1
                except FileNotFoundError:
                    pass
    return count


def _fsync(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class _Holds:
    """The local caches' carbonlink sessions: hold and release metrics on all of them."""

    def __init__(self, caches: Sequence[tuple[str, int]], timeout: float) -> None:
        self.sessions = []
        self.down: list[tuple[str, int]] = []  # not running: nothing of theirs to hold
        for address in caches:
            try:
                self.sessions.append(Session(address, timeout))
            except ConnectionRefusedError:
                self.down.append(address)

    def ask(self, metrics: list[str]) -> list[list[str]]:
        """Ask every cache to hold ``metrics``; per cache, those still being written."""
        return [self._hold(session, metrics) for session in self.sessions]

    def wait(self, pending: list[list[str]]) -> None:
        """Until no cache is writing any of the metrics ``ask`` left pending."""
        deadline = time.monotonic() + HOLD_TIMEOUT
        for session, wanted in zip(self.sessions, pending, strict=True):
            while wanted:
                if time.monotonic() > deadline:
                    raise RuntimeError("cache %s:%d still writing %s after %.0f s"
                                       % (*session.address, wanted[0], HOLD_TIMEOUT))
                time.sleep(0.005)
                wanted = self._hold(session, wanted)

    def hold(self, metrics: list[str]) -> None:
        self.wait(self.ask(metrics))

    @staticmethod
    def _hold(session: Session, metrics: list[str]) -> list[str]:
        answer = session.request({"type": "resize-hold", "metrics": metrics})
        if "error" in answer:
            raise RuntimeError("cache %s:%d: %s" % (*session.address, answer["error"]))
        return list(answer.get("pending") or [])

    def release(self, metrics: list[str]) -> None:
        for session in self.sessions:
            answer = session.request({"type": "resize-release", "metrics": metrics})
            if "error" in answer:
                raise RuntimeError("cache %s:%d: %s" % (*session.address, answer["error"]))

    def close(self) -> None:
        for session in self.sessions:
            session.close()


class LocalResize:
    """One host's resize: its whisper folder, schema files and caches (carbonlink
    addresses; none: no cache runs, nothing to hold)."""

    def __init__(self, whisper_dir: str, conf_dir: str,
                 caches: Sequence[tuple[str, int]] = (), rates: Rates | None = None,
                 out: Out | None = None, clock: Callable[[], float] = time.time) -> None:
        self.whisper_dir = whisper_dir
        self.schemas = SchemaFiles(conf_dir)
        self.caches = list(caches)
        self.rates = rates or Rates()
        self.out = out
        self.clock = clock
        # new files' bodies allocated with posix_fallocate where there is one: the same
        # zero bytes as whisper.create writes, without writing them
        self.options = CreateOptions(use_fallocate=hasattr(os, "posix_fallocate"))

    def target(self, metric: str) -> Target:
        return schema_target(self.schemas, metric)

    def plan(self, report: Report) -> list[tuple[str, str, Change]]:
        """The files to change, counted into ``report``."""
        todo = []
        for metric, path in walk(self.whisper_dir):
            report.files += 1
            if not metric:
                report.skipped_tagged += 1
                continue
            try:
                change = compare(read_header(path), self.target(metric))
            except (OSError, WhisperError, ValueError) as exc:
                report.errors.append("%s: %s" % (path, exc))
                continue
            if change.kind == UNCHANGED:
                report.unchanged += 1
                continue
            if change.kind == HEADER:
                report.header_only += 1
                report.bytes += 16
            else:
                report.rewrite += 1
                report.bytes += os.path.getsize(path) + change.new_size
            todo.append((metric, path, change))
        return todo

    def dry_run(self) -> Report:
        report = Report()
        todo = self.plan(report)
        lock = self._lock()
        try:
            # one rewrite is timed on a temp copy, unless a resize runs (its temp files)
            report.estimate = self._estimate(todo, report, measure=lock is not None)
        finally:
            if lock is not None:
                os.close(lock)
        return report

    def _lock(self) -> int | None:
        """The folder's resize lock (an open descriptor), None if another run holds it."""
        os.makedirs(self.whisper_dir, exist_ok=True)
        lock = os.open(os.path.join(self.whisper_dir, LOCK_NAME), os.O_CREAT | os.O_RDWR, 0o644)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(lock)
            return None
        return lock

    def _estimate(self, todo: list[tuple[str, str, Change]], report: Report,
                  measure: bool = True) -> float:
        """Seconds for the changes: the slowest of the rate limits and the time one
        rewrite takes here (measured on a temp copy of the first file, then removed)."""
        changes = report.header_only + report.rewrite
        limits = [0.0]
        if self.rates.files:
            limits.append(changes / self.rates.files)
        if self.rates.bytes:
            limits.append(report.bytes / self.rates.bytes)
        sample = next((item for item in todo if item[2].kind == REWRITE), None)
        if sample is not None and measure:
            started = time.perf_counter()
            temp = rewrite(sample[1], sample[2], int(self.clock()), self.options)
            os.unlink(temp)
            limits.append(report.rewrite * (time.perf_counter() - started))
        return max(limits)

    def run(self) -> Report:
        """Change every file that differs; returns the counts."""
        started = time.monotonic()
        lock = self._lock()
        if lock is None:
            raise RuntimeError("another resize runs on %s" % self.whisper_dir)
        try:
            report = Report()
            report.swept = sweep_temps(self.whisper_dir)
            todo = self.plan(report)
            holds = _Holds(self.caches, HOLD_TIMEOUT) if self.caches else None
            if holds is not None:
                report.not_running = ["%s:%d" % address for address in holds.down]
            try:
                self._apply(todo, report, holds, started)
            finally:
                if holds is not None:
                    holds.close()
        finally:
            os.close(lock)
        report.seconds = time.monotonic() - started
        self._progress(report, len(todo), started, final=True)
        return report

    def _apply(self, todo: list[tuple[str, str, Change]], report: Report,
               holds: _Holds | None, started: float) -> None:
        files = make_limiter("token_bucket", self.rates.files or float("inf"),
                             capacity=max(1.0, self.rates.files))
        volume = make_limiter("token_bucket", self.rates.bytes or float("inf"),
                              capacity=max(1.0, self.rates.bytes))
        last = 0.0
        pool = ThreadPoolExecutor(2, thread_name_prefix="carbon-resize-fsync")
        try:
            self._batches(todo, report, holds, started, files, volume, pool, last)
        finally:
            pool.shutdown()

    def _batches(self, todo: list[tuple[str, str, Change]], report: Report,
                 holds: _Holds | None, started: float, files: RateLimiter,
                 volume: RateLimiter, pool: ThreadPoolExecutor, last: float) -> None:
        # The next batch is asked for before this one is worked on: the writes of it
        # in flight end meanwhile, and waiting for them costs nothing.
        batches = [todo[start:start + BATCH] for start in range(0, len(todo), BATCH)]
        pending = holds.ask([m for m, _, _ in batches[0]]) if holds and batches else []
        for number, batch in enumerate(batches):
            metrics = [metric for metric, _, _ in batch]
            if holds is not None:
                asked = time.monotonic()
                holds.wait(pending)
                if number + 1 < len(batches):
                    pending = holds.ask([m for m, _, _ in batches[number + 1]])
                report.hold_seconds += time.monotonic() - asked
            try:
                made: list[tuple[str, str, Future[None] | None]] = []
                for metric, path, _ in batch:
                    files.take()
                    temp = self._one(metric, path, report, volume)
                    if temp is not None:  # its fsync runs while the next file is made
                        made.append((temp, path, pool.submit(_fsync, temp)
                                     if self.rates.fsync else None))
                self._rename(made, report)
            finally:
                if holds is not None:
                    asked = time.monotonic()
                    holds.release(metrics)
                    report.hold_seconds += time.monotonic() - asked
            now = time.monotonic()
            if now - last >= (0.2 if self._tty() else 5.0):
                last = now
                self._progress(report, len(todo), started)

    @staticmethod
    def _rename(made: list[tuple[str, str, Future[None] | None]], report: Report) -> None:
        """Each new file into place once its fsync is done."""
        for temp, path, synced in made:
            try:
                if synced is not None:
                    synced.result()
                replace(temp, path, fsync=False)
                report.done += 1
            except OSError as exc:
                report.errors.append("%s: %s" % (path, exc))
                try:
                    os.unlink(temp)
                except OSError:
                    pass

    def _one(self, metric: str, path: str, report: Report, volume: RateLimiter
             ) -> str | None:
        """Compare again (a file may have changed since the plan) and change it: a
        header in place, or a new file made (its temp path returned, to be renamed)."""
        try:
            change = compare(read_header(path), self.target(metric))
            if change.kind == HEADER:
                volume.take(16)
                set_metadata(path, change)
            elif change.kind == REWRITE:
                with open(path, "rb") as handle:
                    image = handle.read()
                cost = float(len(image) + change.new_size)
                while cost > 0:  # in pieces no larger than the bucket
                    piece = min(cost, max(1.0, self.rates.bytes or cost))
                    volume.take(piece)
                    cost -= piece
                return rewrite(path, change, int(self.clock()), self.options, image)
            else:
                return None
            report.done += 1
        except (OSError, WhisperError, ValueError) as exc:
            report.errors.append("%s: %s" % (path, exc))
        return None

    def _tty(self) -> bool:
        return self.out is not None and self.out.isatty()

    def _progress(self, report: Report, total: int, started: float, final: bool = False
                  ) -> None:
        if self.out is None:
            return
        elapsed = time.monotonic() - started
        rate = report.done / elapsed if elapsed > 0 else 0.0
        left = (total - report.done) / rate if rate > 0 else 0.0
        width = 30
        filled = int(width * report.done / total) if total else width
        line = "[%s%s] %d/%d files, %.0f files/s, ETA %s" % (
            "#" * filled, "." * (width - filled), report.done, total, rate, _duration(left))
        if self._tty():
            self.out.write("\r" + line + ("\n" if final else ""))
        else:
            self.out.write(line + "\n")
        self.out.flush()


def cluster_resize(spec, host_name: Optional[str], rates: Rates, dry_run: bool,
                   out: TextIO) -> tuple[list[str], bool]:
    """Each chosen host's agent resizes its own files (in parallel); their schema files
    are written from the cluster file first. Returns (one summary line per host,
    whether every host succeeded)."""
    import http.client
    import json
    from concurrent.futures import ThreadPoolExecutor

    from carbon.cluster import control, generate
    hosts = control.select(spec, host_name)
    for host in hosts:
        generate.write_schemas(spec, host)
    query = "/resize?dry_run=%d&files=%s&bytes=%s&fsync=%d" % (
        dry_run, rates.files, rates.bytes, rates.fsync)

    def one(host) -> tuple[str, bool]:
        conn = http.client.HTTPConnection(host.address, host.agent_port, timeout=600)
        try:
            conn.request("POST", query, body=b"")
            reply = conn.getresponse()
            if reply.status != 200:
                return "%s: agent answered %d %s" % (host.name, reply.status,
                                                     reply.read()[:300].decode()), False
            for raw in reply:
                line = raw.decode("utf-8", "replace").rstrip("\n")
                if line.startswith("RESULT "):
                    answer = json.loads(line[7:])
                    if "error" in answer:
                        return "%s: %s" % (host.name, answer["error"]), False
                    errors = answer.get("errors") or []
                    text = "%s: %s" % (host.name, answer["summary"])
                    for error in errors[:20]:
                        text += "\n%s: error: %s" % (host.name, error)
                    return text, not errors
                out.write("%s: %s\n" % (host.name, line))
                out.flush()
            return "%s: the agent closed the stream without a result" % host.name, False
        except OSError as exc:
            return "%s: agent %s:%d: %s" % (host.name, host.address, host.agent_port,
                                            exc), False
        finally:
            conn.close()

    with ThreadPoolExecutor(max(1, len(hosts))) as pool:
        results = list(pool.map(one, hosts))
    return [text for text, _ in results], all(ok for _, ok in results)


def parse_caches(values: Sequence[str]) -> list[tuple[str, int]]:
    """``HOST:PORT`` (or ``HOST:PORT:INSTANCE``) carbonlink addresses."""
    caches = []
    for value in values:
        parts = value.split(":")
        if len(parts) < 2 or not parts[1].isdigit():
            raise ValueError("--carbonlink wants HOST:PORT[:INSTANCE], got %r" % value)
        caches.append((parts[0], int(parts[1])))
    return caches


def main(argv: Optional[Sequence[str]] = None) -> int:
    """``carbon-resize``: one host's files (see the module's docstring)."""
    import argparse
    parser = argparse.ArgumentParser(
        prog="carbon-resize", description="Apply storage-schemas.conf / "
        "storage-aggregation.conf to this host's existing whisper files, online.")
    parser.add_argument("--whisper-dir", required=True, help="LOCAL_DATA_DIR")
    parser.add_argument("--conf-dir", required=True,
                        help="the folder of storage-schemas.conf / storage-aggregation.conf")
    parser.add_argument("--carbonlink", action="append", default=[], metavar="HOST:PORT",
                        help="a carbon-cache of this host (its CACHE_QUERY_PORT); repeat")
    add_rate_options(parser)
    args = parser.parse_args(argv)
    try:
        resize = LocalResize(args.whisper_dir, args.conf_dir, parse_caches(args.carbonlink),
                             rates_of(args), out=sys.stderr)
        report = resize.dry_run() if args.dry_run else resize.run()
    except (OSError, RuntimeError, ValueError) as exc:
        print("carbon-resize: %s" % exc, file=sys.stderr)
        return 1
    print(report.summary(args.dry_run))
    for error in report.errors:
        print("error: %s" % error)
    return 1 if report.errors else 0


DEFAULT_FILES_PER_SECOND = 500.0
DEFAULT_BYTES_PER_SECOND = 50e6


def add_rate_options(parser) -> None:
    """The options ``carbon-resize`` and ``carbon-cluster resize`` share."""
    parser.add_argument("--dry-run", action="store_true",
                        help="count the files to change, bytes and the time; change nothing")
    parser.add_argument("--rate-files", "--files-per-second", dest="rate_files", type=float,
                        default=DEFAULT_FILES_PER_SECOND,
                        help="files changed a second at most (default %g; 0 = unlimited)"
                        % DEFAULT_FILES_PER_SECOND)
    parser.add_argument("--rate-bytes", "--bytes-per-second", dest="rate_bytes", type=float,
                        default=DEFAULT_BYTES_PER_SECOND,
                        help="bytes read and written a second at most (default %g; "
                        "0 = unlimited)" % DEFAULT_BYTES_PER_SECOND)
    parser.add_argument("--no-fsync", action="store_true",
                        help="do not fsync each new file before its rename")


def rates_of(args) -> Rates:
    for name in ("rate_files", "rate_bytes"):
        if getattr(args, name) < 0:
            raise ValueError("--%s must be 0 or more" % name.replace("_", "-"))
    return Rates(args.rate_files, args.rate_bytes, not args.no_fsync)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
