"""Transform group, time based: summarize, hitcount, timeShift/Stack/Slice, generators."""

import math

import pytest
from tests.webapp.functions.fnhelpers import START, FakeData, call, make_ctx, ts, values

from webapp.plugins import RENDER_FUNCTIONS


def test_summarize_aligned_to_interval():
    series = ts('m', list(range(1, 11)), start=START + 120)
    (result,) = call('summarize', None, [series], '5min')
    # buckets [0,300) [300,600) [600,900) relative to the hour
    assert values(result) == [1 + 2 + 3, 4 + 5 + 6 + 7 + 8, 9 + 10]
    assert (result.start, result.end, result.step) == (START, START + 900, 300)
    assert result.name == 'summarize(m, "5min", "sum")'
    assert result.tags['summarize'] == '5min' and result.tags['summarizeFunction'] == 'sum'


def test_summarize_aligned_end_gets_trailing_empty_bucket():
    (result,) = call('summarize', None, [ts('m', list(range(1, 11)))], '5min', 'max')
    assert values(result) == [5, 10, None]


def test_summarize_align_to_from_and_functions():
    series = ts('m', list(range(1, 11)), start=START + 120)
    (result,) = call('summarize', None, [series], '5min', 'avg', True)
    assert values(result) == [3.0, 8.0]
    assert (result.start, result.end) == (START + 120, START + 720)
    assert result.name == 'summarize(m, "5min", "avg", true)'
    (result,) = call('summarize', None, [ts('m', [1, None, 3, 4])], '2min', 'last')
    assert values(result) == [1, 4, None]


def test_summarize_respects_series_xff():
    series = ts('m', [1, None, None, None, None, 2, 3, 4, None, None], xFilesFactor=0.5)
    (result,) = call('summarize', None, [series], '5min')
    assert values(result) == [None, 9, None]


def test_smart_summarize_starts_at_from():
    series = ts('m', list(range(1, 11)), start=START + 120)
    (result,) = call('smartSummarize', None, [series], '5min')
    assert values(result) == [15, 40]
    assert (result.start, result.end, result.step) == (START + 120, START + 720, 300)
    assert result.name == 'smartSummarize(m, "5min", "sum")'


def test_smart_summarize_align_to_refetches():
    data = FakeData({'m': lambda t: 1})
    ctx = make_ctx(start=START + 120, end=START + 720, data=data, first_arg='m')
    series = data.fetch(ctx, 'm')
    (result,) = call('smartSummarize', ctx, series, '5min', 'sum', 'hours')
    assert data.calls[-1] == (START, START + 720, 'm')
    assert values(result) == [5, 5, 2]
    assert result.start == START


def test_hitcount_simple_and_total_preserved():
    (result,) = call('hitcount', None, [ts('rate', [1] * 10)], '2min')
    assert values(result) == [120] * 5
    assert result.name == 'hitcount(rate, "2min")'
    (result,) = call('hitcount', None, [ts('rate', [1] * 10)], '90s')
    assert len(result) == 7 and result.start == START + 600 - 7 * 90
    assert sum(v for v in values(result) if v) == 600
    (result,) = call('hitcount', None, [ts('rate', [None, 2, None, None])], '2min')
    assert values(result) == [120, None]


def shifted_data():
    return FakeData({'m': lambda t: t})


def test_time_shift_fetches_earlier_data():
    data = shifted_data()
    ctx = make_ctx(data=data, first_arg='m')
    original = data.fetch(ctx, 'm')
    (result,) = call('timeShift', ctx, original, '1h')
    assert data.calls[-1] == (START - 3600, START + 600 - 3600, 'm')
    assert values(result)[0] == START - 3600
    assert (result.start, result.end) == (START, START + 600)
    assert result.name == 'timeShift(m, "-1h")'
    (result,) = call('timeShift', ctx, original, '+1h')
    assert values(result)[0] == START + 3600 and result.name == 'timeShift(m, "+1h")'


def test_time_shift_reset_end_false():
    data = shifted_data()
    ctx = make_ctx(data=data, first_arg='m')
    (result,) = call('timeShift', ctx, data.fetch(ctx, 'm'), '1h', False)
    assert (result.start, result.end) == (START, START + 600)


def test_time_stack():
    data = shifted_data()
    ctx = make_ctx(data=data, first_arg='m')
    result = call('timeStack', ctx, data.fetch(ctx, 'm'), '1h', 0, 3)
    assert [r.name for r in result] == ['timeShift(m, -1h, 0)', 'timeShift(m, -1h, 1)',
                                        'timeShift(m, -1h, 2)']
    assert [values(r)[0] for r in result] == [START, START - 3600, START - 7200]
    assert all(r.start == START for r in result)


def test_time_slice():
    ctx = make_ctx()
    (result,) = call('timeSlice', ctx, [ts('m', [1, 2, 3, None, 5, 6])], str(START + 120),
                     str(START + 240))
    assert values(result) == [None, None, 3, None, 5, None]
    assert result.name == 'timeSlice(m, %d, %d)' % (START + 120, START + 240)
    (result,) = call('timeSlice', ctx, [ts('m', [1] * 10)], 'now-2min')
    assert values(result) == [None] * 8 + [1, 1]


def test_integral_by_interval():
    (result,) = call('integralByInterval', make_ctx(), [ts('m', [1] * 7 + [None] + [1, 1])],
                     '5min')
    assert values(result) == [1, 2, 3, 4, 5, 1, 2, 2, 3, 4]
    assert result.name == "integralByInterval(m,'5min')"


def test_compress_periodic_gaps():
    series = ts('m', [None, 5, None, None, 6, None, None, 7, None, None])
    (result,) = call('compressPeriodicGaps', None, [series])
    assert values(result) == [5, 6, 7]
    assert (result.start, result.step, result.end) == (START + 60, 180, START + 420)
    assert result.name == 'compressPeriodicGaps(m)'
    untouched = ts('x', [1, 2, 3])
    assert values(call('compressPeriodicGaps', None, [untouched])[0]) == [1, 2, 3]


def test_time_and_sin_generators():
    ctx = make_ctx(end=START + 180)
    (result,) = call('time', ctx, 'clock')
    assert values(result) == [START, START + 60, START + 120] and result.name == 'clock'
    (result,) = call('timeFunction', ctx, 'clock', 120)
    assert values(result) == [START, START + 120] and result.step == 120
    (result,) = call('sin', ctx, 'wave', 3)
    assert values(result) == pytest.approx([3 * math.sin(START + 60 * i) for i in range(3)])
    assert call('sinFunction', ctx, 'wave')[0].name == 'wave'


@pytest.mark.parametrize('bad', ['5m', 'min', '1x', 'abc'])
def test_bad_intervals_are_input_errors(bad):
    from webapp.render.errors import InputParameterError
    with pytest.raises(InputParameterError):
        call('summarize', None, [ts('m', [1])], bad)
    with pytest.raises(InputParameterError):
        RENDER_FUNCTIONS.get('movingAverage').func(make_ctx(first_arg='m'), [ts('m', [1])], bad)
