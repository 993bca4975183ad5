"""Filter Series / Filter Data groups."""

import pytest
from tests.webapp.functions.fnhelpers import FakeData, call, make_ctx, ts, values

from webapp.render.errors import InputParameterError


def sample():
    return [ts('s.low', [1, 2, 1]), ts('s.mid', [4, None, 6]), ts('s.high', [9, 1, 3]),
            ts('s.none', [None, None, None])]


def names(series_list):
    return [s.name for s in series_list]


@pytest.mark.parametrize('fn,n,expected', [
    ('maximumAbove', 5, ['s.mid', 's.high']),
    ('maximumBelow', 6, ['s.low', 's.mid', 's.none']),
    ('minimumAbove', 1, ['s.mid']),
    ('minimumBelow', 1, ['s.low', 's.high', 's.none']),
    ('currentAbove', 3, ['s.mid']),
    ('currentBelow', 3, ['s.low', 's.high', 's.none']),
    ('averageAbove', 4, ['s.mid', 's.high']),
    ('averageBelow', 4, ['s.low', 's.none']),
])
def test_threshold_filters(fn, n, expected):
    assert names(call(fn, None, sample(), n)) == expected


def test_filter_series_operators():
    assert names(call('filterSeries', None, sample(), 'sum', '>=', 5)) == ['s.mid', 's.high']
    assert names(call('filterSeries', None, sample(), 'max', '=', 9)) == ['s.high']
    assert names(call('filterSeries', None, sample(), 'max', '!=', 9)) == \
        ['s.low', 's.mid', 's.none']
    assert names(call('filterSeries', None, sample(), 'last', '<', 2)) == ['s.low', 's.none']
    with pytest.raises(InputParameterError):
        call('filterSeries', None, sample(), 'max', '~', 1)


@pytest.mark.parametrize('fn,args,expected', [
    ('highestMax', [2], ['s.high', 's.mid']),
    ('highestCurrent', [1], ['s.mid']),
    ('highestAverage', [1], ['s.mid']),
    ('lowestAverage', [2], ['s.none', 's.low']),
    ('lowestCurrent', [2], ['s.none', 's.low']),
    ('highest', [1, 'sum'], ['s.high']),
    ('lowest', [1, 'max'], ['s.none']),
    ('limit', [2], ['s.low', 's.mid']),
    ('mostDeviant', [1], ['s.high']),
])
def test_ranking(fn, args, expected):
    assert names(call(fn, None, sample(), *args)) == expected


def test_highest_default_is_one_by_average():
    assert names(call('highest', None, sample(), 1)) == ['s.mid']


def test_remove_empty_series_and_unique():
    assert names(call('removeEmptySeries', None, sample())) == ['s.low', 's.mid', 's.high']
    assert names(call('removeEmptySeries', None, sample(), 0.9)) == ['s.low', 's.high']
    a, b = ts('a', [1]), ts('b', [1])
    assert call('unique', None, [a, b], [ts('a', [2])]) == [a, b]


def test_grep_and_exclude_use_regex_search():
    assert names(call('grep', None, sample(), 'i[dg]')) == ['s.mid', 's.high']
    assert names(call('exclude', None, sample(), r'\.(low|none)$')) == ['s.mid', 's.high']


def test_percentile_based_series_filters():
    series = [ts('s%d' % i, [v]) for i, v in enumerate([1, 5, 10, 50, 100])]
    # 20th/80th percentiles of averages: ranks ceil(1.2)=2 -> 5, ceil(4.8)=5 -> 100
    assert names(call('averageOutsidePercentile', None, series, 80)) == ['s0', 's1', 's4']
    assert names(call('removeBetweenPercentile', None, series, 20)) == ['s0', 's1', 's4']


def test_use_series_above():
    data = FakeData({'srv.a.latency': lambda t: 1, 'srv.b.latency': lambda t: 2})
    ctx = make_ctx(data=data)
    reqs = [ts('srv.a.requests', [1, 50]), ts('srv.b.requests', [1, 2])]
    result = call('useSeriesAbove', ctx, reqs, 10, 'requests', 'latency')
    assert names(result) == ['srv.a.latency']
    assert call('useSeriesAbove', ctx, reqs, 100, 'requests', 'latency') == []


# data [1, 7, 5, None, 9]; 50th percentile of the known values [1, 5, 7, 9] with the
# n+1 nearest-rank method: rank ceil(0.5 * 5) = 3 -> 7
@pytest.mark.parametrize('fn,n,expected,name', [
    ('removeAboveValue', 5, [1, None, 5, None, None], 'removeAboveValue(m, 5)'),
    ('removeBelowValue', 5, [None, 7, 5, None, 9], 'removeBelowValue(m, 5)'),
    ('removeAbovePercentile', 50, [1, 7, 5, None, None], 'removeAbovePercentile(m, 50)'),
    ('removeBelowPercentile', 50, [None, 7, None, None, 9], 'removeBelowPercentile(m, 50)'),
])
def test_filter_data(fn, n, expected, name):
    (result,) = call(fn, None, [ts('m', [1, 7, 5, None, 9])], n)
    assert result.name == name
    assert values(result) == expected
