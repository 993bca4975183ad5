"""RelaySink against real counting TCP servers on 127.0.0.1: delivery, framing,
replication, flow control, spooling, restart replay and shutdown."""

from __future__ import annotations

import pickle
import struct

import pytest
from twisted.internet import defer

from carbon.formats.plaintext import format_value
from tests.relay.countsink import CountingSink
from tests.relay.harness import run_reactor, sleep, wait_for
from tests.relay.relayutil import (Relay, expected_per_destination, feed, free_port, make_points,
                       relay_settings)


def _by_port(sinks):
    return {sink.port: sink for sink in sinks}


def _assert_exact(relay, sinks, points, line=False):
    """Each destination got exactly its points, once, in order."""
    expected = expected_per_destination(relay, points)
    by_port = _by_port(sinks)
    for dest, want in expected.items():
        if line:  # the line format writes %.10f values and integer timestamps
            want = [(m, float(int(t)), float(format_value(v))) for m, t, v in want]
        got = by_port[dest.port].points
        assert len(got) == len(want), (dest, len(got), len(want))
        assert got == want, dest


@pytest.mark.parametrize("protocol", ["pickle", "line"])
def test_delivery_and_wire_format(tmp_path, protocol):
    points = make_points(6000, names=300)
    points[5] = ("relay.test.float", points[5][1], 0.1 + 0.2)

    @defer.inlineCallbacks
    def body(reactor):
        sinks = [CountingSink(reactor, protocol, capture_raw=True) for _ in range(2)]
        ports = [s.listen() for s in sinks]
        relay = Relay(reactor, relay_settings(tmp_path, ports, DESTINATION_PROTOCOL=protocol,
                                              MAX_DATAPOINTS_PER_MESSAGE=100))
        relay.sink.start()
        yield feed(reactor, relay, points)
        yield wait_for(reactor, lambda: sum(len(s.points) for s in sinks) == len(points),
                       what="delivery")
        _assert_exact(relay, sinks, points, line=protocol == "line")
        assert all(s.points for s in sinks)
        assert relay.total("sent") == relay.total("attemptedRelays") == len(points)
        yield relay.sink.stop()
        for sink in sinks:
            yield sink.stop()
        return sinks

    sinks = run_reactor(body)
    raw = b"".join(sinks[0].raw)
    if protocol == "pickle":
        # Reference framing: 4-byte big-endian length + protocol-2 pickle of
        # [(metric, (timestamp, value)), ...], at most MAX_DATAPOINTS_PER_MESSAGE each.
        offset, messages = 0, 0
        while offset < len(raw):
            (length,) = struct.unpack("!L", raw[offset:offset + 4])
            body_bytes = raw[offset + 4:offset + 4 + length]
            assert body_bytes[:2] == b"\x80\x02"
            items = pickle.loads(body_bytes)
            assert 1 <= len(items) <= 100
            metric, (timestamp, value) = items[0]
            assert isinstance(metric, str) and isinstance(timestamp, float)
            offset += 4 + length
            messages += 1
        assert offset == len(raw) and messages >= len(sinks[0].points) // 100
    else:
        lines = raw.split(b"\r\n")
        assert lines[-1] == b""
        first = sinks[0].points[0]
        assert lines[0] == ("%s %s %d" % (first[0], ("%.10f" % first[2]).rstrip("0")
                                          .rstrip("."), first[1])).encode()
        assert all(line.count(b" ") == 2 for line in lines[:-1])
        if any(p[0] == "relay.test.float" for p in sinks[0].points):
            assert b"relay.test.float 0.3 " in raw


def test_replication_each_point_reaches_each_replica(tmp_path):
    points = make_points(9000, names=400)

    @defer.inlineCallbacks
    def body(reactor):
        sinks = [CountingSink(reactor) for _ in range(3)]
        ports = [s.listen() for s in sinks]
        relay = Relay(reactor, relay_settings(tmp_path, ports, REPLICATION_FACTOR=2))
        relay.sink.start()
        yield feed(reactor, relay, points)
        yield wait_for(reactor, lambda: sum(len(s.points) for s in sinks) == 2 * len(points),
                       what="two replicas of every point")
        _assert_exact(relay, sinks, points)
        for point in points[:200]:
            holders = [s for s in sinks if point in s.points]
            assert len(holders) == 2
        yield relay.sink.stop()
        for sink in sinks:
            yield sink.stop()

    run_reactor(body)


