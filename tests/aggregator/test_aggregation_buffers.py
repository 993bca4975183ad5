"""Interval buffers: write-back schedule, late data, replay and bounded memory."""

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from carbon.aggregator.buffers import BufferManager
from carbon.aggregator.rules import parse_rule, parse_rules

SUM60 = parse_rule("total (60) = sum *.hits")
AVG60 = parse_rule("mean (60) = avg *.hits")


def feed(bm, rule, points, name="total"):
    return [bm.add(name, rule, ts, value) for ts, value in points]


def test_points_land_in_interval_start_and_emit_once_per_period():
    bm = BufferManager()
    feed(bm, SUM60, [(960, 1), (1019.5, 2), (1020, 4)])
    assert sorted(bm.flush(1021)) == [("total", 960, 3.0), ("total", 1020, 4.0)]
    assert bm.flush(1030) == []  # same 60 s period: nothing due
    feed(bm, SUM60, [(1030, 8)])
    assert bm.flush(1079) == []  # still the same period
    assert bm.flush(1080) == [("total", 1020, 12.0)]  # only intervals with new data
    assert bm.flush(1140) == []


def test_write_back_frequency_shorter_than_rule_frequency():
    bm = BufferManager(write_back_frequency=10)
    feed(bm, SUM60, [(960, 1)])
    assert bm.flush(1000) == [("total", 960, 1.0)]
    feed(bm, SUM60, [(961, 1)])
    assert bm.flush(1005) == []
    assert bm.flush(1010) == [("total", 960, 2.0)]
    assert bm.compute_period(60) == 10 and bm.compute_period(5) == 5
    assert BufferManager(write_back_frequency=0).compute_period(60) == 60


def test_force_flush_emits_everything_pending():
    bm = BufferManager()
    feed(bm, SUM60, [(960, 1)])
    assert bm.flush(970) == [("total", 960, 1.0)]
    feed(bm, SUM60, [(961, 5)])
    assert bm.flush(975) == []
    assert bm.flush(975, force=True) == [("total", 960, 6.0)]


def test_late_point_within_window_re_emits_the_full_value():
    bm = BufferManager(max_intervals=5)
    feed(bm, AVG60, [(960, 10), (970, 20)], name="mean")
    assert bm.flush(1020) == [("mean", 960, 15.0)]
    for now in (1080, 1140, 1200):
        assert bm.flush(now) == []
    feed(bm, AVG60, [(1000, 60)], name="mean")  # 4 intervals late
    assert bm.flush(1260) == [("mean", 960, 30.0)]  # avg of all three, not just 60


def test_point_for_an_expired_emitted_interval_is_discarded_not_emitted_alone():
    bm = BufferManager(max_intervals=5)
    feed(bm, SUM60, [(960, 10)])
    assert bm.flush(1020) == [("total", 960, 10.0)]
    now = 1020
    while 960 in bm.outputs["total"].intervals and now < 5000:
        now += 60
        bm.flush(now)
    assert now == 1320  # kept while within 5 intervals of the current one
    assert feed(bm, SUM60, [(975, 2)]) == [False]  # the reference would write 2.0 over 10.0
    assert bm.late_discarded == 1
    assert bm.flush(now + 60) == []


def test_replayed_intervals_never_emitted_are_aggregated_even_when_old():
    bm = BufferManager(max_intervals=5)
    feed(bm, SUM60, [(100000, 1)])
    bm.flush(100000)
    # A spool replay of old data for intervals this output never emitted.
    assert all(feed(bm, SUM60, [(600, 1), (610, 2), (660, 3)]))
    assert sorted(bm.flush(100060)) == [("total", 600, 3.0), ("total", 660, 3.0)]
    # The replay of interval 600 straddles a tick: the rest comes one tick later.
    assert all(feed(bm, SUM60, [(620, 4)]))
    assert bm.flush(100120) == [("total", 600, 7.0)]
    assert bm.flush(100180) == []
    assert 600 not in bm.outputs["total"].intervals  # expired once it went quiet
    assert feed(bm, SUM60, [(630, 1)]) == [False]


def test_tombstones_cover_out_of_order_expiry_and_forget_beyond_horizon():
    bm = BufferManager(max_intervals=1, horizon=8)
    feed(bm, SUM60, [(6000, 1)])
    bm.flush(6000)
    feed(bm, SUM60, [(6000 - 60 * 3, 1), (6000 - 60 * 20, 1)])  # two old intervals
    bm.flush(6060)
    bm.flush(6120)
    ob = bm.outputs["total"]
    assert 6000 not in ob.intervals and not ob.intervals
    assert feed(bm, SUM60, [(6000, 1), (6000 - 60 * 3, 1)]) == [False, False]
    # 20 intervals back is beyond the 8-interval horizon: treated like a replay.
    assert feed(bm, SUM60, [(6000 - 60 * 20, 1)]) == [True]


