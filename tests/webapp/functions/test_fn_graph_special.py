"""Graph and Special groups, plus pie functions."""

import pytest
from tests.webapp.functions.fnhelpers import START, call, make_ctx, ts, values

from webapp.functions.registry import PIE_FUNCTIONS
from webapp.render.errors import InputParameterError


def test_drawing_options():
    s = [ts('m', [1])]
    assert call('color', None, s, 'red')[0].color == 'red'
    assert call('alpha', None, s, 0.5)[0].options['alpha'] == 0.5
    assert call('lineWidth', None, s, 3)[0].options['lineWidth'] == 3.0
    (d,) = call('dashed', None, [ts('m', [1])])
    assert d.options['dashed'] == 5 and d.name == 'dashed(m, 5)'
    (d,) = call('drawAsInfinite', None, [ts('m', [1])])
    assert d.options['drawAsInfinite'] is True and d.name == 'drawAsInfinite(m)'
    (d,) = call('secondYAxis', None, [ts('m', [1])])
    assert d.options['secondYAxis'] is True and d.name == 'secondYAxis(m)'


def test_stacked_accumulates_within_and_across_calls():
    ctx = make_ctx()
    first = call('stacked', ctx, [ts('a', [1, None, 3]), ts('b', [10, 20, 30])])
    assert [values(s) for s in first] == [[1, None, 3], [11, 20, 33]]
    assert [s.name for s in first] == ['stacked(a)', 'stacked(b)']
    assert all(s.options['stacked'] for s in first)
    (more,) = call('stacked', ctx, [ts('c', [1, 1, 1])])
    assert values(more) == [12, 21, 34]
    (named,) = call('stacked', ctx, [ts('d', [5])], 'other')
    assert values(named) == [5] and named.name == 'd'


def test_area_between():
    lower, upper = call('areaBetween', None, [ts('lo', [1], pathExpression='x.*'),
                                              ts('hi', [2], pathExpression='x.*')])
    assert lower.name == upper.name == 'areaBetween(x.*)'
    assert lower.options == {'stacked': True, 'invisible': True}
    assert upper.options == {'stacked': True}
    with pytest.raises(InputParameterError):
        call('areaBetween', None, [ts('a', [1])])


def test_constant_line_and_threshold():
    ctx = make_ctx()
    (line,) = call('constantLine', ctx, 5)
    assert values(line) == [5.0, 5.0, 5.0] and line.name == '5.0'
    assert (line.start, line.end, line.step) == (START, START + 600, 300)
    assert line.pathExpression == 'constantLine(5.0)'
    (line,) = call('threshold', ctx, 2.5, 'limit', 'red')
    assert line.name == 'limit' and line.color == 'red' and values(line) == [2.5] * 3


def test_vertical_line():
    ctx = make_ctx()
    (line,) = call('verticalLine', ctx, str(START + 60), 'deploy', 'blue')
    assert line.name == 'deploy' and line.start == START + 60 and line.color == 'blue'
    assert line.options['drawAsInfinite'] is True
    with pytest.raises(InputParameterError):
        call('verticalLine', ctx, str(START - 60))
    with pytest.raises(InputParameterError):
        call('verticalLine', ctx, str(START + 6000))


def test_consolidate_by_changes_consolidation():
    (result,) = call('consolidateBy', None, [ts('m', [1, 5, 2, 2])], 'max')
    assert result.name == 'consolidateBy(m,"max")' and result.consolidationFunc == 'max'
    result.consolidate(2)
    assert values(result) == [5, 2]
    (result,) = call('cumulative', None, [ts('m', [1, 5])])
    assert result.consolidationFunc == 'sum' and result.name == 'consolidateBy(m,"sum")'


def test_set_xfiles_factor():
    ctx = make_ctx()
    (result,) = call('xFilesFactor', ctx, [ts('m', [1, None, None, None])], 0.5)
    assert result.xFilesFactor == 0.5 and ctx['xFilesFactor'] == 0.5
    result.consolidate(4)
    assert values(result) == [None]
    (result,) = call('setXFilesFactor', ctx, [ts('m', [1])], 0.1)
    assert result.tags['xFilesFactor'] == '0.1'