def test_flow_control_pauses_at_high_watermark_and_resumes(tmp_path):
    points = make_points(400_000, names=1000)

    @defer.inlineCallbacks
    def body(reactor):
        sink = CountingSink(reactor, rcvbuf=4096)
        sink.listen()
        relay = Relay(reactor, relay_settings(tmp_path, [sink.port], MAX_QUEUE_SIZE=2000),
                      spill_after=60)
        relay.sink.start()
        yield wait_for(reactor, lambda: sink.connections, what="connection")
        sink.set_stall(True)
        feeding = feed(reactor, relay, points, batch=1000)
        yield wait_for(reactor, lambda: relay.flow.paused, timeout=15, what="pause")
        client = next(iter(relay.sink.clients.values()))
        assert relay.flow.reasons == {"relay:127.0.0.1:%d:a" % sink.port}
        assert 2000 <= client.queued <= client.hard
        yield sleep(reactor, 0.3)
        assert relay.flow.paused and not feeding.called  # held while the sink is stalled
        assert relay.total("spooled") == 0
        sink.set_stall(False)
        yield feeding
        yield wait_for(reactor, lambda: len(sink.points) == len(points), timeout=20,
                       what="delivery")
        assert not relay.flow.paused and relay.flow.pause_count >= 1
        assert sink.points == points
        assert relay.total("dropped") == 0
        yield relay.sink.stop()
        yield sink.stop()

    run_reactor(body, timeout=60)


def test_stalled_destination_spills_to_spool_and_keeps_order(tmp_path):
    points = make_points(300_000, names=1000)

    @defer.inlineCallbacks
    def body(reactor):
        sink = CountingSink(reactor, rcvbuf=4096)
        sink.listen()
        relay = Relay(reactor, relay_settings(tmp_path, [sink.port], MAX_QUEUE_SIZE=2000,
                                              SPOOL_MAX_BYTES=2_000_000), spill_after=0.3)
        relay.sink.start()
        yield wait_for(reactor, lambda: sink.connections, what="connection")
        sink.set_stall(True)
        feeding = feed(reactor, relay, points, batch=1000)
        yield wait_for(reactor, lambda: relay.total("spooled") > 0, timeout=15, what="spill")
        client = next(iter(relay.sink.clients.values()))
        # Spooling lets receivers go on until the spool is nearly full; then, the
        # destination being alive, they are held paused rather than points dropped.
        yield wait_for(reactor, lambda: client.spool.nearly_full and relay.flow.paused,
                       timeout=15, what="back-pressure at the spool bound")
        yield sleep(reactor, 0.5)
        assert relay.flow.paused and not feeding.called
        assert relay.total("dropped") == 0 and client.spool.disk_bytes <= 2_000_000
        sink.set_stall(False)
        yield feeding
        yield wait_for(reactor, lambda: len(sink.points) == len(points), timeout=20,
                       what="replay")
        assert sink.points == points
        yield wait_for(reactor, relay.idle, what="empty spool")
        yield relay.sink.stop()
        yield sink.stop()

    run_reactor(body, timeout=60)


def test_down_destination_spools_then_replays_in_order(tmp_path):
    points = make_points(40_000)
    port = free_port()

    @defer.inlineCallbacks
    def body(reactor):
        relay = Relay(reactor, relay_settings(tmp_path, [port]))
        relay.sink.start()
        yield feed(reactor, relay, points[:25_000])
        assert not relay.flow.paused
        client = next(iter(relay.sink.clients.values()))
        assert client.spool.points > 20_000 and client.retries >= 1
        sink = CountingSink(reactor, port=port)
        sink.listen()
        yield feed(reactor, relay, points[25_000:])
        yield wait_for(reactor, lambda: len(sink.points) == len(points), timeout=10,
                       what="replay")
        assert sink.points == points  # spooled first, then what came after
        assert relay.total("replayed") >= 20_000
        yield relay.sink.stop()
        yield sink.stop()

    run_reactor(body)


