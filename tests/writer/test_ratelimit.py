"""Token bucket rate limiting."""

from __future__ import annotations

import time

import pytest

from carbon.plugins import RATE_LIMITERS
from carbon.writer.ratelimit import TokenBucket, make_limiter


def test_non_blocking_take_respects_capacity():
    bucket = TokenBucket(3, 1)
    assert [bucket.take(blocking=False) for _ in range(4)] == [True, True, True, False]


def test_blocking_take_waits_for_refill():
    bucket = TokenBucket(1, 20)
    bucket.take()
    started = time.monotonic()
    for _ in range(4):
        bucket.take()
    elapsed = time.monotonic() - started
    assert 0.12 <= elapsed < 1.0


def test_infinite_rate_never_waits_and_rate_changes():
    assert make_limiter("token_bucket", float("inf")).take(blocking=False)
    bucket = TokenBucket(1, 0.001)
    bucket.take()
    assert not bucket.take(blocking=False)
    bucket.set_rate(1000, 1000)
    time.sleep(0.01)
    assert bucket.take(blocking=False)
    assert "unlimited" in RATE_LIMITERS


def test_available_and_seconds_until_take_nothing() -> None:
    bucket = TokenBucket(2, 10.0)
    assert bucket.available() == pytest.approx(2.0, abs=0.01)
    assert bucket.seconds_until() == 0.0
    assert bucket.take(2, blocking=False)
    assert 0.05 < bucket.seconds_until() <= 0.1  # one token at 10 a second
    assert bucket.available() < 1.0
    assert not bucket.take(blocking=False)
    unlimited = TokenBucket(float("inf"), float("inf"))
    assert unlimited.available() == float("inf") and unlimited.seconds_until() == 0.0