def test_memory_is_bounded_when_outputs_go_quiet():
    rule = parse_rule("<h>.total (60) = sum <h>.*")
    bm = BufferManager(max_intervals=5, idle_keep=3)
    names = ["h%d.total" % i for i in range(5000)]
    for name in names:
        bm.add(name, rule, 960, 1)
    assert len(bm) == 5000 and bm.buffered_datapoints() == 5000
    now = 960
    while len(bm) and now < 5000:
        now += 60
        bm.flush(now)
    assert now == 960 + 60 * 6  # emitted at 1020, kept while within 5 intervals
    assert bm.buffered_datapoints() == 0
    while bm.outputs and now < 5000:
        now += 60
        bm.flush(now)
    assert not bm.outputs
    assert now == 960 + 60 * (6 + 3)  # tombstones go once idle_keep intervals old
    assert bm._groups == {} or all(not g for g in bm._groups.values())
    assert bm._peak == 0  # the dicts were rebuilt at their new size


def test_active_output_keeps_a_bounded_number_of_intervals():
    bm = BufferManager(max_intervals=5)
    for step in range(200):
        ts = 600 + step * 60
        feed(bm, SUM60, [(ts, 1)])
        bm.flush(ts + 1)
    assert len(bm.outputs["total"].intervals) <= 7
    assert bm.outputs["total"].tomb_mask.bit_length() <= bm.horizon


def test_far_future_intervals_are_dropped_after_emission():
    bm = BufferManager(max_intervals=5, horizon=10)
    feed(bm, SUM60, [(1000 * 1000, 1)])  # a millisecond timestamp
    assert bm.flush(1000) == [("total", 999960, 1.0)]
    bm.flush(1060)
    assert not bm.outputs.get("total") or not bm.outputs["total"].intervals


def test_non_finite_timestamps_are_counted_not_buffered():
    bm = BufferManager()
    assert feed(bm, SUM60, [(math.nan, 1), (math.inf, 1)]) == [False, False]
    assert bm.invalid_discarded == 2 and bm.buffered_datapoints() == 0


def test_first_rule_configures_a_shared_output():
    bm = BufferManager()
    feed(bm, SUM60, [(960, 3)], name="shared")
    feed(bm, AVG60, [(960, 5)], name="shared")
    assert bm.flush(1000) == [("shared", 960, 8.0)]
    assert bm.outputs["shared"].method.name == "sum"


def test_rebind_keeps_unchanged_outputs_and_retires_changed_ones():
    old = parse_rules("total (60) = sum *.hits\nmean (60) = avg *.lat\n")
    bm = BufferManager()
    bm.add("total", old.rules[0], 960, 1)
    bm.add("mean", old.rules[1], 960, 10)
    bm.flush(970)
    bm.add("total", old.rules[0], 961, 2)
    bm.add("mean", old.rules[1], 961, 20)
    new = parse_rules("total (60) = sum *.hits\nmean (60) = max *.lat\n")
    bm.rebind(new)
    assert bm.outputs["total"].rule is new.rules[0]
    assert "mean" not in bm.outputs
    bm.add("total", new.rules[0], 962, 4)
    bm.add("mean", new.rules[1], 962, 7)
    assert sorted(bm.flush(1020)) == [
        ("mean", 960, 7.0),    # new buffer, new method
        ("mean", 960, 15.0),   # the retired buffer's last value, sent first
        ("total", 960, 7.0),   # continuity: all three points
    ]


events = st.lists(
    st.one_of(
        st.tuples(st.just("point"), st.integers(0, 15 * 60), st.integers(-100, 100)),
        st.tuples(st.just("tick"), st.integers(1, 200), st.just(0)),
    ),
    max_size=120,
)


@settings(max_examples=150, deadline=None)
@given(events=events, max_intervals=st.integers(1, 6), wbf=st.sampled_from([None, 10, 60]))
def test_last_write_of_every_interval_is_the_full_aggregate(events, max_intervals, wbf):
    """Whatever the lateness, an interval's last emitted value covers every point it took,
    and points are only refused for intervals that were already emitted and expired."""
    bm = BufferManager(max_intervals=max_intervals, write_back_frequency=wbf, horizon=64,
                       idle_keep=64)
    now = 100000
    accepted, last_written = {}, {}

    def write(batch):
        for name, interval, value in batch:
            assert name == "total"
            last_written[interval] = value

    for kind, amount, value in events:
        if kind == "tick":
            now += amount
            write(bm.flush(now))
            continue
        ts = now - amount
        interval = ts - ts % 60
        if bm.add("total", SUM60, ts, value):
            accepted[interval] = accepted.get(interval, 0) + value
        else:
            assert interval in last_written  # refused only after being emitted
    write(bm.flush(now, force=True))
    assert last_written == accepted
