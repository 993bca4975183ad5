"""Lines in over a real TCP receiver, out to real line destinations: the lean path and
the tuple path together deliver exactly what the reference's parse-and-encode would,
in order, with bad lines counted."""

from __future__ import annotations

import random
import socket
import threading

import pytest
from twisted.internet import defer

from carbon.instrumentation.stats import Stats
from carbon.logs import MemoryLog
from carbon.pipeline import Pipeline
from carbon.receivers.context import ReceiverConfig, ReceiverContext
from carbon.flow import FlowControl
from carbon.formats.plaintext import parse_lines
from carbon.receivers.protocols import LineReceiver, ReceiverFactory
from carbon.relay.chunks import ChunkStage
from carbon.relay.connection import WRITE_BYTES
from carbon.daemon.relay import READ_BYTES
from carbon.relay.sink import RelaySink
from carbon.formats.plaintext import encode_line
from tests.relay.countsink import CountingSink
from tests.relay.harness import run_reactor, wait_for
from tests.relay.relayutil import relay_settings


def _stream(seed: int = 7) -> tuple[bytes, int]:
    """Mostly canonical lines; some valid ones needing re-encoding; some bad ones."""
    rnd = random.Random(seed)
    out, bad = [], 0
    for i in range(60_000):
        name = "recv.m%d" % (i % 3000)
        if 20_000 <= i < 20_300:  # a stretch of valid but non-canonical lines
            out.append(b"%s  %s\t%d.0\r\n" % (name.encode(), b"1.50", 1_600_000_000 + i))
        elif 30_000 <= i < 36_000:  # full-precision values
            out.append(b"%s %r %d\n" % (name.encode(), rnd.random() * 1000, 1_600_000_000 + i))
        elif i % 9973 == 0:
            out.append(b"%s not-a-number %d\n" % (name.encode(), i))
            bad += 1
        else:
            value = rnd.choice(["%d" % i, "%.3f" % (i / 7), "-0.5"])
            value = ("%.10f" % float(value)).rstrip("0").rstrip(".")
            out.append(b"%s %s %d\n" % (name.encode(), value.encode(), 1_600_000_000 + i))
    return b"".join(out), bad


def _expected(data: bytes, sink: RelaySink) -> dict:
    """Per destination port: the points the tuple path would send, in order."""
    points, _ = parse_lines(data.split(b"\n")[:-1])
    per: dict = {client.destination.port: [] for client in sink.client_list}
    for point in points:
        for dest in sink.router.get_destinations(point[0]):
            per[dest.port].append(point)
    return per


@pytest.mark.parametrize("protocol,stage,read_size", [
    ("line", False, 0), ("pickle", False, 0), ("line", True, 0), ("pickle", True, 0),
    ("line", True, READ_BYTES)])
def test_lean_and_tuple_paths_deliver_exactly_the_reference_output(tmp_path, protocol, stage,
                                                                   read_size):
    """With ``stage`` reads go to the whole-read C path first (as in the daemon, which
    reads ``READ_BYTES`` at a time: one sendall, so reads may hold 256 KiB)."""
    data, bad = _stream()
    calls = {"lines": 0, "tuples": 0, "chunks": 0}

    @defer.inlineCallbacks
    def body(reactor):
        sinks = [CountingSink(reactor, protocol, capture_raw=True) for _ in range(3)]
        ports = [s.listen() for s in sinks]
        settings = relay_settings(tmp_path, ports, DESTINATION_PROTOCOL=protocol,
                                  REPLICATION_FACTOR=2)
        stats, flow = Stats(), FlowControl()
        sink = RelaySink.from_settings(settings, flow, stats, reactor, log=MemoryLog())
        for name, key in (("put_lines", "lines"), ("put_many", "tuples"),
                          ("put_chunk", "chunks")):
            original = getattr(sink, name)

            def spy(*args, original=original, key=key):
                calls[key] += 1
                return original(*args)
            setattr(sink, name, spy)
        pipeline = Pipeline([ChunkStage(sink)] if stage else [], sink)
        context = ReceiverContext(ReceiverConfig.from_settings(settings), pipeline, stats, flow,
                                  MemoryLog())
        context.read_size = read_size
        opened = context.connection_opened
        read_sizes = []

        def spy_opened(protocol):
            read_sizes.append(protocol.transport.bufferSize)
            opened(protocol)
        context.connection_opened = spy_opened
        listener = reactor.listenTCP(0, ReceiverFactory(LineReceiver, context),
                                     interface="127.0.0.1")
        sink.start()

        def send() -> None:
            with socket.create_connection(("127.0.0.1", listener.getHost().port)) as sock:
                step = len(data) if read_size else 50_000
                for start in range(0, len(data), step):  # reads split lines anywhere
                    sock.sendall(data[start:start + step])
        sender = threading.Thread(target=send)
        sender.start()
        expected = _expected(data, sink)
        total = sum(len(points) for points in expected.values())
        yield wait_for(reactor, lambda: sum(len(s.points) for s in sinks) == total,
                       timeout=20, what="delivery")
        sender.join(5)
        for s in sinks:
            if protocol == "line":  # byte for byte what the reference would write
                assert b"".join(s.raw) == encode_line(expected[s.port])[0]
            else:
                assert s.points == expected[s.port]
        assert stats.get("invalidLines") == bad
        assert read_sizes == [read_size or 65536]
        assert {c.protocol.transport.SEND_LIMIT for c in sink.client_list} == {WRITE_BYTES}
        assert calls["tuples"] > 0  # reads with a bad line are parsed
        if stage:
            assert calls["chunks"] > 0 and sink.chunks.known > 0
        else:
            assert calls["lines"] > 0 and not calls["chunks"]
        yield listener.stopListening()
        for conn in list(context.connections):
            conn.transport.loseConnection()
        yield sink.stop()
        for s in sinks:
            yield s.stop()

    run_reactor(body, timeout=60)
