"""Wire encoders and the on-disk spool."""

from __future__ import annotations

import pickle
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from twisted.internet import defer

from carbon.relay.destinations import parse_destination
from carbon.relay.client_set import spool_directory
from carbon.relay.spool import Spool
from carbon.formats.pickled import decode_pickle_stream, encode_pickle, frame
from carbon.formats.plaintext import decode_line_stream, encode_line, format_value
from carbon.relay.wire import encoder_for
from tests.relay.countsink import CountingSink
from tests.relay.harness import run_reactor, wait_for
from tests.relay.relayutil import Relay, make_points, relay_settings


def test_pickle_framing_matches_reference():
    points = [("a.b", 1.0, 2.5), ("c", 3.0, -1.0), ("d", 4.0, 0.0)]
    payload, messages, count = encode_pickle(points, 2)
    assert (messages, count) == (2, 3)
    (length,) = struct.unpack("!L", payload[:4])
    first = payload[4:4 + length]
    assert first == pickle.dumps([("a.b", (1.0, 2.5)), ("c", (3.0, -1.0))], protocol=2)
    decoded, tail, bad = decode_pickle_stream(payload + payload[:5])
    assert decoded == points and tail == payload[:5] and bad == 0


def test_line_format_matches_reference():
    assert format_value(1.0) == "1" and format_value(0.5) == "0.5"
    assert format_value(-0.0) == "-0" and format_value(1e-11) == "0"
    assert format_value(123456.7890123456) == "123456.7890123456"
    payload, messages, count = encode_line([("a.b", 1600000000.9, 2.25), ("c", 5.0, 3.0)])
    assert payload == b"a.b 2.25 1600000000\r\nc 3 5\r\n" and count == 2
    payload, _, count = encode_line([("bad", float("nan"), 1.0), ("ok", 1.0, 1.0)])
    assert payload == b"ok 1 1\r\n" and count == 1
    decoded, tail, bad = decode_line_stream(b"x 1 2\r\ny 3")
    assert decoded == [("x", 2.0, 1.0)] and tail == b"y 3" and bad == 0
    with pytest.raises(ValueError, match="DESTINATION_PROTOCOL must be one of"):
        encoder_for("protobuf2")


def pickle_frame(items: list) -> bytes:
    return frame(pickle.dumps(items, 2))


def test_decoders_keep_only_finite_points_and_count_the_rest():
    stream = b"a nan 2\nb 1 inf\nc -inf 3\nd 1 2 3\n\xff 1 2\ne 5 6\n"
    decoded, tail, bad = decode_line_stream(stream + b"f 7")
    assert decoded == [("e", 6.0, 5.0)] and tail == b"f 7" and bad == 5
    bad_points = [("a", (1.0, float("nan"))), ("b", (float("inf"), 1.0)), ("", (1.0, 2.0)),
                  ("c", ("x", 1.0)), ("d", (3.0, 4.0))]
    payload, _, _ = encode_pickle([("e", 6.0, 5.0)])
    items_payload = pickle_frame(bad_points)
    decoded, tail, bad = decode_pickle_stream(items_payload + b"\0\0\0\2xx" + payload)
    assert decoded == [("d", 3.0, 4.0), ("e", 6.0, 5.0)] and tail == b"" and bad == 5


def _record(points):
    payload, _, count = encode_pickle(points, 500)
    return payload, count


def _drain(spool):
    out = []
    while True:
        records = spool.read(10_000)
        if not records:
            return out
        for payload, count, protocol in records:
            assert protocol == "pickle"
            decoded = decode_pickle_stream(payload)[0]
            assert len(decoded) == count
            out.extend(decoded)


def test_spool_order_rotation_and_cleanup(tmp_path):
    spool = Spool(str(tmp_path), 10_000_000, "pickle", segment_bytes=4096)
    points = make_points(5000)
    for i in range(0, 5000, 250):
        assert spool.append(*_record(points[i:i + 250]))
    assert spool.points == 5000 and len(list(tmp_path.glob("*.spool"))) > 3
    assert _drain(spool) == points
    assert spool.points == 0 and spool.disk_bytes == 0
    assert not list(tmp_path.glob("*.spool"))
    spool.append(*_record(points[:10]))  # usable again after draining
    assert _drain(spool) == points[:10]
    spool.close()


