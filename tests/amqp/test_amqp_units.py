"""Broker-free checks: message parsing, our spec's frames, and each txAMQP gap we fill.

The client runs on a StringTransport and a task.Clock; broker frames are encoded by
txAMQP itself from our spec, so both directions go through txAMQP's codec.
"""

from __future__ import annotations

import struct
from io import BytesIO

import pytest
from hypothesis import given, settings, strategies as st
from twisted.internet import task
from twisted.internet.testing import StringTransport
from txamqp.codec import Codec
from txamqp.connection import Body, Frame, Header, Method

from carbon.amqp.client import PROTOCOL_HEADER, AMQPConnection
from carbon.amqp.fields import AMQPError, table
from carbon.amqp.spec import load_spec
from carbon.config.settings import Settings
from carbon.instrumentation.stats import Stats
from carbon.logs import MemoryLog
from carbon.pipeline import Pipeline, Sink
from carbon.receivers.amqp import (RETRY_DELAY, AMQPConfig, AMQPListenerFactory,
                                   bind_patterns, message_batch)
from carbon.receivers.context import ReceiverConfig, ReceiverContext
from carbon.flow import FlowControl
from carbon.relay.amqp_publisher import messages_from_lines

SPEC = load_spec()


def method(klass: str, name: str):
    return SPEC.classes.byname[klass].methods.byname[name]


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
    assert bind_patterns(Settings(BIND_PATTERNS="a.#, b.*,,")) == ["a.#", "b.*"]
    assert bind_patterns(Settings(BIND_PATTERNS=["#"])) == ["#"]


def test_publisher_groups_stdin_lines_by_routing_key():
    lines = ["a.x 1 100\n", "b.y 2 100\n", "a.x junk\n", "\n"]
    assert messages_from_lines(lines) == [("a.x", b"1 100\njunk\n"), ("b.y", b"2 100\n")]
    assert messages_from_lines(lines, name_in_body=True, routing_key="k") == [
        ("k", b"a.x 1 100\nb.y 2 100\na.x junk\n")]


# -- a client on a string transport ---------------------------------------------
class Recorder(AMQPConnection):
    def __init__(self, clock, heartbeat=60):
        super().__init__(SPEC, "guest", "güest", "/", heartbeat=heartbeat, clock=clock)
        self.messages = []
        self.blocks = []

    def message_received(self, routing_key, body, delivery_tag):
        self.messages.append((routing_key, body, delivery_tag))

    def blocked(self, reason):
        self.blocks.append(reason)


def pack(client, channel: int, klass: str, name: str, *args) -> bytes:
    return client._pack_frame(Frame(channel, Method(method(klass, name), *args)))


def content(client, channel: int, body: bytes, **properties) -> bytes:
    """Header and body frames of one message, split at the client's frame-max."""
    out = [client._pack_frame(Frame(channel, Header(SPEC.classes.byname["basic"], 0,
                                                    len(body), **properties)))]
    step = client.MAX_LENGTH - 8
    out += [client._pack_frame(Frame(channel, Body(body[i:i + step])))
            for i in range(0, len(body), step)]
    return b"".join(out)


def sent(client, transport) -> list:
    """The frames the client wrote, decoded by txAMQP (protocol header skipped)."""
    data = transport.value()
    if data.startswith(PROTOCOL_HEADER):
        data = data[len(PROTOCOL_HEADER):]
    frames = []
    while data:
        size = struct.unpack_from("!I", data, 3)[0]
        frames.append(client._unpack_frame(data[:size + 8]))
        data = data[size + 8:]
    return frames


def methods(client, transport) -> list:
    return [(f.payload.method.klass.name + "." + f.payload.method.name, f.payload.args)
            for f in sent(client, transport) if isinstance(f.payload, Method)]


def connected(frame_max: int = 4096, heartbeat: int = 0):
    clock = task.Clock()
    client = Recorder(clock)
    transport = StringTransport()
    client.makeConnection(transport)
    assert transport.value() == PROTOCOL_HEADER  # 0-9-1, not txAMQP's 0-9 header
    client.dataReceived(pack(client, 0, "connection", "start", 0, 9, b"", b"PLAIN", b"en_US")
                        + pack(client, 0, "connection", "tune", 2047, frame_max, heartbeat)
                        + pack(client, 0, "connection", "open-ok", b"")
                        + pack(client, 1, "channel", "open-ok", b""))
    assert client.channel1 is not None and client.ready.called
    return client, transport, clock


