"""Combine group: division, percentages, node/tag grouping, map/reduce, applyByNode."""

import pytest
from tests.webapp.functions.fnhelpers import START, FakeData, call, make_ctx, ts, values

from webapp.render.errors import InputParameterError


def test_divide_series():
    result = call('divideSeries', None, [ts('a', [10, 6, None, 4]), ts('b', [1, 2, 3, 4])],
                  [ts('d', [2, 0, 3, None])])
    assert [r.name for r in result] == ['divideSeries(a,d)', 'divideSeries(b,d)']
    assert values(result[0]) == [5.0, None, None, None]
    assert values(result[1]) == [0.5, None, 1.0, None]


def test_divide_series_missing_and_too_many_divisors():
    (result,) = call('divideSeries', None, [ts('a', [1, 2])], [])
    assert result.name == 'divideSeries(a,MISSING)' and values(result) == [None, None]
    with pytest.raises(InputParameterError):
        call('divideSeries', None, [ts('a', [1])], [ts('b', [1]), ts('c', [1])])


def test_divide_series_lists():
    result = call('divideSeriesLists', None, [ts('a', [4]), ts('b', [9])],
                  [ts('x', [2]), ts('y', [3])])
    assert [(r.name, values(r)) for r in result] == [('divideSeries(a,x)', [2.0]),
                                                     ('divideSeries(b,y)', [3.0])]
    with pytest.raises(InputParameterError):
        call('divideSeriesLists', None, [ts('a', [4])], [])


def test_as_percent_of_sum():
    series = [ts('a.x', [1, 3, None], pathExpression='a.*'),
              ts('a.y', [3, 1, 2], pathExpression='a.*')]
    result = call('asPercent', None, series)
    assert [r.name for r in result] == ['asPercent(a.x,sumSeries(a.*))',
                                        'asPercent(a.y,sumSeries(a.*))']
    assert values(result[0]) == [25.0, 75.0, None]
    assert values(result[1]) == [75.0, 25.0, 100.0]


def test_as_percent_of_number_and_series():
    (result,) = call('pct', None, [ts('a', [5, None, 20])], 40)
    assert result.name == 'asPercent(a,40)' and values(result) == [12.5, None, 50.0]
    result = call('asPercent', None, [ts('a', [1, 2]), ts('b', [2, 2])], [ts('t', [4, 0])])
    assert [r.name for r in result] == ['asPercent(a,t)', 'asPercent(b,t)']
    assert values(result[0]) == [25.0, None] and values(result[1]) == [50.0, None]


def test_as_percent_matched_lists_sorted_by_name():
    result = call('asPercent', None, [ts('b', [1]), ts('a', [3])],
                  [ts('tb', [4]), ts('ta', [4])])
    assert [(r.name, values(r)) for r in result] == [('asPercent(a,ta)', [75.0]),
                                                     ('asPercent(b,tb)', [25.0])]
    with pytest.raises(InputParameterError):
        call('asPercent', None, [ts('a', [1]), ts('b', [1]), ts('c', [1])],
             [ts('x', [1]), ts('y', [1])])


def test_as_percent_with_nodes():
    series = [ts('dc1.host1.cpu', [1]), ts('dc1.host2.cpu', [3]), ts('dc2.host1.cpu', [5])]
    result = call('asPercent', None, series, None, 0)
    assert [r.name for r in result] == [
        'asPercent(dc1.host1.cpu,sumSeries(dc1.host1.cpu,dc1.host2.cpu))',
        'asPercent(dc1.host2.cpu,sumSeries(dc1.host1.cpu,dc1.host2.cpu))',
        'asPercent(dc2.host1.cpu,dc2.host1.cpu)']
    assert [values(r) for r in result] == [[25.0], [75.0], [100.0]]
    totals = [ts('dc1.total', [10]), ts('dc3.total', [1])]
    result = call('asPercent', None, series[:2], totals, 0)
    assert [(r.name, values(r)) for r in result] == [
        ('asPercent(dc1.host1.cpu,dc1.total)', [10.0]),
        ('asPercent(dc1.host2.cpu,dc1.total)', [30.0]),
        ('asPercent(MISSING,dc3.total)', [None])]


def test_weighted_average():
    avg = [ts('svc.a.latency', [10, 20], pathExpression='svc.*.latency'),
           ts('svc.b.latency', [30, None], pathExpression='svc.*.latency')]
    weight = [ts('svc.a.count', [1, 1], pathExpression='svc.*.count'),
              ts('svc.b.count', [3, 1], pathExpression='svc.*.count')]
    (result,) = call('weightedAverage', None, avg, weight, 1)
    # point 0: (10*1 + 30*3) / 4 = 25; point 1: 20*1 / (1+1) = 10
    assert values(result) == [25.0, 10.0]
    assert result.name == 'weightedAverage(svc.*.latency, svc.*.count, 1)'
    with pytest.raises(InputParameterError):
        call('weightedAverage', None, avg, weight[:1], 1)


