"""Combine group: aggregation of several series into one."""

import math

import pytest
from tests.webapp.functions.fnhelpers import START, call, make_ctx, ts, values

from webapp.plugins import RENDER_FUNCTIONS
from webapp.render.errors import InputParameterError


def three():
    return [ts('a.b.c', [1, 2, None, 4], pathExpression='a.b.*'),
            ts('a.b.d', [3, None, None, 8], pathExpression='a.b.*'),
            ts('a.b.e', [5, 6, None, 0], pathExpression='a.b.*')]


@pytest.mark.parametrize('name,expected', [
    ('sumSeries', [9, 8, None, 12]),
    ('sum', [9, 8, None, 12]),
    ('averageSeries', [3.0, 4.0, None, 4.0]),
    ('avg', [3.0, 4.0, None, 4.0]),
    ('maxSeries', [5, 6, None, 8]),
    ('minSeries', [1, 2, None, 0]),
    ('diffSeries', [1 - 3 - 5, 2 - 6, None, 4 - 8 - 0]),
    ('rangeOfSeries', [4.0, 4.0, None, 8.0]),
    ('multiplySeries', [15.0, None, None, 0.0]),
])
def test_simple_aggregations(name, expected):
    result = call(name, None, three())
    assert len(result) == 1
    assert values(result[0]) == expected


def test_output_name_uses_path_expression_once():
    (result,) = call('sumSeries', None, three())
    assert result.name == 'sumSeries(a.b.*)'
    assert result.pathExpression == 'sumSeries(a.b.*)'
    (result,) = call('averageSeries', None, [ts('x.y', [1])], [ts('z', [2])])
    assert result.name == 'averageSeries(x.y,z)'
    (result,) = call('sum', None, three())
    assert result.name == 'sumSeries(a.b.*)'


def test_stddev_is_population_stddev():
    (result,) = call('stddevSeries', None, [ts('a', [1, 2]), ts('b', [3, None]),
                                            ts('c', [5, None])])
    mean = 3.0
    assert values(result)[0] == pytest.approx(math.sqrt(((1 - mean) ** 2 + 0 + 4) / 3))
    assert values(result)[1] == 0.0


def test_multiply_single_series_passes_through():
    series = ts('a', [2, 3])
    assert call('multiplySeries', None, [series]) == [series]
    assert series.name == 'a'


def test_aggregate_tags_keep_common_and_mark_function():
    (result,) = call('sumSeries', None, [ts('cpu;host=a;dc=eu', [1]),
                                         ts('cpu;host=b;dc=eu', [2])])
    assert dict(result.tags) == {'name': 'cpu', 'dc': 'eu', 'aggregatedBy': 'sum'}
    (result,) = call('maxSeries', None, [ts('x.a', [1]), ts('x.b', [2])])
    assert dict(result.tags) == {'name': 'maxSeries(x.a,x.b)', 'aggregatedBy': 'max'}


def test_aggregate_function_and_xff():
    series = three()
    (result,) = call('aggregate', make_ctx(), series, 'average', 0.7)
    # column 1 has 2 of 3 values (< 0.7) -> None; column 2 has none
    assert values(result) == [3.0, None, None, 4.0]
    assert result.name == 'averageSeries(a.b.*)'
    (result,) = call('aggregate', None, three(), 'sumSeries')
    assert result.name == 'sumSeries(a.b.*)'
    (result,) = call('aggregate', None, three(), 'count')
    assert values(result) == [3, 2, None, 3]
    (result,) = call('aggregate', None, three(), 'median')
    assert values(result) == [3, 4.0, None, 4]
    (result,) = call('aggregate', None, three(), 'last')
    assert values(result) == [5, 6, None, 0]


def test_request_xff_used_by_default():
    (result,) = call('sumSeries', make_ctx(xFilesFactor=0.5), three())
    assert values(result) == [9, 8, None, 12]
    (result,) = call('sumSeries', make_ctx(xFilesFactor=0.7), three())
    assert values(result) == [9, None, None, 12]


def test_empty_inputs_give_empty_result():
    assert call('sumSeries', None, []) == []
    assert call('aggregate', None, [], 'sum') == []


def test_aggregate_rejects_unknown_function():
    with pytest.raises(InputParameterError):
        RENDER_FUNCTIONS.get('aggregate').func(make_ctx(), three(), 'bogus')