def test_spec_frames_have_the_0_9_1_layout():
    client, transport, _ = connected()
    transport.clear()
    client.publish("ex", "m.x", b"1 2\n")
    expected = (struct.pack("!BHI", 1, 1, 14) + struct.pack("!HHH", 60, 40, 0) + b"\x02ex"
                + b"\x03m.x" + b"\x00\xce"
                + struct.pack("!BHI", 2, 1, 15) + struct.pack("!HHQH", 60, 0, 4, 0x1000)
                + b"\x02\xce" + struct.pack("!BHI", 3, 1, 4) + b"1 2\n\xce")
    assert transport.value() == expected
    declare = pack(client, 1, "queue", "declare", 0, b"q", False, True, True, True, False, b"")
    assert declare == (struct.pack("!BHI", 1, 1, 13) + struct.pack("!HHH", 50, 10, 0) + b"\x01q"
                       + bytes([0b1110]) + struct.pack("!I", 0) + b"\xce")


def test_login_sends_utf8_lengths_and_capability_table():
    client, transport, _ = connected()
    (name, args), = [m for m in methods(client, transport) if m[0] == "connection.start-ok"]
    properties, mechanism, response, _locale = args
    assert mechanism == "PLAIN" and response == "\0guest\0güest"  # txAMQP decodes text
    for capability in (b"connection.blocked", b"publisher_confirms",
                       b"authentication_failure_close", b"consumer_cancel_notify"):
        assert bytes([len(capability)]) + capability + b"t\x01" in properties.encode()


def test_txamqp_counts_characters_so_names_go_out_as_bytes():
    buffer = BytesIO()
    Codec(buffer).encode_shortstr("m.é")
    assert buffer.getvalue() == b"\x03m.\xc3\xa9"  # the gap: 3 characters, 4 bytes
    client, transport, _ = connected()
    transport.clear()
    client.publish("ex", "métrique.é", b"1 2\n")
    frame = client._unpack_frame(transport.value()[:transport.value().index(b"\xce") + 1])
    assert frame.payload.args[2] == "métrique.é"
    with pytest.raises(AMQPError, match="255 bytes"):
        client.publish("ex", "é" * 128, b"")


def test_field_tables_beyond_txamqps_types():
    encoded = table({"n": -2 ** 40, "on": True, "f": 0.5, "list": [1, "a"], "none": None,
                     "nested": {"b": b"x"}})
    assert encoded == (b"\x01nl" + struct.pack("!q", -2 ** 40) + b"\x02ont\x01"
                       + b"\x01fd" + struct.pack("!d", 0.5)
                       + b"\x04listA" + struct.pack("!I", 15) + b"l" + struct.pack("!q", 1)
                       + b"S\x00\x00\x00\x01a" + b"\x04noneV"
                       + b"\x06nestedF" + struct.pack("!I", 8) + b"\x01bS\x00\x00\x00\x01x")
    with pytest.raises(ValueError):  # the gap: txAMQP's own decoder stops at 'l'
        Codec(BytesIO(struct.pack("!I", len(encoded)) + encoded)).decode_table()
    client, _, _ = connected()
    client.dataReceived(pack(client, 1, "basic", "deliver", b"ctag", 1, False, b"ex", b"m")
                        + content(client, 1, b"1 2\n", headers=encoded))
    assert client.messages == [(b"m", b"1 2\n", 1)] and not client.closed


@settings(max_examples=50, deadline=None)
@given(bodies=st.lists(st.one_of(st.binary(max_size=10000), st.text(max_size=3000).map(
    lambda t: t.encode())), min_size=1, max_size=5),
    cuts=st.lists(st.integers(min_value=1, max_value=5000), max_size=20))
def test_deliveries_survive_any_read_boundaries(bodies, cuts):
    client, transport, _ = connected()
    messages = [("m.%d.é" % i, body) for i, body in enumerate(bodies)]
    data = b"".join(
        pack(client, 1, "basic", "deliver", b"ctag", tag, False, b"ex", key.encode())
        + content(client, 1, body) for tag, (key, body) in enumerate(messages, 1))
    offset = 0
    for size in cuts:
        client.dataReceived(data[offset:offset + size])
        offset += size
    client.dataReceived(data[offset:])
    assert client.messages == [(k.encode(), b, i) for i, (k, b) in enumerate(messages, 1)]
    assert not transport.disconnecting


