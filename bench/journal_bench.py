"""The cache journal's cost on the receive path, and its replay rate, in-process.

The receive path as the reactor thread runs it: a plaintext load (bench/cache_bench.py's
payload, time-major) cut into 64 KiB reads, each parsed (carbon.formats.plaintext) and
handed to the CacheSink, with CACHE_JOURNAL off and on, in the order off, on, on, off
(--rounds times). No writer runs: this is the cost the journal adds per accepted point.
Then the replay: a new Journal replays the segments the last run left into an empty cache.

    python bench/journal_bench.py [--points 2000000 --metrics 10000 --rounds 2]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from cache_bench import payload  # noqa: E402

from carbon.cache.journal import Journal  # noqa: E402
from carbon.cache.sink import CacheSink, CacheSinkConfig  # noqa: E402
from carbon.cache.store import MetricCache  # noqa: E402
from carbon.config.settings import Settings  # noqa: E402
from carbon.instrumentation.stats import Stats  # noqa: E402
from carbon.logs import CarbonLog  # noqa: E402
from carbon.flow import FlowControl  # noqa: E402
from carbon.formats.plaintext import parse_lines  # noqa: E402

READ = 65536


def reads(data: bytes) -> list[list[bytes]]:
    """The load as the receiver sees it: complete lines of each 64 KiB read."""
    out = []
    tail = b""
    for start in range(0, len(data), READ):
        chunk = tail + data[start:start + READ]
        cut = chunk.rfind(b"\n") + 1
        out.append(chunk[:cut].split(b"\n")[:-1])
        tail = chunk[cut:]
    return out


def receive(chunks: list[list[bytes]], journal_dir: Path | None, fsync: float) -> tuple:
    cache = MetricCache()
    log = CarbonLog(stream=open("/dev/null", "w"))
    journal = None
    if journal_dir is not None:
        journal = Journal(str(journal_dir), cache, log, segment_bytes=64 * 1024 ** 2,
                          max_bytes=float("inf"), fsync_interval=fsync)
        journal.open()
    sink = CacheSink(cache, CacheSinkConfig.from_settings(Settings()), Stats(), FlowControl(),
                     log, journal=journal)
    started = time.perf_counter()
    for lines in chunks:
        batch, _bad = parse_lines(lines)
        sink.put_many(batch)
    took = time.perf_counter() - started
    if journal is not None:
        journal.close()
    return took, cache.size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=2_000_000)
    parser.add_argument("--metrics", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--fsync", type=float, default=1.0,
                        help="CACHE_JOURNAL_FSYNC_INTERVAL (only rotation syncs here)")
    args = parser.parse_args()
    data, _names = payload(args.points, args.metrics, int(time.time()) // 10 * 10)
    chunks = reads(data)
    base = Path(tempfile.mkdtemp(prefix="journalbench-"))
    rows = []
    try:
        for _ in range(args.rounds):
            for journal in (False, True, True, False):
                target = base / ("j%d" % len(rows)) if journal else None
                took, size = receive(chunks, target, args.fsync)
                rows.append((journal, took, size))
                print("journal %-3s %.3f s  %s points/s" % (
                    "on" if journal else "off", took, format(int(size / took), ",")),
                    flush=True)
        off = [size / took for journal, took, size in rows if not journal]
        on = [size / took for journal, took, size in rows if journal]
        mean_off, mean_on = sum(off) / len(off), sum(on) / len(on)
        print("\n| journal | receive path points/s (mean of %d) |" % len(on))
        print("|---|---|")
        print("| off | %s |" % format(int(mean_off), ","))
        print("| on | %s |" % format(int(mean_on), ","))
        print("cost: %.1f%%" % (100 * (1 - mean_on / mean_off)))
        last = base / ("j%d" % max(i for i, row in enumerate(rows) if row[0]))
        disk = sum(path.stat().st_size for path in last.iterdir())
        print("journal bytes: %s (%.1f a point)" % (format(disk, ","), disk / args.points))
        for _ in range(3):
            cache = MetricCache()
            log = CarbonLog(stream=open("/dev/null", "w"))
            replay = Journal(str(last), cache, log, segment_bytes=64 * 1024 ** 2,
                             max_bytes=float("inf"), fsync_interval=0)
            started = time.perf_counter()
            points = replay.open()
            took = time.perf_counter() - started
            replay.close()
            (last / ("%016d.journal" % replay.current.seq)).unlink(missing_ok=True)
            print("replay: %s points in %.3f s: %s points/s" % (
                format(points, ","), took, format(int(points / took), ",")), flush=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
