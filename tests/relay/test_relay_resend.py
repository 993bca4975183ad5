"""The resend window's bounds, and a destination that resets its connection: what was
written last is sent again on the next connection (counted as resent), none lost."""

from __future__ import annotations

from twisted.internet import defer

from carbon.relay.resend import ResendWindow
from tests.relay.countsink import CountingSink
from tests.relay.harness import run_reactor, wait_for
from tests.relay.relayutil import Relay, feed, make_points, relay_settings


def test_window_keeps_the_newest_bytes_and_seconds():
    window = ResendWindow(max_bytes=100, max_seconds=10)
    for n in range(5):
        window.add(b"x" * 40, 4, now=float(n))
    assert window.bytes == 80 and window.points == 8  # the two newest fit in 100 bytes
    window.add(b"y" * 500, 50, now=5.0)  # the newest is kept even alone over the bound
    assert len(window) == 1 and window.bytes == 500
    window.add(b"z" * 10, 1, now=14.0)
    window.expire(15.5)  # written at 5.0: older than 10 s
    records, span = window.take(16.0)
    assert records == [(b"z" * 10, 1)] and span == 2.0
    assert window.take(16.0) == ([], 0.0) and window.bytes == 0
    off = ResendWindow(max_bytes=0, max_seconds=10)
    off.add(b"x", 1, now=0.0)
    assert len(off) == 0


def test_reset_connection_resends_the_window(tmp_path):
    points = make_points(20000, names=100)

    @defer.inlineCallbacks
    def body(reactor):
        sink = CountingSink(reactor, "pickle")
        port = sink.listen()
        relay = Relay(reactor, relay_settings(tmp_path, [port]))
        relay.sink.start()
        yield feed(reactor, relay, points[:10000])
        yield wait_for(reactor, lambda: len(sink.points) == 10000, what="first half")
        yield sink.stop(graceful=False)  # reset: the relay cannot know what arrived
        back = CountingSink(reactor, "pickle", port=port)
        back.listen()
        yield feed(reactor, relay, points[10000:])
        yield wait_for(reactor, lambda: len(back.points) >= 10000, what="second half")
        yield wait_for(reactor, relay.idle, what="queues to empty")
        resent = int(relay.total("resent"))
        yield relay.sink.stop()
        yield back.stop()
        return sink.points, back.points, resent

    first, second, resent = run_reactor(body)
    assert 0 < resent <= 10000
    assert len(second) == 10000 + resent
    assert second[:resent] == first[-resent:]  # the window, oldest first, then the rest
    assert list(dict.fromkeys(first + second)) == points