def test_spool_survives_stop_and_start(tmp_path):
    points = make_points(30_000)
    port = free_port()

    @defer.inlineCallbacks
    def body(reactor):
        settings = relay_settings(tmp_path, [port])
        first = Relay(reactor, settings)
        first.sink.start()
        yield feed(reactor, first, points[:500])
        yield first.sink.stop()  # down destination: the short queue goes to the spool too
        assert first.sink.queued == 500
        late = Relay(reactor, settings)  # a second run, before the destination returns
        late.sink.start()
        yield feed(reactor, late, points[500:])
        yield late.sink.stop()
        spool_files = list((tmp_path / "relay-spool").rglob("*.spool"))
        assert spool_files and sum(f.stat().st_size for f in spool_files) > 0

        sink = CountingSink(reactor, port=port)
        sink.listen()
        again = Relay(reactor, settings)
        assert again.sink.queued == len(points)
        again.sink.start()
        yield wait_for(reactor, lambda: len(sink.points) == len(points), what="replay")
        assert sink.points == points
        yield wait_for(reactor, again.idle, what="empty spool")
        yield again.sink.stop()
        yield sink.stop()
        assert not list((tmp_path / "relay-spool").rglob("*.spool"))
        assert not list((tmp_path / "relay-spool").rglob("read.pos"))

    run_reactor(body)


def test_shutdown_flushes_queues_to_a_live_destination(tmp_path):
    points = make_points(50_000)

    @defer.inlineCallbacks
    def body(reactor):
        sink = CountingSink(reactor)
        sink.listen()
        relay = Relay(reactor, relay_settings(tmp_path, [sink.port], MAX_QUEUE_SIZE=100_000))
        relay.sink.start()
        yield wait_for(reactor, lambda: sink.connections, what="connection")
        relay.sink.put_many(points)
        started = reactor.seconds()
        yield relay.sink.stop()
        assert reactor.seconds() - started < 2  # flushed and closed, not timed out (5 s)
        assert relay.log.text().count("clientConnectionLost") == 1
        yield wait_for(reactor, lambda: len(sink.points) == len(points), what="flush")
        assert sink.points == points
        assert relay.total("spooled") == 0
        yield sink.stop()

    run_reactor(body)


def test_drops_only_past_the_spool_bound_counted_and_logged_once(tmp_path):
    points = make_points(60_000)
    port = free_port()

    @defer.inlineCallbacks
    def body(reactor):
        relay = Relay(reactor, relay_settings(tmp_path, [port], SPOOL_MAX_BYTES=200_000),
                      log_interval=0.2)
        relay.sink.start()
        yield feed(reactor, relay, points)
        client = next(iter(relay.sink.clients.values()))
        dropped = relay.total("fullQueueDrops")
        assert dropped > 0 and relay.total("dropped") == dropped
        assert client.spool.disk_bytes <= 200_000
        yield sleep(reactor, 0.5)
        drop_lines = [m for m in relay.log.text().splitlines() if "dropp" in m]
        assert len(drop_lines) == 2, drop_lines  # the first drop, then one summary
        assert "%d datapoints" % dropped in drop_lines[1]
        sink = CountingSink(reactor, port=port)
        sink.listen()
        yield wait_for(reactor, relay.idle, what="replay")
        yield wait_for(reactor, lambda: len(sink.points) + dropped == len(points),
                       what="every kept point delivered")
        assert sink.points == points[:len(sink.points)]  # the oldest were kept
        yield relay.sink.stop()
        yield sink.stop()

    run_reactor(body)


def test_unroutable_points_are_counted(tmp_path):
    rules = tmp_path / "relay-rules.conf"
    rules.write_text("[d]\ndefault = true\ndestinations = 127.0.0.1:1:z\n")

    @defer.inlineCallbacks
    def body(reactor):
        sink = CountingSink(reactor)
        sink.listen()
        settings = relay_settings(tmp_path, [sink.port], RELAY_METHOD="rules")
        settings["relay-rules"] = str(rules)
        relay = Relay(reactor, settings)
        assert "never used: 127.0.0.1:1:z" in relay.log.text()
        relay.sink.start()
        relay.sink.put_many(make_points(10))
        assert relay.stats.get("relayUnroutable") == 10
        yield relay.sink.stop()
        yield sink.stop()

    run_reactor(body)


def test_points_after_stop_go_to_the_spools_and_unroutable_ones_are_counted(tmp_path):
    @defer.inlineCallbacks
    def body(reactor):
        sink = CountingSink(reactor)
        sink.listen()
        rules = tmp_path / "relay-rules.conf"
        rules.write_text("[one]\npattern = ^relay\\.test\\.m1\n"
                         "destinations = 127.0.0.1:%d:a\n"
                         "[d]\ndefault = true\ndestinations = 127.0.0.1:1:z\n" % sink.port)
        settings = relay_settings(tmp_path, [sink.port], RELAY_METHOD="rules")
        settings["relay-rules"] = str(rules)
        relay = Relay(reactor, settings)
        relay.sink.start()
        yield relay.sink.stop()
        relay.sink.put_many(make_points(20, names=20))  # m1, m10..m19 match [one]
        client = next(iter(relay.sink.clients.values()))
        assert client.spool.points == 11 and not client.queue.queued
        assert relay.stats.get("relayUnroutable") == 9
        yield sink.stop()

    run_reactor(body)


