"""carbon-cache's whole-read path: a socket read to the journal's point form in one C
pass (carbon.cache._journal.encode_lines) and from there into the cache
(carbon.cache._store.add_encoded), each against its Python twin; then over a real TCP
receiver, the same cache, journal and counters as the general path."""

from __future__ import annotations

import math
import os
import random
import socket
import threading

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from twisted.internet import defer

from carbon.cache import journal as journal_module
from carbon.cache import store as store_module
from carbon.cache.journal import Journal, decode_py, encode_lines_py, encode_py, read_records
from carbon.cache.sink import CacheSink, CacheSinkConfig
from carbon.cache.store import MetricCache, add_encoded_py
from carbon.config.settings import Settings
from carbon.flow import FlowControl
from carbon.instrumentation.stats import Stats
from carbon.logs import MemoryLog
from carbon.pipeline import Batch, Pipeline, Processor
from carbon.receivers.context import ReceiverConfig, ReceiverContext
from carbon.receivers.protocols import LineReceiver, ReceiverFactory
from tests.formats.number_texts import NUMBER_EDGES
from tests.relay.harness import run_reactor, wait_for

native_lines = journal_module._native_encode_lines
native_add = store_module._native_add_encoded
pytestmark = pytest.mark.skipif(
    native_lines is None and not os.environ.get("CARBON_REQUIRE_NATIVE"),
    reason="C accelerator not built")


def test_accelerators_are_built_where_required():
    assert native_lines is not None and native_add is not None
    assert journal_module.encode_lines is native_lines


def same(chunk: bytes, max_length: int = 0, now: float = 1234.5) -> None:
    want = encode_lines_py(chunk, max_length, now)
    got = native_lines(chunk, max_length, now)
    # the payloads hold the doubles' bytes: equal payloads are bit-identical values
    assert got == want


TOKENS = [b"0", b"-0", b"1", b"-1", b"1.5", b".5", b"5.", b"1e3", b"1E-3", b"+1", b"1_0",
          b"inf", b"-inf", b"nan", b"0x10", b"1e999", b"123456789012345",
          b"12345678901234567890", b"0.30000000000000004", b"1..2", b"-", b"", b"1e",
          b"\xd9\xa1", b"\xff", b"-1.0", b"-1.5", b"-2", b"-1.999", b"00012",
          b"9007199254740993", b"1e-400", b"1.2345678901234567e-05"]
NAMES = [b"a.b", b"\xe2\x82\xac.x", b"x;t=1", b"~x", b'x{a="1"}', b"{", b"}", b"\xc3",
         b"\xed\xa0\x80", b"a" * 70]


@settings(max_examples=600, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(NAMES), st.lists(st.sampled_from(TOKENS),
                                                           min_size=0, max_size=4)),
                max_size=30),
       st.sampled_from([b" ", b"  ", b"\t", b" \r", b"\x0b", b"\x1c", b"\xa0"]),
       st.sampled_from([b"\n", b"\r\n", b""]),
       st.sampled_from([0, 8, 30, 80]))
@example([(b"a", [b"1", b"-1"]), (b"a", [b"1", b"-1.5"])], b" ", b"\n", 0)
def test_same_as_python_on_token_soup(rows, separator, end, max_length):
    lines = [separator.join([name] + tokens) for name, tokens in rows]
    chunk = b"\n".join(lines) + end
    same(chunk, max_length)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300), st.sampled_from([0, 10]))
def test_same_as_python_on_random_bytes(chunk, max_length):
    same(chunk, max_length)
    same(chunk + b"\n", max_length)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.floats(allow_nan=True, allow_infinity=True),
                          st.floats(min_value=-1e20, max_value=1e20)), max_size=20))
def test_same_as_python_on_float_reprs(pairs):
    lines = []
    for value, stamp in pairs:
        lines.append(b"m.x %r %r\n" % (value, stamp))
    same(b"".join(lines))


def test_same_as_python_on_number_edges():
    for text in NUMBER_EDGES:
        same(b"m %s 100\nm 1 %s\n" % (text, text))


