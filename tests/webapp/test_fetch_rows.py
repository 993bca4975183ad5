"""Per-series shortcuts of a wildcard's fetch give what the general code gives.

``PackedSeries.fetched`` (series built by copying the first one's attributes) against
the constructor, and ``_group_by``'s integer-node keys against ``agg_key``.
"""

from __future__ import annotations

from webapp.functions.common import agg_key
from webapp.functions.grouping import _group_by
from webapp.render.series import PackedSeries, TimeSeries

NAMES = ['a.b.c', 'a.x.c;dc=east;role=db', 'b.b', 'sumSeries(a.b.c)', 'm_total{job="x"}',
         'a.b.c.d.e', '', 'scale(a.q.c,2)']


def test_fetched_series_are_the_constructors() -> None:
    rows = [(name, (10 * i, 10 * i + 60, 10), object()) for i, name in enumerate(NAMES)]
    for xff, expression in ((None, 'a.*.c'), (0.5, '')):
        got = PackedSeries.fetched(rows, xff, expression)
        assert len(got) == len(rows)
        for series, (name, (start, end, step), values) in zip(got, rows, strict=True):
            made = PackedSeries(name, start, end, step, values, xFilesFactor=xff,
                                pathExpression=expression)
            assert type(series) is PackedSeries and vars(series) == vars(made)
            assert series.tags == made.tags and type(series.tags) is type(made.tags)
            assert list.__len__(series) == 0
        assert len({id(s.options) for s in got}) == len(got)      # not shared
        assert len({id(s.tags) for s in got}) == len(got)
    assert PackedSeries.fetched([], None, 'x') == []


def test_group_by_integer_nodes_is_agg_key() -> None:
    series = [TimeSeries(name, 0, 60, 10, [1.0] * 6) for name in NAMES]
    series[0].tags['3'] = 'tagged'          # a node past the name's end reads the tag
    for nodes in ((0,), (1,), (-1,), (0, 2), (3,), (4, -2), (1, 'dc')):
        expected: dict[str, list] = {}
        for one in series:
            expected.setdefault(agg_key(one, nodes), []).append(one)
        got = _group_by(series, nodes)
        assert list(got) == list(expected)
        assert all([id(s) for s in got[k]] == [id(s) for s in expected[k]] for k in got)
