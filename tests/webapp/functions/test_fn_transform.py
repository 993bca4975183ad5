"""Transform group: point-by-point maths."""

import math

import pytest
from tests.webapp.functions.fnhelpers import call, ts, values


def one(name, vals, fn, *args):
    (result,) = call(fn, None, [ts(name, vals)], *args)
    return result


@pytest.mark.parametrize('fn,args,vals,expected,name', [
    ('scale', [2], [1, None, -3], [2.0, None, -6.0], 'scale(m,2)'),
    ('scale', [0.5], [4], [2.0], 'scale(m,0.5)'),
    ('offset', [-1.5], [1, None], [-0.5, None], 'offset(m,-1.5)'),
    ('add', [2.7], [1, None], [3.7, None], 'add(m,2)'),
    ('absolute', [], [-1, None, 2], [1, None, 2], 'absolute(m)'),
    ('invert', [], [4, 0, None], [0.25, None, None], 'invert(m)'),
    ('squareRoot', [], [9, -1, None], [3.0, None, None], 'squareRoot(m)'),
    ('pow', [2], [3, None, -2], [9.0, None, 4.0], 'pow(m,2)'),
    ('isNonNull', [], [5, None, 0], [1, 0, 1], 'isNonNull(m)'),
    ('log', [10], [100, 0, -1, None], [2.0, None, None, None], 'log(m, 10)'),
    ('log', [2], [8], [3.0], 'log(m, 2)'),
    ('round', [], [1.4, 2.6, None], [1, 3, None], 'round(m)'),
    ('round', [1], [1.44], [1.4], 'round(m,1)'),
    ('round', [-1], [155], [160], 'round(m,-1)'),
    ('offsetToZero', [], [3, 5, None, 4], [0, 2, None, 1], 'offsetToZero(m)'),
    ('minMax', [], [2, 4, None, 6], [0.0, 0.5, None, 1.0], 'minMax(m)'),
    ('minMax', [], [3, 3], [0.0, 0.0], 'minMax(m)'),
    ('transformNull', [], [None, 1], [0, 1], 'transformNull(m,0)'),
    ('transformNull', [-1.5], [None, 1], [-1.5, 1], 'transformNull(m,-1.5)'),
])
def test_pointwise(fn, args, vals, expected, name):
    result = one('m', vals, fn, *args)
    assert values(result) == pytest.approx(expected) if None not in expected \
        else values(result) == expected
    assert result.name == name
    assert result.pathExpression == name or fn == 'log'


def test_exp_sigmoid_logit():
    assert values(one('m', [0, 1, None], 'exp')) == [1.0, math.e, None]
    assert values(one('m', [0, None], 'sigmoid')) == [0.5, None]
    assert values(one('m', [0.5, 1, None], 'logit')) == [0.0, None, None]
    assert one('m', [1], 'exp').tags['exp'] == 'e'


def test_scale_to_seconds():
    result = one('m', [60, None, 30], 'scaleToSeconds', 1)
    assert values(result) == [1.0, None, 0.5]
    assert result.name == 'scaleToSeconds(m,1)'


def test_transform_null_with_reference():
    (result,) = call('transformNull', None, [ts('m', [None, None, 3])], 0,
                     [ts('r1', [None, 1, None]), ts('r2', [None, None, None])])
    assert values(result) == [None, 0, 3]
    assert result.name == 'transformNull(m,0,referenceSeries)'


@pytest.mark.parametrize('limit,expected', [
    (None, [None, 1, 1, 1, 4, 4]),
    (1, [None, 1, None, None, 4, 4]),
    (2, [None, 1, 1, 1, 4, 4]),
])
def test_keep_last_value(limit, expected):
    args = [] if limit is None else [limit]
    result = one('m', [None, 1, None, None, 4, None], 'keepLastValue', *args)
    assert values(result) == expected
    assert result.name == 'keepLastValue(m)'


def test_keep_last_value_infinite_limit_string():
    result = one('m', [2, None], 'keepLastValue', float('inf'))
    assert values(result) == [2, 2]


def test_interpolate():
    result = one('m', [None, 1, None, None, 4, None], 'interpolate')
    assert values(result) == [None, 1, 2.0, 3.0, 4, None]
    assert result.name == 'interpolate(m)'
    assert values(one('m', [0, None, None, 3], 'interpolate', 1)) == [0, None, None, 3]


def test_derivative_family():
    counter = [1, 3, None, 6, 2, 5]
    assert values(one('m', counter, 'derivative')) == [None, 2, None, None, -4, 3]
    assert one('m', counter, 'derivative').name == 'derivative(m)'
    assert values(one('m', counter, 'nonNegativeDerivative')) == [None, 2, None, None, None, 3]
    # wrap at maxValue 9: 2 - 6 + 9 + 1 = 6
    assert values(one('m', counter, 'nonNegativeDerivative', 9)) == \
        [None, 2, None, None, 6, 3]
    # above maxValue is dropped and resets the previous value
    assert values(one('m', [1, 20, 3, 4], 'nonNegativeDerivative', 9)) == \
        [None, None, None, 1]
    # with only minValue: val - minValue
    assert values(one('m', [5, 2], 'nonNegativeDerivative', None, 1)) == [None, 1]


def test_per_second():
    result = one('m', [0, 60, 120, 90, None, 150], 'perSecond')
    # step 60s
    assert values(result) == [None, 1.0, 1.0, None, None, None]
    assert result.name == 'perSecond(m)'
    # wrap: 119 + 1 + 10 - 100 = 30 per 60s
    assert values(one('m', [100, 10], 'perSecond', 119)) == [None, 0.5]


def test_integral_and_delay():
    assert values(one('m', [1, None, 2, 3], 'integral')) == [1.0, None, 3.0, 6.0]
    result = one('m', [1, 2, 3, 4], 'delay', 1)
    assert values(result) == [None, 1, 2, 3] and result.name == 'delay(m,1)'
    assert values(one('m', [1, 2, 3, 4], 'delay', -2)) == [3, 4, None, None]
    assert values(one('m', [1, 2], 'delay', 5)) == [None, None]


def test_changed():
    result = one('m', [None, 1, 1, None, 2, 2, 3], 'changed')
    assert values(result) == [0, 0, 0, 0, 1, 0, 1]
    assert result.name == 'changed(m)'


def test_tags_record_transform():
    result = one('a.b', [1], 'scale', 3)
    assert dict(result.tags) == {'name': 'a.b', 'scale': '3.0'}
    result = one('a.b', [1], 'derivative')
    assert result.tags['derivative'] == '1' and result.tags['name'] == 'a.b'


def test_nested_names():
    (result,) = call('scale', None, call('derivative', None, [ts('a.b', [1, 2])]), 10)
    assert result.name == 'scale(derivative(a.b),10)'
