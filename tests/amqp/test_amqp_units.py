"""Broker-free checks: message parsing, publisher grouping, frame assembly, heartbeats."""

from __future__ import annotations

import struct

from hypothesis import given, settings, strategies as st
from twisted.internet import task
from twisted.internet.testing import StringTransport

from carbon.receivers import amqp_codec as codec, amqp_wire as wire
from carbon.receivers.amqp import bind_patterns, message_batch
from carbon.relay.amqp_publisher import messages_from_lines


def test_routing_key_batch_keeps_good_lines_and_returns_bad_ones():
    batch, bad = message_batch(b"a.b", b"1 100\n\nx 100\n2.5 160\r\n1 2 3\ninf 5\n", False)
    assert batch == [("a.b", 100.0, 1.0), ("a.b", 160.0, 2.5)]
    assert bad == [b"a.b x 100", b"a.b 1 2 3", b"a.b inf 5"]


def test_routing_key_with_spaces_or_empty_makes_every_line_bad():
    for key in (b"a b", b"", b" "):
        batch, bad = message_batch(key, b"1 100\n2 200\n", False)
        assert batch == [] and len(bad) == 2


def test_name_in_body_batch():
    batch, bad = message_batch(b"ignored", b"m.x 1 100\nbogus\nm.y 2 -1\n", True)
    assert [p[0] for p in batch] == ["m.x", "m.y"] and batch[0] == ("m.x", 100.0, 1.0)
    assert bad == [b"bogus"]


def test_bind_patterns_from_list_or_text():
    class S:
        BIND_PATTERNS = "a.#, b.*,,"

    assert bind_patterns(S) == ["a.#", "b.*"]
    S.BIND_PATTERNS = ["#"]
    assert bind_patterns(S) == ["#"]


def test_publisher_groups_stdin_lines_by_routing_key():
    lines = ["a.x 1 100\n", "b.y 2 100\n", "a.x junk\n", "\n"]
    assert messages_from_lines(lines) == [("a.x", b"1 100\njunk\n"), ("b.y", b"2 100\n")]
    assert messages_from_lines(lines, name_in_body=True, routing_key="k") == [
        ("k", b"a.x 1 100\nb.y 2 100\na.x junk\n")]


class Recorder(wire.AMQPClient):
    def __init__(self, clock):
        super().__init__("guest", "guest", clock=clock)
        self.messages = []
        self.paused = False

    def message_received(self, routing_key, body, delivery_tag):
        self.messages.append((routing_key, body, delivery_tag))

    def reading_paused(self):
        return self.paused


def connected(heartbeat: int = 0):
    clock = task.Clock()
    client = Recorder(clock)
    transport = StringTransport()
    client.makeConnection(transport)
    assert transport.value() == codec.PROTOCOL_HEADER
    tune = struct.pack("!HIH", 0, 4096, heartbeat)
    client.dataReceived(codec.method_frame(0, codec.CONNECTION_TUNE, tune))
    return client, transport, clock


def deliveries(messages: list[tuple[bytes, bytes]], frame_max: int) -> bytes:
    out = []
    for tag, (key, body) in enumerate(messages, 1):
        args = (codec.shortstr("ctag") + struct.pack("!Q", tag) + codec.bits(False)
                + codec.shortstr("ex") + codec.shortstr(key))
        out.append(codec.method_frame(1, codec.BASIC_DELIVER, args))
        out.append(codec.content_frames(1, body, frame_max, persistent=False))
    return b"".join(out)


@settings(max_examples=50, deadline=None)
@given(bodies=st.lists(st.binary(max_size=10000), min_size=1, max_size=5),
       cuts=st.lists(st.integers(min_value=1, max_value=5000), max_size=20))
def test_deliveries_survive_any_read_boundaries(bodies, cuts):
    client, _, _ = connected()
    messages = [(b"m.%d" % i, body) for i, body in enumerate(bodies)]
    data = deliveries(messages, client.frame_max)
    offset = 0
    for size in cuts:
        client.dataReceived(data[offset:offset + size])
        offset += size
    client.dataReceived(data[offset:])
    assert client.messages == [(k, b, i) for i, (k, b) in enumerate(messages, 1)]
    assert not client.dead


def test_tune_negotiates_frame_max_and_opens_the_vhost():
    client, transport, _ = connected()
    sent = transport.value()[len(codec.PROTOCOL_HEADER):]
    assert client.frame_max == 4096
    assert codec.method_frame(0, codec.CONNECTION_OPEN, codec.shortstr("/") + codec.shortstr("")
                             + codec.bits(False)) in sent


def test_heartbeat_timeout_aborts_unless_reads_are_paused():
    client, transport, clock = connected(heartbeat=2)
    client.paused = True
    clock.advance(10)
    assert not client.dead and codec.frame(codec.FRAME_HEARTBEAT, 0, b"") in transport.value()
    client.paused = False
    clock.advance(1)
    assert client.dead and "heartbeat" in str(client.error)


def test_broker_close_fails_ready_with_its_reason():
    client, transport, _ = connected()
    errors = []
    client.ready.addErrback(errors.append)
    close = struct.pack("!H", 403) + codec.shortstr("ACCESS_REFUSED") + struct.pack("!HH", 0, 0)
    client.dataReceived(codec.method_frame(0, codec.CONNECTION_CLOSE, close))
    assert codec.method_frame(0, codec.CONNECTION_CLOSE_OK) in transport.value()
    client.connectionLost(None)
    assert "403 ACCESS_REFUSED" in errors[0].getErrorMessage()


def test_oversized_frame_is_a_protocol_error():
    client, _, _ = connected()
    client.dataReceived(struct.pack("!BHI", 1, 1, 10 ** 8))
    assert client.dead and "frame-max" in str(client.error)


def test_publisher_confirms_settle_in_any_order_and_count_nacks():
    client, transport, _ = connected()
    for i in range(5):
        assert client.basic_publish("ex", "m.%d" % i, b"1 2\n") == i + 1
    results = []
    client.wait_confirms().addCallback(results.append)

    def confirm(method, tag, multiple):
        args = struct.pack("!Q", tag) + codec.bits(multiple)
        client.dataReceived(codec.method_frame(1, method, args))

    confirm(codec.BASIC_ACK, 2, True)
    confirm(codec.BASIC_ACK, 4, False)
    confirm(codec.BASIC_NACK, 3, False)
    assert results == []  # 5 is still unconfirmed
    confirm(codec.BASIC_ACK, 5, True)
    assert results == [1]
    body = codec.content_frames(1, b"1 2\n", client.frame_max, persistent=True)
    assert body in transport.value()