def test_full_precision_values_are_read_as_float_reads_them():
    rnd = random.Random(3)
    values = [rnd.random() * 10 ** rnd.randint(-8, 12) for _ in range(2000)]
    chunk = b"".join(b"bench.m%d %r %d\n" % (i, v, 1_700_000_000 + i)
                     for i, v in enumerate(values))
    payload, count = native_lines(chunk, 0, 0.0)
    points = decode_py(payload, count)
    assert count == len(values)
    for (_, _stamp, value), want in zip(points, values, strict=True):
        assert value == want and math.copysign(1, value) == math.copysign(1, want)
    assert [p[1] for p in points] == [1_700_000_000.0 + i for i in range(len(values))]


def test_the_general_path_keeps_every_read_it_must_judge():
    good = b"a.b 1 100\n"
    for chunk in (good + b"a.b x 100\n", good + b"a.b 1\n", good + b"a.b 1 100",
                  good + b"a;t=1 1 100\n", good + b"a.b nan 100\n", good + b"\xff 1 1\n",
                  good + b"a.b 1 1e999\n"):
        assert native_lines(chunk, 0, 0.0) is None
        assert encode_lines_py(chunk, 0, 0.0) is None
    assert native_lines(good + b"x" * 20 + b" 1 1\n", 20, 0.0) is None  # overlong
    assert native_lines(good + b"x" * 15 + b" 1 1\n", 20, 0.0) is not None
    assert native_lines(good + b"\n  \n", 0, 0.0) == (encode_py([("a.b", 100.0, 1.0)]), 1)
    assert native_lines(b"", 0, 0.0) == (b"", 0)
    assert native_lines(b"a 1 -1\n", 0, 77.0) == (encode_py([("a", 77.0, 1.0)]), 1)
    # numbers past the fast path and non-ASCII names: read again with the GIL, kept
    mixed = b"a 1.5e-07 100\n\xc3\xa9.b inf 100\n"
    assert native_lines(mixed, 0, 0.0) is None  # inf: the general path judges it
    mixed = b"a 1.5e-07 100\n\xc3\xa9.b 2 1e9\n"
    assert native_lines(mixed, 0, 0.0) == (
        encode_py([("a", 100.0, 1.5e-07), ("é.b", 1e9, 2.0)]), 2)


batches = st.lists(st.tuples(st.sampled_from(["a", "b.c", "é.ü", "x" * 70, "", "b.d",
                                              "12345678", "123456789"]),
                             st.floats(allow_nan=False), st.floats(allow_nan=False)),
                   max_size=40)


@settings(max_examples=300, deadline=None)
@given(st.lists(batches, max_size=4), st.sampled_from([None, 1, 2, 3, 1000]),
       st.integers(0, 3))
def test_add_encoded_equals_python(rounds, limit, popped):
    """With or without a Names table (also one that keeps forgetting), metrics popped
    from the cache between rounds as a writer does."""
    names = store_module._Names(limit) if limit else None
    got: dict[str, bytearray] = {}
    want: dict[str, bytearray] = {}
    for batch in rounds:
        payload = encode_py(batch)
        assert native_add(got, payload, len(batch), names) == len(batch)
        assert add_encoded_py(want, payload, len(batch)) == len(batch)
        assert got == want
        for name in list(want)[:popped]:
            del got[name], want[name]
    if names is not None:
        assert len(names) <= limit


def test_names_table_answers_the_same_str_object():
    names = store_module._Names(10)
    data: dict[str, bytearray] = {}
    native_add(data, encode_py([("a.b", 1.0, 2.0)]), 1, names)
    native_add(data, encode_py([("a.b", 3.0, 4.0), ("é", 1.0, 1.0)]), 2, names)
    assert len(names) == 1  # the ASCII name only
    key = next(iter(data))
    data2: dict[str, bytearray] = {}
    native_add(data2, encode_py([("a.b", 5.0, 6.0)]), 1, names)
    assert next(iter(data2)) is key
    with pytest.raises(TypeError):
        native_add(data, encode_py([("a", 1.0, 1.0)]), 1, {})


def test_add_encoded_checks_the_whole_payload_before_adding():
    payload = encode_py([("a", 1.0, 2.0), ("b", 3.0, 4.0)])
    for adder in (native_add, add_encoded_py):
        data: dict[str, bytearray] = {}
        for bad, count in ((payload[:-1], 2), (payload, 3), (payload, 1), (payload, -1)):
            with pytest.raises(ValueError):
                adder(data, bad, count)
        assert data == {}


# -- over a real receiver -----------------------------------------------------------