def test_spool_bound(tmp_path):
    spool = Spool(str(tmp_path), 20_000, "pickle")
    points = make_points(5000)
    accepted = 0
    for i in range(0, 5000, 100):
        if spool.append(*_record(points[i:i + 100])):
            accepted += 100
    assert 0 < accepted < 5000 and spool.points == accepted
    assert spool.disk_bytes <= 20_000
    assert sum(f.stat().st_size for f in tmp_path.glob("*.spool")) == spool.disk_bytes
    assert _drain(spool) == points[:accepted]


@settings(max_examples=25, deadline=None)
@given(chunks=st.lists(st.integers(1, 300), min_size=1, max_size=12),
       read_sizes=st.lists(st.integers(1, 20_000), min_size=1, max_size=4),
       segment=st.sampled_from([4096, 16384, 1 << 20]))
def test_spool_resumes_where_it_stopped(tmp_path_factory, chunks, read_sizes, segment):
    directory = tmp_path_factory.mktemp("spool")
    points = make_points(sum(chunks))
    spool = Spool(str(directory), 1 << 30, "pickle", segment_bytes=segment)
    offset = 0
    for size in chunks:
        spool.append(*_record(points[offset:offset + size]))
        offset += size
    consumed = []
    for size in read_sizes:  # read part, then stop (close) and reopen
        for payload, _, _ in spool.read(size):
            consumed.extend(decode_pickle_stream(payload)[0])
        spool.close()
        spool = Spool(str(directory), 1 << 30, "pickle", segment_bytes=segment)
        assert spool.points == len(points) - len(consumed)
    assert consumed + _drain(spool) == points  # no loss, no duplicates
    spool.close()


def test_torn_record_is_cut_off(tmp_path):
    spool = Spool(str(tmp_path), 1 << 20, "pickle")
    points = make_points(300)
    spool.append(*_record(points[:200]))
    spool.append(*_record(points[200:]))
    spool.close()
    segment = next(tmp_path.glob("*.spool"))
    segment.write_bytes(segment.read_bytes()[:-7])  # a crash in the middle of a write
    reopened = Spool(str(tmp_path), 1 << 20, "pickle")
    assert reopened.points == 200
    assert _drain(reopened) == points[:200]
    (tmp_path / "0000000099.spool").write_bytes(b"garbage")
    assert Spool(str(tmp_path), 1 << 20, "pickle").points == 0  # not a segment: ignored


def test_spool_written_as_line_is_replayed_as_pickle(tmp_path):
    points = make_points(2000)

    @defer.inlineCallbacks
    def body(reactor):
        sink = CountingSink(reactor)
        sink.listen()
        settings = relay_settings(tmp_path, [sink.port])
        dest = parse_destination(settings.DESTINATIONS[0])
        old = Spool("%s/%s" % (spool_directory(settings), dest.stat_name), 1 << 20, "line")
        payload, _, count = encode_line(points)
        old.append(payload, count)
        old.close()
        relay = Relay(reactor, settings)
        relay.sink.start()
        yield wait_for(reactor, lambda: len(sink.points) == len(points), what="replay")
        assert sink.points == points
        yield relay.sink.stop()
        yield sink.stop()

    run_reactor(body)


def test_failed_write_leaves_a_readable_spool(tmp_path):
    spool = Spool(str(tmp_path), 1 << 20, "pickle")
    points = make_points(300)
    spool.append(*_record(points[:100]))

    class FailingWriter:
        def __init__(self, real):
            self.real = real

        def write(self, data):
            self.real.write(data[:3])  # a torn record, then the disk is full
            raise OSError(28, "No space left on device")

        def flush(self):
            self.real.flush()

        def close(self):
            self.real.close()

    spool._writer = FailingWriter(spool._writer)
    with pytest.raises(OSError):
        spool.append(*_record(points[100:200]))
    assert spool.append(*_record(points[200:]))  # a new segment
    assert spool.points == 200
    assert _drain(spool) == points[:100] + points[200:]
