"""The target parser: graphite-web's grammar, strict about leftovers."""

from __future__ import annotations

import pytest

from webapp.render.grammar import (Call, Const, PathExpr, Template, TargetSyntaxError,
                                   iter_nodes, parse_target)


def test_paths_with_every_wildcard() -> None:
    for text in ['a.b.c', 'a.*.c', 'a.b?.c', 'a.[a-z]x.c', 'a.{b,c}.d', 'a.b{1,2}x*.c',
                 'servers.web-01.cpu_user', 'a.b;tag=v;x=y', 'a.b:c', 'a.b~c', 'a.b@c#d',
                 '_tagged.a.b', 'a.b=c', 'a.b$1', 'host.**.cpu']:
        node = parse_target(text)
        assert isinstance(node, PathExpr) and node.path == text


def test_escapes_are_removed() -> None:
    assert parse_target(r'a.b\(1\).c').path == 'a.b(1).c'
    assert parse_target(r'a.b\,c\=d').path == 'a.b,c=d'
    with pytest.raises(TargetSyntaxError):
        parse_target(r'a.\q')


def test_nested_calls_and_literals() -> None:
    node = parse_target("alias(scale(sumSeries(a.*, b.{x,y}), -1.5e3), 'total \"x\"')")
    assert isinstance(node, Call) and node.name == 'alias'
    inner = node.args[0]
    assert inner.name == 'scale' and inner.args[1].value == -1500.0
    assert inner.args[0].name == 'sumSeries'
    assert [a.path for a in inner.args[0].args] == ['a.*', 'b.{x,y}']
    assert node.args[1].value == 'total "x"'


@pytest.mark.parametrize('text, kind, value', [
    ('1', 'number', 1), ('-7', 'number', -7), ('2.5', 'number', 2.5), ('-0.25', 'number', -0.25),
    ('1e3', 'number', 1000.0), ('1.5E-2', 'number', 0.015), ('-2e2', 'number', -200.0),
    ('true', 'boolean', True), ('False', 'boolean', False), ('None', 'none', None),
    ('none', 'none', None), ('inf', 'infinity', float('inf')), ("'x'", 'string', 'x'),
    ('"y z"', 'string', 'y z'), ("'a,b)c'", 'string', 'a,b)c'),
])
def test_literal_arguments(text: str, kind: str, value: object) -> None:
    node = parse_target('f(%s)' % text)
    const = node.args[0]
    assert isinstance(const, Const) and const.kind == kind and const.value == value


def test_number_like_paths_stay_paths() -> None:
    node = parse_target('f(1min, 1.2.3, 5e, trueish, true.x)')
    assert [type(a) for a in node.args] == [PathExpr] * 5


def test_keyword_arguments() -> None:
    node = parse_target("f(a.b, 3, name = 'x', flag=false, n=2)")
    assert [a.value for a in node.args[1:]] == [3]
    assert [(k, v.value) for k, v in node.kwargs] == [('name', 'x'), ('flag', False), ('n', 2)]
    with pytest.raises(TargetSyntaxError, match='positional argument after keyword'):
        parse_target('f(x=1, a.b)')


def test_whitespace_is_allowed_between_tokens() -> None:
    node = parse_target('  sumSeries ( a.b ,  c.d )  ')
    assert node.name == 'sumSeries' and [a.path for a in node.args] == ['a.b', 'c.d']


def test_pipes_desugar_to_nested_calls() -> None:
    node = parse_target('a.b.* | sumSeries() | scale(2)|alias("t")')
    assert node.name == 'alias'
    assert node.args[0].name == 'scale' and node.args[0].args[1].value == 2
    assert node.args[0].args[0].name == 'sumSeries'
    assert node.args[0].args[0].args[0].path == 'a.b.*'


def test_templates() -> None:
    node = parse_target('template(a.$1.$2, "x", 3)')
    assert isinstance(node, Template) and node.expr.path == 'a.$1.$2'
    assert [a.value for a in node.args] == ['x', 3]
    node = parse_target('template(sumSeries(a.$host.*), host="web")')
    assert node.kwargs[0][0] == 'host' and node.expr.name == 'sumSeries'
    assert isinstance(parse_target('f(template(a.$x))').args[0], Template)
    for bad in ['template(a.b, c.d)', 'template(a.b, x=c.d)', 'template(a.b, 1, x=2)']:
        with pytest.raises(TargetSyntaxError, match='template'):
            parse_target(bad)


def test_series_by_tag_keeps_raw_text() -> None:
    node = parse_target("seriesByTag('name=cpu', 'dc=~us.*')")
    assert node.raw == "seriesByTag('name=cpu', 'dc=~us.*')"
    assert [a.value for a in node.args] == ['name=cpu', 'dc=~us.*']


@pytest.mark.parametrize('text, fragment', [
    ('', 'empty target'), ('f(a', 'expected'), ('f(a,)', 'position 4'), ('a..b', 'position 2'),
    ('f(a))', 'unexpected text'), ('a.b c', 'unexpected text'), ('a.{b', 'unclosed'),
    ('a.{b,}', 'empty alternative'), ("f('abc)", 'unterminated'), ('f(a) | b.c', 'function call'),
    ('(a)', 'expected a metric path'),
])
def test_syntax_errors_name_the_position(text: str, fragment: str) -> None:
    with pytest.raises(TargetSyntaxError, match=fragment.replace('(', r'\(')):
        parse_target(text)


def test_str_round_trip_and_walk() -> None:
    text = "sumSeries(a.b, scale(c.*, 2), alias(d, 'x'))"
    node = parse_target(text)
    assert str(node) == text
    assert str(parse_target(str(node.args[1]))) == 'scale(c.*, 2)'
    paths = [n.path for n in iter_nodes(node) if isinstance(n, PathExpr)]
    assert paths == ['a.b', 'c.*', 'd']


def test_deep_nesting_is_bounded() -> None:
    text = 'f(' * 50 + 'a' + ')' * 50
    assert parse_target(text).name == 'f'