def test_methods_txamqps_delegate_has_no_handler_for():
    client, transport, _ = connected()
    client.dataReceived(pack(client, 0, "connection", "blocked", b"low on memory")
                        + pack(client, 0, "connection", "unblocked"))
    assert client.blocks == ["low on memory", None]
    for i in range(5):
        assert client.publish("ex", "m.%d" % i, b"1 2\n") == i + 1
    results = []
    client.wait_confirms().addCallback(results.append)
    client.dataReceived(pack(client, 1, "basic", "ack", 2, True)
                        + pack(client, 1, "basic", "ack", 4, False)
                        + pack(client, 1, "basic", "nack", 3, False, False))
    assert results == []  # 5 is still unconfirmed
    client.dataReceived(pack(client, 1, "basic", "ack", 5, True))
    assert results == [1]
    assert not client.closed and not transport.disconnecting
    client.dataReceived(pack(client, 1, "basic", "cancel", b"ctag", True))
    assert transport.disconnecting and "cancelled consumer ctag" in str(client.error)


def test_tune_takes_the_brokers_limits():
    client, transport, _ = connected(frame_max=0, heartbeat=10)
    assert client.MAX_LENGTH == 131072 and client.heartbeatInterval == 10
    assert ("connection.tune-ok", (2047, 131072, 10)) in methods(client, transport)
    client, transport, _ = connected(frame_max=4096, heartbeat=0)
    assert client.MAX_LENGTH == 4096 and client.heartbeatInterval == 60
    assert ("connection.tune-ok", (2047, 4096, 60)) in methods(client, transport)


def test_heartbeat_timeout_aborts_unless_reads_are_paused():
    client, transport, clock = connected(heartbeat=2)
    client.reads_paused = True
    clock.advance(30)
    assert not transport.disconnecting
    assert any(f.payload.type == Frame.HEARTBEAT for f in sent(client, transport))
    client.reads_paused = False
    clock.advance(7)
    assert transport.disconnecting and "heartbeat" in str(client.error)


def test_broker_close_fails_ready_with_its_reason():
    client = Recorder(task.Clock())
    transport = StringTransport()
    client.makeConnection(transport)
    errors = []
    client.ready.addErrback(errors.append)
    client.dataReceived(pack(client, 0, "connection", "start", 0, 9, b"", b"PLAIN", b"en_US")
                        + pack(client, 0, "connection", "close", 403, b"ACCESS_REFUSED", 0, 0))
    assert "connection.close-ok" in [m[0] for m in methods(client, transport)]
    assert "403 ACCESS_REFUSED" in errors[0].getErrorMessage()


class FailingSink(Sink):
    """Raises for a batch that holds ``bad``; keeps everything else."""

    def __init__(self, bad: str) -> None:
        self.bad = bad
        self.points = []

    def put_many(self, batch):
        if any(metric == self.bad for metric, _, _ in batch):
            raise OSError("disk full")
        self.points += batch


def test_failed_batch_is_not_acknowledged_but_handed_back():
    clock, log, sink = task.Clock(), MemoryLog(), FailingSink("m.bad")
    context = ReceiverContext(ReceiverConfig.from_settings(Settings()), Pipeline([], sink),
                              Stats(), FlowControl(), log)
    client = AMQPListenerFactory(clock, context,
                                 AMQPConfig.from_settings(Settings())).buildProtocol(None)
    transport = StringTransport()
    client.makeConnection(transport)
    client.dataReceived(pack(client, 0, "connection", "start", 0, 9, b"", b"PLAIN", b"en_US")
                        + pack(client, 0, "connection", "tune", 2047, 4096, 0)
                        + pack(client, 0, "connection", "open-ok", b"")
                        + pack(client, 1, "channel", "open-ok", b""))
    transport.clear()

    def deliver(*keys: str, first: int) -> None:
        client.dataReceived(b"".join(
            pack(client, 1, "basic", "deliver", b"ctag", tag, False, b"ex", key.encode())
            + content(client, 1, b"1 100\n") for tag, key in enumerate(keys, first)))

    def answers() -> list:
        found = [m for m in methods(client, transport) if m[0] in ("basic.ack", "basic.reject")]
        transport.clear()
        return found

    deliver("m.a", "m.bad", "m.c", "m.d", first=1)
    assert answers() == [("basic.ack", (1, True)), ("basic.ack", (3, False)),
                         ("basic.ack", (4, False))]
    clock.advance(RETRY_DELAY)
    assert answers() == [("basic.reject", (2, True))]
    deliver("m.e", first=5)
    assert answers() == [("basic.ack", (5, True))]
    assert [p[0] for p in sink.points] == ["m.a", "m.c", "m.d", "m.e"]
    assert context.stats.get("metricsReceived") == 4
    assert "batches failed in the pipeline: 1 datapoints" in log.text()
