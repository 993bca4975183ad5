"""Fault: carbon-relay (or carbon-aggregator, whose output goes through the same
destination clients) -> carbon-cache, the cache stopped (SIGTERM) mid-stream and
started again. Every point sent must end up in whisper (at least once delivery: the
resend window, the cache reading its sockets before closing them)."""

from __future__ import annotations

import os
import time

import pytest

from tests.faults.load import (PacedSender, count_stored, expected_points, fault_lines,
                               one_second_schema)
from tests.support import CarbonInstance, wait_for

POINTS = int(os.environ.get("FAULT_POINTS", "60000"))
NAMES = 100
RATE = 20000.0  # lines a second into the relay


@pytest.mark.parametrize("program", ["carbon-relay", "carbon-aggregator"])
def test_cache_restarted_mid_stream_loses_nothing(tmp_path, program):
    start = int(time.time()) - 3600
    cache = CarbonInstance(tmp_path / "cache", MAX_CACHE_SIZE=10000, MAX_UPDATES_PER_SECOND=100)
    one_second_schema(cache)
    relay = CarbonInstance(tmp_path / "relay", program=program, section=program[7:],
                           RELAY_METHOD="consistent-hashing", FORWARD_ALL=True,
                           DESTINATIONS="127.0.0.1:%d:a" % cache.pickle_port,
                           CARBON_METRIC_INTERVAL=1)
    (relay.conf / "aggregation-rules.conf").write_text("# forwards everything, no rules\n")
    started = []
    try:
        cache.start_foreground()
        started.append(cache)
        relay.start_foreground()
        started.append(relay)
        sender = PacedSender(relay.line_port, fault_lines(POINTS, NAMES, start), RATE)
        sender.start()
        wait_for(lambda: sender.sent >= POINTS * 0.4 or sender.error, timeout=60,
                 what="40% sent")
        assert cache.terminate(60) == 0  # SIGTERM mid-stream
        time.sleep(1.0)
        cache.start_foreground()  # same ports, same storage
        sender.join(120)
        assert sender.error is None and sender.sent == POINTS
        expected = expected_points(POINTS, NAMES, start)
        end = start + POINTS // NAMES

        def all_stored() -> bool:
            return count_stored(cache.storage, NAMES, start, end, expected)[0] == POINTS

        try:
            wait_for(all_stored, timeout=60, interval=0.5, what="every point in whisper")
        finally:
            good, wrong = count_stored(cache.storage, NAMES, start, end, expected)
            print("%s->cache restart: %d of %d stored, %d lost, %d wrong"
                  % (program, good, POINTS, POINTS - good, wrong))
        assert wrong == 0
        relay_log = relay.output()
        assert "resending" in relay_log  # the window went out again after the restart
        # ... and the daemon's self-metrics count it (destinations.<dest>.resent)
        wait_for(lambda: list((cache.storage / "whisper" / "carbon").rglob("resent.wsp")),
                 timeout=30, what="the resent self-metric")
    finally:
        for instance in started:
            instance.kill()
