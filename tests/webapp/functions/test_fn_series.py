"""TimeSeries behaviour: consolidation, datapoints, tags, copy."""

import pytest

from carbon.tags import format_tags
from webapp.render.series import TimeSeries, parse_tags


def make(values, func='average', xff=None):
    return TimeSeries('a.b', 100, 100 + 10 * len(values), 10, values, consolidate=func,
                      xFilesFactor=xff)


@pytest.mark.parametrize('func,expected', [
    ('average', [1.5, 4.0, 6.0]),
    ('sum', [3, 8, 6]),
    ('max', [2, 5, 6]),
    ('min', [1, 3, 6]),
    ('first', [1, 3, 6]),
    ('last', [2, 5, 6]),
    ('avg_zero', [1.0, 8 / 3, 2.0]),
])
def test_consolidation_functions(func, expected):
    # buckets of 3: [1, 2, None] [3, 5, None] [6, None, None]
    s = make([1, 2, None, 3, 5, None, 6, None, None], func)
    s.consolidate(3)
    assert list(s) == pytest.approx(expected)


def test_raw_values_unchanged_by_consolidation():
    s = make([1, 2, 3, 4])
    s.consolidate(2)
    assert list(s) == [1.5, 3.5]
    assert s[0] == 1 and len(s) == 4
    assert list.__iter__(s) is not None and list(list.__iter__(s)) == [1, 2, 3, 4]


def test_xfilesfactor_applies_per_bucket():
    s = make([1, None, None, None, 2, 3, None, None], xff=0.5)
    s.consolidate(4)
    # bucket 1 has 1/4 known (< 0.5) -> None; bucket 2 has 2/4 -> average
    assert list(s) == [None, 2.5]


def test_partial_last_bucket_uses_full_bucket_size_for_xff():
    s = make([4, 4, 4, 8], xff=0.5)
    s.consolidate(3)
    # last bucket has 1 value of a 3-wide bucket: 1/3 < 0.5
    assert list(s) == [4.0, None]


def test_datapoints_use_consolidated_step():
    s = make([1, 2, 3, 4, 5])
    assert s.datapoints() == [[1, 100], [2, 110], [3, 120], [4, 130], [5, 140]]
    s.consolidate(2)
    assert s.datapoints() == [[1.5, 100], [3.5, 120], [5.0, 140]]


def test_get_info():
    s = make([1, 2])
    info = s.getInfo()
    assert info['name'] == 'a.b' and info['values'] == [1, 2] and info['step'] == 10
    assert info['pathExpression'] == 'a.b' and info['consolidationFunc'] == 'average'
    assert info['valuesPerPoint'] == 1 and info['xFilesFactor'] == 0


def test_invalid_consolidation_function():
    s = make([1, 2], func='bogus')
    s.consolidate(2)
    with pytest.raises(ValueError):
        list(s)


@pytest.mark.parametrize('name,tags', [
    ('a.b.c', {'name': 'a.b.c'}),
    ('cpu.load;host=web1;dc=eu', {'name': 'cpu.load', 'host': 'web1', 'dc': 'eu'}),
    ('sumSeries(a;b=c)', {'name': 'sumSeries(a;b=c)'}),
    ('bad;tag', {'name': 'bad;tag'}),
    ('http_total{code="200",path="/a,b"}', {'name': 'http_total', 'code': '200',
                                            'path': '/a,b'}),
])
def test_tag_parsing(name, tags):
    assert dict(TimeSeries(name, 0, 1, 1, []).tags) == tags


def test_tags_are_strings_and_explicit_tags_win():
    s = TimeSeries('a;x=1', 0, 1, 1, [], tags={'name': 'z', 'n': 5})
    assert dict(s.tags) == {'name': 'z', 'n': '5'}
    s.tags['k'] = 1.5
    assert s.tags['k'] == '1.5'


def test_parse_tags_reads_what_carbon_formats():
    assert format_tags({'name': 'm', 'z': '1', 'a': '2'}) == 'm;a=2;z=1'
    assert parse_tags(format_tags({'name': 'm', 'b': 'x'})) == {'name': 'm', 'b': 'x'}


def test_copy_replaces_fields_and_resets_path_expression():
    s = TimeSeries('a.b', 0, 30, 10, [1, 2, 3], pathExpression='a.*')
    s.options['stacked'] = True
    c = s.copy(name='f(a.b)', values=[4, 5, 6])
    assert (c.name, c.pathExpression, list(c), c.start, c.step) == \
        ('f(a.b)', 'f(a.b)', [4, 5, 6], 0, 10)
    assert c.options == {} and c.tags is s.tags
    assert list(s) == [1, 2, 3]


def test_equality_considers_name_and_values():
    assert make([1, 2]) == make([1, 2])
    assert make([1, 2]) != make([1, 3])
    other = make([1, 2])
    other.name = 'x'
    assert make([1, 2]) != other
