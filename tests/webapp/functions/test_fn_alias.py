"""Alias group: renaming."""

import pytest
from tests.webapp.functions.fnhelpers import FakeData, call, make_ctx, ts

from webapp.plugins import RENDER_FUNCTIONS
from webapp.render.errors import InputParameterError


def names(result):
    return [s.name for s in result]


def test_alias_sub_grafana_wrapper_backreference():
    # Grafana 11.6+ wraps targets as aliasSub(<target>, "(^.*$)", "\1 A")
    series = [ts('servers.web1.cpu', [1]), ts('sumSeries(a.*)', [2])]
    result = call('aliasSub', None, series, '(^.*$)', r'\1 A')
    assert names(result) == ['servers.web1.cpu A', 'sumSeries(a.*) A']


@pytest.mark.parametrize('search,replace,expected', [
    (r'^servers\.(\w+)\..*', r'\1', 'web1'),
    (r'servers\.(?P<host>\w+)', r'host=\g<host>', 'host=web1.cpu'),
    ('cpu', 'CPU', 'servers.web1.CPU'),
    ('nomatch', 'x', 'servers.web1.cpu'),
    (r'\.', '_', 'servers_web1_cpu'),
])
def test_alias_sub(search, replace, expected):
    (result,) = call('aliasSub', None, [ts('servers.web1.cpu', [1])], search, replace)
    assert result.name == expected


def test_alias_keeps_path_expression():
    series = ts('a.b', [1], pathExpression='a.*')
    (result,) = call('alias', None, [series], 'New Name')
    assert result.name == 'New Name' and result.pathExpression == 'a.*'
    (summed,) = call('sumSeries', None, [result])
    assert summed.name == 'sumSeries(a.*)'


@pytest.mark.parametrize('nodes,expected', [
    ([1], 'web1'),
    ([0, 2], 'servers.cpu'),
    ([-1], 'cpu'),
    ([-2, 'dc'], 'web1.eu'),
    (['missing'], ''),
])
def test_alias_by_node(nodes, expected):
    (result,) = call('aliasByNode', None, [ts('servers.web1.cpu;dc=eu', [1])], *nodes)
    assert result.name == expected


def test_alias_by_node_looks_inside_functions():
    (result,) = call('aliasByNode', None, [ts('scale(servers.web1.cpu,2)', [1])], 1)
    assert result.name == 'web1'
    (result,) = call('aliasByNode', None,
                     [ts('sumSeries(servers.{web1,web2}.cpu)', [1])], 2)
    assert result.name == 'cpu'


def test_alias_by_tags():
    (result,) = call('aliasByTags', None, [ts('disk.used;host=a;mount=/var', [1])],
                     'host', 'mount', 'name')
    assert result.name == 'a./var.disk.used'
    (result,) = call('aliasByTags', None, [ts('disk.used;host=a', [1])], 1)
    assert result.name == 'used'


@pytest.mark.parametrize('name,expected', [
    ('servers.web1.cpu', 'cpu'),
    ('scale(servers.web1.cpu,2)', 'cpu'),
    ('sumSeries(a.b.c,d.e.f)', 'f'),
    ('single', 'single'),
])
def test_alias_by_metric(name, expected):
    (result,) = call('aliasByMetric', None, [ts(name, [1])])
    assert result.name == expected


def test_alias_query():
    data = FakeData({'srv.a.latency': lambda t: 42, 'srv.b.latency': lambda t: None})
    ctx = make_ctx(data=data)
    (result,) = call('aliasQuery', ctx, [ts('srv.a.requests', [1])], 'requests', 'latency',
                     'latency %d ms')
    assert result.name == 'latency 42 ms'
    with pytest.raises(InputParameterError):
        call('aliasQuery', ctx, [ts('srv.b.requests', [1])], 'requests', 'latency', '%d')
    with pytest.raises(InputParameterError):
        call('aliasQuery', ctx, [ts('srv.c.requests', [1])], 'requests', 'latency', '%d')


def test_legend_value():
    (result,) = call('legendValue', None, [ts('m', [1, 2, None, 3])], 'avg', 'last')
    assert result.name == 'm (avg: 2.0) (last: 3)'
    (result,) = call('legendValue', None, [ts('m', [1500, 500])], 'max', 'si')
    assert result.name == '%-20s%-5s%-10s' % ('m', 'max', '1.50k')
    (result,) = call('legendValue', None, [ts('m', [2048])], 'last', 'binary')
    assert result.name == '%-20s%-5s%-10s' % ('m', 'last', '2.00Ki')
    with pytest.raises(InputParameterError):
        call('legendValue', None, [ts('m', [1])], 'bogus')
    # without enforced validation the unknown type is shown as '(?)'
    (result,) = RENDER_FUNCTIONS.get('legendValue').func(make_ctx(), [ts('m', [1])], 'bogus')
    assert result.name == 'm (bogus: (?))'


def test_upper_lower():
    assert names(call('upper', None, [ts('abc.def', [1])])) == ['ABC.DEF']
    assert names(call('upper', None, [ts('abc.def', [1])], 0, -1, 42)) == ['Abc.deF']
    assert names(call('lower', None, [ts('ABC', [1])])) == ['abc']
    assert names(call('lower', None, [ts('ABC', [1])], 1)) == ['AbC']