def servers():
    return [ts('dc1.web1.cpu', [1, 2]), ts('dc1.web2.cpu', [3, None]),
            ts('dc2.web1.cpu', [5, 6]), ts('dc2.web1.mem', [7, 8])]


def test_group_by_node():
    result = call('groupByNode', None, servers(), 0)
    assert [(r.name, values(r)) for r in result] == [('dc1', [2.0, 2.0]),
                                                     ('dc2', [6.0, 7.0])]
    result = call('groupByNode', None, servers(), -1, 'sumSeries')
    assert [(r.name, values(r)) for r in result] == [('cpu', [9, 8]), ('mem', [7, 8])]
    result = call('groupByNode', None, servers(), 0, 'max')
    assert [values(r) for r in result] == [[3, 2], [7, 8]]


def test_group_by_nodes_and_function_callback():
    result = call('groupByNodes', None, servers(), 'sum', 0, 2)
    assert [r.name for r in result] == ['dc1.cpu', 'dc2.cpu', 'dc2.mem']
    assert values(result[0]) == [4, 2]
    result = call('groupByNodes', None, servers(), 'countSeries', 0)
    assert [values(r) for r in result] == [[2, 2], [2, 2]]


def test_group_by_node_inside_function_name():
    series = [ts('scale(a.b.c,2)', [1]), ts('scale(a.x.c,2)', [2])]
    result = call('groupByNode', None, series, 1, 'sum')
    assert [r.name for r in result] == ['b', 'x']


def test_group_by_tag_node():
    series = [ts('cpu;dc=eu;host=a', [1]), ts('cpu;dc=eu;host=b', [3]), ts('cpu;dc=us', [5])]
    result = call('groupByNode', None, series, 'dc', 'sum')
    assert [(r.name, values(r)) for r in result] == [('eu', [4]), ('us', [5])]


def test_group_by_tags():
    series = [ts('cpu;dc=eu;host=a', [1]), ts('cpu;dc=eu;host=b', [3]), ts('cpu;dc=us', [5])]
    result = call('groupByTags', None, series, 'sum', 'dc')
    assert [r.name for r in result] == ['cpu;dc=eu', 'cpu;dc=us']
    assert [values(r) for r in result] == [[4], [5]]
    assert dict(result[0].tags) == {'name': 'cpu', 'dc': 'eu'}
    mixed = [ts('cpu;dc=eu', [1]), ts('mem;dc=eu', [2])]
    (result,) = call('groupByTags', None, mixed, 'average', 'dc')
    assert result.name == 'average;dc=eu' and values(result) == [1.5]
    result = call('groupByTags', None, mixed, 'max', 'name', 'dc')
    assert [r.name for r in result] == ['cpu;dc=eu', 'mem;dc=eu']


def test_map_and_reduce():
    series = [ts('s.a.bytes', [10]), ts('s.a.count', [2]), ts('s.b.bytes', [9]),
              ts('s.b.count', [3])]
    mapped = call('mapSeries', None, series, 1)
    assert [[s.name for s in group] for group in mapped] == [['s.a.bytes', 's.a.count'],
                                                             ['s.b.bytes', 's.b.count']]
    result = call('reduceSeries', None, mapped, 'divideSeries', 2, 'bytes', 'count')
    assert [(r.name, values(r)) for r in result] == [('s.a.reduce.divideSeries', [5.0]),
                                                     ('s.b.reduce.divideSeries', [3.0])]
    assert call('map', None, series, 1) == mapped
    (result,) = call('reduce', None, call('map', None, series[:2], 1), 'sumSeries', 2,
                     'bytes', 'count')
    assert (result.name, values(result)) == ('s.a.reduce.sumSeries', [12])


def test_apply_by_node():
    data = FakeData({'srv.a.used': lambda t: 3, 'srv.a.total': lambda t: 4,
                     'srv.b.used': lambda t: 1, 'srv.b.total': lambda t: 2})
    ctx = make_ctx(data=data, end=START + 120)
    series = data.fetch(ctx, 'srv.a.used') + data.fetch(ctx, 'srv.b.used')
    result = call('applyByNode', ctx, series, 1, '%.total')
    assert [(r.name, r.pathExpression, values(r)) for r in result] == [
        ('srv.a.total', 'srv.a', [4, 4]), ('srv.b.total', 'srv.b', [2, 2])]
    assert [c[2] for c in data.calls[-2:]] == ['srv.a.total', 'srv.b.total']
    result = call('applyByNode', ctx, series, 1, '%.total', '%.ratio')
    assert [r.name for r in result] == ['srv.a.ratio', 'srv.b.ratio']
