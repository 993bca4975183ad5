"""Calculate group: moving windows, EMA, percentiles, stdev, regression, Holt-Winters."""

import statistics

import pytest
from tests.webapp.functions.fnhelpers import START, FakeData, call, make_ctx, ts, values


def index_data():
    # value = index of the minute relative to START (negative before it)
    return FakeData({'m': lambda t: (t - START) // 60})


def moving(fn, window, *extra):
    data = index_data()
    ctx = make_ctx(data=data, first_arg='m')
    (result,) = call(fn, ctx, data.fetch(ctx, 'm'), window, *extra)
    return result, data


@pytest.mark.parametrize('fn,expected', [
    ('movingAverage', lambda k: k - 1),
    ('movingSum', lambda k: 3 * k - 3),
    ('movingMin', lambda k: k - 2),
    ('movingMax', lambda k: k),
    ('movingMedian', lambda k: k - 1),
])
def test_moving_functions_point_window(fn, expected):
    result, data = moving(fn, 3)
    assert data.calls[-1] == (START - 180, START + 600, 'm')
    assert values(result) == [expected(k) for k in range(10)]
    assert (result.start, result.end, result.step) == (START, START + 600, 60)
    assert result.name == '%s(m,3)' % fn
    assert result.tags[fn] == '3'


def test_moving_average_interval_window_name_is_quoted():
    result, data = moving('movingAverage', '3min')
    assert values(result) == [k - 1 for k in range(10)]
    assert result.name == 'movingAverage(m,"3min")'


def test_moving_window_custom_function():
    result, _ = moving('movingWindow', 2, 'diff')
    # diff of (k-1, k) = -1
    assert values(result) == [-1] * 10
    assert result.name == 'movingDiff(m,2)'


def test_moving_average_xff():
    data = FakeData({'m': lambda t: None if ((t - START) // 60) % 2 else 4})
    ctx = make_ctx(data=data, first_arg='m')
    (result,) = call('movingAverage', ctx, data.fetch(ctx, 'm'), 4, 0.5)
    assert values(result) == [4.0] * 10
    (result,) = call('movingAverage', ctx, data.fetch(ctx, 'm'), 4, 0.6)
    assert values(result) == [None] * 10


def test_moving_empty_input():
    assert call('movingAverage', make_ctx(first_arg='m'), [], 5) == []


def test_exponential_moving_average():
    data = index_data()
    ctx = make_ctx(data=data, first_arg='m')
    (result,) = call('exponentialMovingAverage', ctx, data.fetch(ctx, 'm'), 3)
    raw = list(range(-3, 10))
    c = 2 / (3 + 1)
    ema = sum(raw[:3]) / 3
    expected = [ema]
    for v in raw[3:]:
        ema = c * v + (1 - c) * ema
        expected.append(ema)
    assert values(result) == pytest.approx(expected)
    assert result.name == 'exponentialMovingAverage(m,3)'
    assert result.start == START


def test_n_percentile():
    (result,) = call('nPercentile', None, [ts('m', list(range(10, 0, -1)) + [None])], 50)
    # 10 known values, rank ceil(0.5 * 11) = 6 -> 6th smallest = 6
    assert values(result) == [6] * 11
    assert result.name == 'nPercentile(m, 50)'
    assert call('nPercentile', None, [ts('e', [None])], 50) == []


def test_stdev():
    (result,) = call('stdev', None, [ts('m', [1, 2, 3, None, 5])], 3)
    windows = [[1], [1, 2], [1, 2, 3], [2, 3], [3, 5]]
    assert values(result) == pytest.approx([statistics.pstdev(w) for w in windows])
    assert result.name == 'stdev(m,3)'
    (result,) = call('stdev', None, [ts('m', [1, None, None, None])], 4, 0.5)
    assert values(result) == [None, None, None, None]


def test_aggregate_line():
    ctx = make_ctx()
    (result,) = call('aggregateLine', ctx, [ts('m', [1, 2, None, 5])])
    assert values(result) == [8 / 3] * 3
    assert result.name == 'aggregateLine(m, 2.66667)'
    assert (result.start, result.end) == (START, START + 600)
    (result,) = call('aggregateLine', ctx, [ts('m', [1, 5])], 'max', True)
    assert values(result) == [5, 5] and result.step == 60
    (result,) = call('aggregateLine', ctx, [ts('m', [None])])
    assert result.name == 'aggregateLine(m, None)'


def test_linear_regression():
    data = FakeData({'m': lambda t: 5 + 2 * (t - START) / 60})
    ctx = make_ctx(data=data, first_arg='m')
    series = data.fetch(ctx, 'm')
    (result,) = call('linearRegression', ctx, series)
    assert values(result) == pytest.approx([5 + 2 * i for i in range(10)])
    assert result.name == 'linearRegression(m, %d, %d)' % (START, START + 600)
    (result,) = call('linearRegression', ctx, series, str(START + 120), str(START + 300))
    assert data.calls[-1] == (START + 120, START + 300, 'm')
    assert values(result) == pytest.approx([5 + 2 * i for i in range(10)])


def test_identity():
    (result,) = call('identity', make_ctx(end=START + 180), 'id')
    assert values(result) == [START, START + 60, START + 120]
    assert result.name == 'id' and result.pathExpression == 'identity("id")'


def hw_context():
    data = FakeData({'m': lambda t: 5})
    return make_ctx(data=data, first_arg='m'), data


def test_holt_winters_forecast_of_constant_is_constant():
    ctx, data = hw_context()
    (result,) = call('holtWintersForecast', ctx, data.fetch(ctx, 'm'), '10min', '5min')
    assert data.calls[-1] == (START - 600, START + 600, 'm')
    assert values(result) == pytest.approx([5] * 10)
    assert result.name == 'holtWintersForecast(m)' and result.start == START


def test_holt_winters_bands_and_aberration():
    ctx, data = hw_context()
    lower, upper = call('holtWintersConfidenceBands', ctx, data.fetch(ctx, 'm'), 3, '10min',
                        '5min')
    assert lower.name == 'holtWintersConfidenceLower(m)'
    assert upper.name == 'holtWintersConfidenceUpper(m)'
    assert values(lower) == pytest.approx([5] * 10) and values(upper) == pytest.approx([5] * 10)
    spiky = ts('m', [5, 5, 5, 20, 5, 1, 5, 5, 5, None])
    (result,) = call('holtWintersAberration', ctx, [spiky], 3, '10min', '5min')
    assert values(result) == pytest.approx([0, 0, 0, 15, 0, -4, 0, 0, 0, 0])
    assert result.name == 'holtWintersAberration(m)'


def test_holt_winters_reacts_to_change_and_area():
    data = FakeData({'m': lambda t: 10 if t >= START else 0})
    ctx = make_ctx(data=data, first_arg='m')
    (forecast,) = call('holtWintersForecast', ctx, data.fetch(ctx, 'm'), '10min', '5min')
    # the forecast lags behind the jump from 0 to 10 and then climbs towards it
    assert values(forecast)[0] < 10 and values(forecast)[-1] > values(forecast)[1]
    area = call('holtWintersConfidenceArea', ctx, data.fetch(ctx, 'm'), 3, '10min', '5min')
    assert [s.name for s in area] == ['holtWintersConfidenceArea(m)'] * 2
    assert area[0].options == {'stacked': True, 'invisible': True}
    assert area[1].options == {'stacked': True}