def test_fallback_series():
    a, b = ts('a', [1]), ts('b', [2])
    assert call('fallbackSeries', None, [a], [b]) == [a]
    assert call('fallbackSeries', None, [], [b]) == [b]


@pytest.mark.parametrize('name,args,expected', [
    ('a.b.c.d', [1, 3], 'b.c'),
    ('a.b.c.d', [2], 'c.d'),
    ('a.b.c.d', [-2], 'c.d'),
    ('scale(a.b.c,2)', [1], 'b.c'),
])
def test_substr(name, args, expected):
    (result,) = call('substr', None, [ts(name, [1])], *args)
    assert result.name == expected


def test_cacti_style():
    result = call('cactiStyle', None, [ts('short', [1, 3]), ts('longer.name', [None])])
    assert result[0].name == 'short       Current:3.00    Max:3.00    Min:1.00    '
    assert result[1].name == 'longer.name Current:nan     Max:nan     Min:nan     '
    (result,) = call('cactiStyle', None, [ts('m', [2500])], 'si', 'b')
    assert 'Current:2.50 kb' in result.name


def test_random_walk():
    (result,) = call('randomWalk', make_ctx(end=START + 300), 'walk')
    assert result.name == 'walk' and len(result) == 5 and result[0] == 0
    assert all(abs(b - a) <= 0.5 for a, b in zip(result, result[1:], strict=False))
    (result,) = call('randomWalkFunction', make_ctx(end=START + 300), 'walk', 120)
    assert len(result) == 3 and result.step == 120


class FakeTagDB:
    def __init__(self):
        self.queries = []

    def find_series(self, expressions):
        self.queries.append(expressions)
        return ['cpu;host=a', 'cpu;host=b']


def test_series_by_tag():
    tagdb = FakeTagDB()
    fetched = []

    def fetch(ctx, path):
        fetched.append(path)
        return [ts(path, [1])]

    ctx = make_ctx(tagdb=tagdb, fetchSeries=fetch)
    result = call('seriesByTag', ctx, 'name=cpu', 'host=~[ab]')
    assert tagdb.queries == [['name=cpu', 'host=~[ab]']]
    assert fetched == ['cpu;host=a', 'cpu;host=b']
    assert [s.name for s in result] == ['cpu;host=a', 'cpu;host=b']
    assert result[0].tags['host'] == 'a'
    assert result[0].pathExpression == "seriesByTag('name=cpu','host=~[ab]')"
    (summed,) = call('sumSeries', None, result)
    assert summed.name == "sumSeries(seriesByTag('name=cpu','host=~[ab]'))"
    assert dict(summed.tags) == {'name': 'cpu', 'aggregatedBy': 'sum'}
    assert call('seriesByTag', make_ctx(), 'name=cpu') == []


def test_events():
    ctx = make_ctx(end=START + 5)
    (result,) = call('events', ctx, '*')
    assert result.name == 'events("*")' and values(result) == [None] * 5
    seen = []

    def find(start, end, tags):
        seen.append((start, end, tags))
        return [START + 1, START + 1, START + 3]
    (result,) = call('events', make_ctx(end=START + 5, findEvents=find), 'deploy', 'web')
    assert values(result) == [None, 2, None, 1, None]
    assert seen == [(START, START + 5, ['deploy', 'web'])]
    assert result.name == 'events("deploy", "web")'


def test_pie_functions():
    series = ts('m', [2, None, 6, 1])
    assert PIE_FUNCTIONS.get('average').func({}, series) == 3.0
    assert PIE_FUNCTIONS.get('maximum').func({}, series) == 6
    assert PIE_FUNCTIONS.get('minimum').func({}, series) == 1
    assert PIE_FUNCTIONS.get('average').group == 'Pie'