def _stream(seed: int = 5) -> tuple[bytes, int]:
    """Full-precision lines; some reads hold a bad, a tagged or an overlong line."""
    rnd = random.Random(seed)
    out, bad = [], 0
    for i in range(40_000):
        name = b"ingest.m%d" % (i % 2000)
        if i % 7919 == 0:
            out.append(b"%s not-a-number %d\n" % (name, i))
            bad += 1
        elif i % 5003 == 0:
            out.append(b"tagged.m%d;dc=%s 1.5 %d\n" % (i, b"ab"[i % 2:][:1], 1_700_000_000))
        elif i % 6007 == 0:
            out.append(b"%s %s 1\n" % (name, b"9" * 400))
            bad += 1  # overlong: counted as an invalid line
        elif i % 3001 == 0:
            out.append(b"%s 1e-07 %d\n" % (name, 1_700_000_000 + i))  # past the fast path
        else:
            out.append(b"%s %r %d\n" % (name, rnd.random() * 1000, 1_700_000_000 + i))
    return b"".join(out), bad


class Passing(Processor):
    def process(self, batch: Batch) -> Batch:
        return batch


def _ingest(tmp_path, data: bytes, chunks: bool, stage: bool = False) -> tuple:
    """Send ``data`` to a LineReceiver -> CacheSink (journal on); the cache's points,
    the journal's points, the counters and the reads the sink took whole."""
    directory = tmp_path / ("chunks" if chunks else "general") / ("stage" if stage else "")
    settings = Settings()
    settings.update({"LINE_RECEIVER_MAX_LENGTH": 300})
    stats, flow = Stats(), FlowControl()
    cache = MetricCache()
    journal = Journal(str(directory), cache, MemoryLog(), segment_bytes=1 << 30,
                      max_bytes=float("inf"), fsync_interval=0.0)
    journal.open()
    sink = CacheSink(cache, CacheSinkConfig.from_settings(settings), stats, flow, MemoryLog(),
                     journal=journal)
    sink.accepts_chunks = chunks
    taken = [0]
    put_chunk = sink.put_chunk

    def counting(chunk: bytes, max_length: int = 0) -> int | None:
        count = put_chunk(chunk, max_length)
        taken[0] += count is not None
        return count
    sink.put_chunk = counting  # type: ignore[method-assign]
    context = ReceiverContext(ReceiverConfig.from_settings(settings),
                              Pipeline([Passing()] if stage else [], sink), stats, flow,
                              MemoryLog())

    @defer.inlineCallbacks
    def body(reactor):
        listener = reactor.listenTCP(0, ReceiverFactory(LineReceiver, context),
                                     interface="127.0.0.1")

        def send() -> None:
            with socket.create_connection(("127.0.0.1", listener.getHost().port)) as sock:
                for start in range(0, len(data), 30_000):  # reads split lines anywhere
                    sock.sendall(data[start:start + 30_000])
        sender = threading.Thread(target=send)
        sender.start()
        lines = data.count(b"\n")
        yield wait_for(reactor, lambda: stats.get("metricsReceived") + stats.get("invalidLines")
                       == lines and not sender.is_alive() and not context.connections,
                       timeout=30, what="every line and the connection's end")
        sender.join(5)
        yield listener.stopListening()

    run_reactor(body, timeout=60)
    journal.close()
    journaled = []
    for path in sorted(directory.glob("*.journal")):
        records, _ = read_records(path.read_bytes())
        for payload, count in records:
            journaled.extend(decode_py(bytes(payload), count))
    cached = {name: cache.get(name) for name in cache.names()}
    return cached, journaled, stats.get("invalidLines"), stats.get("metricsReceived"), \
        taken[0]


def test_whole_reads_give_the_general_paths_cache_journal_and_counts(tmp_path):
    data, bad = _stream()
    cached, journaled, invalid, received, taken = _ingest(tmp_path, data, chunks=True)
    want = _ingest(tmp_path, data, chunks=False)
    assert taken > 0  # most reads went the one-pass way
    assert invalid == want[2] == bad
    assert received == want[3] == len(journaled)
    assert cached == want[0]
    assert journaled == want[1]  # the same points, in the same order
    # with a processor before the sink, reads are parsed as before
    assert _ingest(tmp_path, data, chunks=True, stage=True)[4] == 0