def test_different_steps_are_normalised_to_lcm():
    fine = ts('fine', [1, 2, 3, 4, 5, 6], step=10)
    coarse = ts('coarse', [10, 20, 30, 40], step=15)
    (result,) = call('sumSeries', None, [fine, coarse])
    # lcm(10, 15) = 30: fine -> avg of 3 points, coarse -> avg of 2 points
    assert result.step == 30
    assert values(result) == [2.0 + 15.0, 5.0 + 35.0]
    assert result.start == START and result.end == START + 60


def test_count_series():
    (result,) = call('countSeries', None, three())
    assert values(result) == [3, 3, 3, 3]
    assert result.name == 'countSeries(a.b.*)'
    (result,) = call('countSeries', make_ctx(end=START + 100))
    assert values(result) == [0.0, 0.0, 0.0]
    assert result.pathExpression == 'countSeries()'


def test_series_lists_pairwise():
    first = [ts('a.x', [1, 2]), ts('a.y', [3, None])]
    second = [ts('b.x', [10, 20]), ts('b.y', [30, 40])]
    result = call('sumSeriesLists', None, first, second)
    assert [r.name for r in result] == ['sumSeries(a.x,b.x)', 'sumSeries(a.y,b.y)']
    assert [values(r) for r in result] == [[11, 22], [33, 40]]
    result = call('diffSeriesLists', None, [ts('a', [5])], [ts('b', [3])])
    assert result[0].name == 'diffSeries(a,b)' and values(result[0]) == [2]
    result = call('multiplySeriesLists', None, [ts('a', [5])], [ts('b', [3])])
    assert values(result[0]) == [15.0]
    result = call('aggregateSeriesLists', None, [ts('a', [5])], [ts('b', [3])], 'max')
    assert result[0].name == 'maxSeries(a,b)' and values(result[0]) == [5]
    with pytest.raises(InputParameterError):
        call('sumSeriesLists', None, first, second[:1])


def test_with_wildcards():
    series = [ts('host1.cpu.user', [1, 2]), ts('host2.cpu.user', [3, 4]),
              ts('host1.cpu.sys', [5, 6])]
    result = call('sumSeriesWithWildcards', None, series, 0)
    assert [(r.name, values(r)) for r in result] == [('cpu.user', [4, 6]), ('cpu.sys', [5, 6])]
    result = call('averageSeriesWithWildcards', None, series, 0, 2)
    assert [(r.name, values(r)) for r in result] == [('cpu', [3.0, 4.0])]
    result = call('multiplySeriesWithWildcards', None, series[:2], 0)
    assert values(result[0]) == [3.0, 8.0]
    result = call('aggregateWithWildcards', None, series, 'max', 0)
    assert [(r.name, values(r)) for r in result] == [('cpu.user', [3, 4]), ('cpu.sys', [5, 6])]


def test_percentile_of_series():
    series = [ts('s%d' % i, [v, None]) for i, v in enumerate([15, 20, 35, 40, 50])]
    (result,) = call('percentileOfSeries', None, series, 40)
    # nearest rank: ceil(0.4 * 6) = 3rd -> 35 (NIST method with n+1)
    rank = 0.4 * (5 + 1)
    expected = sorted([15, 20, 35, 40, 50])[math.ceil(rank) - 1]
    assert values(result)[0] == expected
    assert result.name == 'percentileOfSeries(s0,40)'
    (result,) = call('percentileOfSeries', None, series, 40, True)
    # interpolated: rank 2.4 -> 20 + 0.4 * (35 - 20)
    assert values(result)[0] == pytest.approx(26.0)
    with pytest.raises(InputParameterError):
        call('percentileOfSeries', None, series, 0)


def test_pow_series():
    (result,) = call('powSeries', None, [ts('a', [2, 3, None, -1])], [ts('b', [3, 2, 2, 0.5])])
    assert values(result) == [8.0, 9.0, None, None]
    assert result.name == 'powSeries(a,b)'


def test_group_concatenates():
    a, b, c = ts('a', [1]), ts('b', [2]), ts('c', [3])
    assert call('group', None, [a], [b, c]) == [a, b, c]
    assert call('group', None) == []
