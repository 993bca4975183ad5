"""Lines in over real TCP connections to an aggregating pipeline: whole reads staged by
the chunk path, the other reads parsed, together give exactly the aggregates and
counters of parsing every line and aggregating the tuples."""

from __future__ import annotations

import random
import socket
import threading

import pytest
from twisted.internet import defer

from carbon.aggregator.buffers import BufferManager
from carbon.aggregator.processor import AggregationConfig, AggregationProcessor
from carbon.aggregator.rules import parse_rules
from carbon.aggregator.staging import stage, stage_chunk
from carbon.config.settings import Settings
from carbon.instrumentation.stats import Stats
from carbon.logs import MemoryLog
from carbon.pipeline import Pipeline
from carbon.receivers.context import ReceiverConfig, ReceiverContext
from carbon.flow import FlowControl
from carbon.formats.plaintext import parse_lines
from carbon.receivers.protocols import LineReceiver, ReceiverFactory
from carbon.rewrite import RewriteProcessor, parse_rewrite_rules
from tests.relay.harness import run_reactor, wait_for

METHODS = ("sum", "avg", "min", "max", "count", "p90")
RULES = "".join("agg.<g>.%s (10) = %s in.<g>.*.%s\n" % (m, m, m) for m in METHODS)
MAX_LENGTH = 200
BASE = 1_700_000_000  # a multiple of 10


def stream(seed: int) -> tuple[bytes, int]:
    """Mostly canonical lines over two intervals; stretches of valid non-canonical lines,
    bad lines and over-long lines. Values are halves: their sums do not depend on order."""
    rnd = random.Random(seed)
    out, bad = [], 0
    for i in range(20_000):
        name = "in.g%d.h%d.%s" % (rnd.randrange(20), rnd.randrange(50), rnd.choice(METHODS))
        value = rnd.randrange(-2000, 2000) / 2
        stamp = BASE + (i // 5000) * 7  # BASE, +7, +14, +21: two intervals, reads mixing them
        if 8000 <= i < 8300:  # valid but not canonical
            out.append(b"%s  %r\t%d.0\r\n" % (name.encode(), value, stamp))
        elif i % 4999 == 1:
            out.append(b"%s not-a-number %d\n" % (name.encode(), stamp))
            bad += 1
        elif i % 6007 == 1:
            out.append(b"%s %s %d\n" % (b"x" * MAX_LENGTH, b"1", stamp))
            bad += 1
        elif i % 7001 == 1:
            out.append(b"unmatched.name 1 -1\n")  # now: valid, no rule matches
        else:
            text = ("%.10f" % value).rstrip("0").rstrip(".")
            out.append(b"%s %s %d\n" % (name.encode(), text.encode(), stamp))
    return b"".join(out), bad


class _Sink:
    """Nothing may reach it: FORWARD_ALL = False."""

    accepts_lines = True

    def put_many(self, batch) -> None:
        raise AssertionError("received points passed through: %r" % batch[:3])

    put_lines = put_many


def aggregator(stager) -> tuple[AggregationProcessor, Pipeline, Settings]:
    settings = Settings(FORWARD_ALL=False, LINE_RECEIVER_MAX_LENGTH=MAX_LENGTH)
    proc = AggregationProcessor(parse_rules(RULES), BufferManager.from_settings(settings),
                                AggregationConfig.from_settings(settings), Stats())
    proc.stage = stager
    rewrites = parse_rewrite_rules("")
    pipeline = Pipeline([RewriteProcessor(rewrites, "pre"), proc,
                         RewriteProcessor(rewrites, "post")], _Sink())
    return proc, pipeline, settings


@pytest.mark.parametrize("stager", [stage, stage_chunk], ids=["native", "python"])
def test_reads_over_tcp_aggregate_exactly_like_parsed_tuples(stager):
    streams = [stream(seed) for seed in range(3)]
    proc, pipeline, settings = aggregator(stager)
    stats = Stats()
    handled = {"chunks": 0, "other": 0}
    original = proc.process_chunk

    def spy(chunk: bytes, max_length: int = 0):
        result = original(chunk, max_length)
        handled["chunks" if result is not None else "other"] += 1
        return result
    proc.process_chunk = spy  # type: ignore[method-assign]

    valid = []
    for data, _ in streams:
        points, _ = parse_lines([line for line in data.split(b"\n")[:-1]
                                 if len(line) <= MAX_LENGTH], now=BASE)
        valid.extend(points)
    bad = sum(count for _, count in streams)

    @defer.inlineCallbacks
    def body(reactor):
        context = ReceiverContext(ReceiverConfig.from_settings(settings), pipeline, stats,
                                  FlowControl(), MemoryLog())
        listener = reactor.listenTCP(0, ReceiverFactory(LineReceiver, context),
                                     interface="127.0.0.1")

        def send(data: bytes, seed: int) -> None:
            rnd = random.Random(seed)
            with socket.create_connection(("127.0.0.1", listener.getHost().port)) as sock:
                start = 0
                while start < len(data):  # reads split lines anywhere
                    size = rnd.choice([1, 37, 5000, 40_000])
                    sock.sendall(data[start:start + size])
                    start += size
        senders = [threading.Thread(target=send, args=(data, seed))
                   for seed, (data, _) in enumerate(streams)]
        for sender in senders:
            sender.start()
        yield wait_for(reactor, lambda: (stats.get("metricsReceived") == len(valid)
                                         and stats.get("invalidLines") == bad),
                       timeout=30, what="every line counted")
        for sender in senders:
            sender.join(5)
        yield listener.stopListening()
        for conn in list(context.connections):
            conn.transport.loseConnection()

    run_reactor(body, timeout=60)
    assert handled["chunks"] > 0 and handled["other"] > 0  # both paths were taken

    # The reference: every valid point as a tuple, in one go.
    ref_settings = Settings(FORWARD_ALL=False)
    reference = AggregationProcessor(parse_rules(RULES),
                                     BufferManager.from_settings(ref_settings),
                                     AggregationConfig.from_settings(ref_settings), Stats())
    reference.process([p for p in valid if p[0] != "unmatched.name"])
    got = sorted(proc.flush(BASE + 100, force=True))
    assert got == sorted(reference.flush(BASE + 100, force=True))
    assert len(got) > 100
