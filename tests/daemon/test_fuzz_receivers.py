"""Hypothesis fuzzing of a running carbon-cache's line and pickle receivers."""

from __future__ import annotations

import itertools
import socket

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from tests.support import CarbonInstance, carbonlink, port_open, send_tcp, wait_for

COUNTER = itertools.count()
# Writes paused: what was received stays in the cache and carbonlink shows it.
PAUSED = {"MAX_UPDATES_PER_SECOND": 0.0001, "MAX_CREATES_PER_MINUTE": 0.0001}


@pytest.fixture(scope="module")
def daemon(tmp_path_factory):
    instance = CarbonInstance(tmp_path_factory.mktemp("fuzz"), **PAUSED)
    instance.start_foreground()
    yield instance
    instance.kill()


junk_line = st.binary(max_size=80).map(lambda b: b.replace(b"\n", b""))
value = st.floats(allow_nan=False, allow_infinity=False, width=64)
FUZZ = settings(max_examples=25, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture])


@FUZZ
@given(values=st.lists(value, min_size=1, max_size=8), junk=st.lists(junk_line, max_size=8),
       seed=st.randoms(use_true_random=False))
def test_valid_lines_in_a_mixed_stream_are_stored(daemon, values, junk, seed):
    run = next(COUNTER)
    good = [("fuzz.r%d.m%d" % (run, i), v, 1000 + i) for i, v in enumerate(values)]
    lines = [("%s %r %d" % g).encode() for g in good] + junk
    seed.shuffle(lines)
    send_tcp(daemon.line_port, b"\n".join(lines) + b"\n")
    names = [g[0] for g in good]

    def stored():
        found = carbonlink(daemon.query_port, {"type": "cache-query-bulk", "metrics": names})
        return all(found["datapointsByMetric"][n] for n in names) and found

    found = wait_for(stored, timeout=20, what="fuzzed points")["datapointsByMetric"]
    for name, v, stamp in good:
        assert found[name] == [(float(stamp), v)]


@FUZZ
@given(st.binary(min_size=1, max_size=2000))
def test_random_bytes_on_every_port_never_crash(daemon, data):
    for port in (daemon.line_port, daemon.pickle_port, daemon.query_port):
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
                sock.sendall(data)
        except OSError:
            pass
    assert daemon.proc.poll() is None
    assert port_open(daemon.line_port)