def test_dynamic_router_moves_a_dead_destination_out_and_back(tmp_path):
    points = make_points(4000)
    dead = free_port()

    @defer.inlineCallbacks
    def body(reactor):
        live = CountingSink(reactor)
        live.listen()
        # A queue big enough that nothing is spooled before the removal (spooled points
        # wait for their own destination; only the memory queue is re-routed).
        relay = Relay(reactor, relay_settings(tmp_path, [live.port, dead], DYNAMIC_ROUTER=True,
                                              DYNAMIC_ROUTER_MAX_RETRIES=2,
                                              MAX_QUEUE_SIZE=100_000))
        relay.sink.start()
        dead_dest = next(d for d in relay.sink.clients if d.port == dead)
        relay.sink.put_many(points[:2000])  # half of these are for the dead destination
        yield wait_for(reactor, lambda: not relay.sink.router.has_destination(dead_dest),
                       what="removal from the router")
        assert "Removing client 127.0.0.1:%d:b to router" % dead in relay.log.text()
        relay.sink.put_many(points[2000:])
        yield wait_for(reactor, lambda: len(live.points) == len(points), what="re-routing")
        assert sorted(live.points) == sorted(points)  # everything went to the live one
        back = CountingSink(reactor, port=dead)
        back.listen()
        yield wait_for(reactor, lambda: relay.sink.router.has_destination(dead_dest),
                       what="destination back in the router")
        relay.sink.put_many(points)
        yield wait_for(reactor, lambda: len(live.points) + len(back.points) == 2 * len(points),
                       what="delivery after the return")
        assert back.points
        yield relay.sink.stop()
        for sink in (live, back):
            yield sink.stop()

    run_reactor(body)


def test_tag_relay_normalized_routes_by_normalized_name(tmp_path):
    @defer.inlineCallbacks
    def body(reactor):
        sinks = [CountingSink(reactor) for _ in range(3)]
        ports = [s.listen() for s in sinks]
        relay = Relay(reactor, relay_settings(tmp_path, ports, TAG_RELAY_NORMALIZED=True))
        relay.sink.start()
        names = ["cpu;host=h%d;dc=x" % i for i in range(50)]
        relay.sink.put_many([(name, 1.0, 2.0) for name in names] + [("plain.name", 1.0, 2.0)])
        yield wait_for(reactor, lambda: sum(len(s.points) for s in sinks) == 51, what="delivery")
        got = {p[0] for s in sinks for p in s.points}
        assert got == {"cpu;dc=x;host=h%d" % i for i in range(50)} | {"plain.name"}
        for sink in sinks:
            for name, _, _ in sink.points:
                assert relay.sink.router.get_destinations(name)[0].port == sink.port
        yield relay.sink.stop()
        for sink in sinks:
            yield sink.stop()

    run_reactor(body)


def test_configuration_errors(tmp_path):
    from carbon.config.errors import ConfigError

    def make(**overrides):
        return run_reactor(lambda reactor: Relay(reactor, relay_settings(
            tmp_path, [free_port()], **overrides)))

    with pytest.raises(ConfigError, match="DESTINATION_PROTOCOL must be one of"):
        make(DESTINATION_PROTOCOL="protobuf3")
    with pytest.raises(ConfigError, match="DESTINATIONS is empty"):
        make(DESTINATIONS=[])
    with pytest.raises(ConfigError, match="Invalid destination"):
        make(DESTINATIONS=["nope"])
    with pytest.raises(ConfigError, match="DESTINATION_TRANSPORT"):
        make(DESTINATION_TRANSPORT="quic")
    with pytest.raises(ConfigError, match="STORAGE_DIR"):
        make(STORAGE_DIR="")
    try:
        import OpenSSL  # noqa: F401
    except ImportError:
        with pytest.raises(ConfigError, match="no Python OpenSSL"):
            make(DESTINATION_TRANSPORT="ssl")
