"""The cache journal in a real carbon-cache: SIGTERM that only flushes the journal, and a
journal over CACHE_JOURNAL_MAX_BYTES pausing the receivers instead of dropping."""

from __future__ import annotations

import time

from tests.support import CarbonInstance, carbonlink, read_whisper, send_tcp, wait_for

NOW = int(time.time()) // 60 * 60


def cached(instance: CarbonInstance, names: list[str]) -> int:
    reply = carbonlink(instance.query_port, {"type": "cache-query-bulk", "metrics": names})
    return sum(len(points) for points in reply["datapointsByMetric"].values())


def stored_count(instance: CarbonInstance, names: list[str]) -> int:
    return sum(len(read_whisper(instance.whisper_path(name), NOW - 3600, NOW)) for name in names)


def journal_files(instance: CarbonInstance) -> list:
    return list((instance.storage / "cache-journal" / "carbon-cache-a").glob("*.journal"))


def test_sigterm_with_journal_flush_exits_at_once_and_loses_nothing(tmp_path):
    # One update a second: draining 300 metrics would take five minutes.
    instance = CarbonInstance(tmp_path, MAX_UPDATES_PER_SECOND=1, SHUTDOWN_DRAIN_CACHE=False)
    instance.start_foreground()
    names = ["flush.m%03d" % i for i in range(300)]
    send_tcp(instance.line_port, b"".join(b"%s %d %d\n" % (name.encode(), k, NOW - 60 * k)
                                          for k in (3, 2, 1) for name in names))
    wait_for(lambda: cached(instance, names) + stored_count(instance, names) >= 900,
             what="points in the cache")
    started = time.monotonic()
    assert instance.terminate(timeout=30) == 0
    assert time.monotonic() - started < 10
    assert "Journal flushed with" in instance.output()
    assert stored_count(instance, names) < 900 and journal_files(instance)
    instance.settings["MAX_UPDATES_PER_SECOND"] = "inf"
    instance.write_conf()
    instance.start_foreground()  # replays the journal
    assert "Journal: replayed" in instance.output()
    wait_for(lambda: stored_count(instance, names) == 900, timeout=30, what="every point")
    assert instance.terminate() == 0
    assert not journal_files(instance)  # all written: every segment retired


def test_journal_bound_pauses_receivers_and_drops_nothing(tmp_path):
    instance = CarbonInstance(tmp_path, MAX_UPDATES_PER_SECOND=200,
                              CACHE_JOURNAL_MAX_BYTES=150000,
                              CACHE_JOURNAL_SEGMENT_BYTES=16384, LOG_CREATES=False)
    instance.start_foreground()
    try:
        names = ["bound.m%03d" % i for i in range(200)]
        lines = b"".join(b"%s %d %d\n" % (name.encode(), k, NOW - 60 * k)
                         for k in range(40, 0, -1) for name in names)  # ~46 bytes a point
        send_tcp(instance.line_port, lines)
        wait_for(lambda: stored_count(instance, names) == 8000, timeout=60,
                 what="every point written")
        output = instance.output()
        assert "Journal paused the receivers" in output
        wait_for(lambda: "Journal resumed the receivers" in instance.output(), timeout=10,
                 what="the receivers to resume")
    finally:
        instance.kill()
