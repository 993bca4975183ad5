"""Graphite's target language, parsed by hand (no pyparsing).

The accepted language is graphite-web 1.1.10's grammar: path expressions with
wildcards (``*``, ``?``, ``[a-z]``, ``{a,b}``), backslash escapes and tags
(``a.b;tag=v``); function calls with positional then keyword arguments; numbers
(int, float, scientific, negative), strings in either quote, booleans, ``None``,
``inf``; ``template(expr, ...)`` with literal arguments; and pipes
(``a.b | sumSeries()``, desugared to nested calls). Unlike graphite-web, text left
over after a complete expression is an error instead of being silently ignored.
"""

from __future__ import annotations

import re
from typing import Any, Iterator, Union

_SYMBOLS = set('(){},.\'"\\|')
_ESCAPABLE = _SYMBOLS | {'='}
_IDENT = re.compile(r'[A-Za-z_][A-Za-z0-9_]*')
_NUMBER = re.compile(r'-?\d+(?:\.\d+)?(?:[eE]-?\d+)?')
_STRING = {
    '"': re.compile(r'"(?:[^"\n\r\\]|(?:"")|(?:\\(?:[^x]|x[0-9a-fA-F]+)))*"'),
    "'": re.compile(r"'(?:[^'\n\r\\]|(?:'')|(?:\\(?:[^x]|x[0-9a-fA-F]+)))*'"),
}
_KEYWORDS = {'true': ('boolean', True), 'false': ('boolean', False),
             'none': ('none', None), 'inf': ('infinity', float('inf'))}


class TargetSyntaxError(ValueError):
    """A target that is not valid graphite syntax; the message names the position."""


class Node:
    """Base of the syntax tree; ``str(node)`` gives back target text."""

    __slots__ = ()


class PathExpr(Node):
    """A metric path or pattern (``servers.*.cpu``), backslash escapes removed."""

    __slots__ = ('path',)

    def __init__(self, path: str) -> None:
        self.path = path

    def __str__(self) -> str:
        return self.path

    def __repr__(self) -> str:
        return 'PathExpr(%r)' % self.path


class Const(Node):
    """A literal argument: kind is number, string, boolean, none or infinity."""

    __slots__ = ('kind', 'value', 'text')

    def __init__(self, kind: str, value: Any, text: str) -> None:
        self.kind = kind
        self.value = value
        self.text = text

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return 'Const(%s, %r)' % (self.kind, self.value)


class Call(Node):
    """``name(args..., key=value...)``; ``raw`` is the call's exact source text."""

    __slots__ = ('name', 'args', 'kwargs', 'raw')

    def __init__(self, name: str, args: list[Node], kwargs: list[tuple[str, Node]],
                 raw: str = '') -> None:
        self.name = name
        self.args = args
        self.kwargs = kwargs
        self.raw = raw or self._text()

    def _text(self) -> str:
        parts = [str(a) for a in self.args] + ['%s=%s' % (k, v) for k, v in self.kwargs]
        return '%s(%s)' % (self.name, ','.join(parts))

    def __str__(self) -> str:
        return self.raw

    def __repr__(self) -> str:
        return 'Call(%s, %r, %r)' % (self.name, self.args, self.kwargs)


class Template(Node):
    """``template(expr, 'a', 2)`` or ``template(expr, name='a')``."""

    __slots__ = ('expr', 'args', 'kwargs', 'raw')

    def __init__(self, expr: Node, args: list[Const], kwargs: list[tuple[str, Const]],
                 raw: str) -> None:
        self.expr = expr
        self.args = args
        self.kwargs = kwargs
        self.raw = raw

    def __str__(self) -> str:
        return self.raw

    def __repr__(self) -> str:
        return 'Template(%r, %r, %r)' % (self.expr, self.args, self.kwargs)


Expression = Union[PathExpr, Call, Template]


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.n = len(text)

    def error(self, message: str, pos: int | None = None) -> TargetSyntaxError:
        pos = self.pos if pos is None else pos
        found = repr(self.text[pos]) if pos < self.n else 'end of target'
        return TargetSyntaxError('%s at position %d (found %s) in target %r'
                                 % (message, pos, found, self.text))

    def ws(self) -> None:
        text, pos, n = self.text, self.pos, self.n
        while pos < n and text[pos].isspace():
            pos += 1
        self.pos = pos

    def peek(self) -> str:
        return self.text[self.pos] if self.pos < self.n else ''

    def expect(self, ch: str, what: str) -> None:
        self.ws()
        if self.peek() != ch:
            raise self.error('expected %s' % what)
        self.pos += 1

    # expression := (template | call | path) ('|' call)*
    def expression(self) -> Expression:
        self.ws()
        node = self.primary_expression()
        while True:
            save = self.pos
            self.ws()
            if self.peek() != '|':
                self.pos = save
                return node
            self.pos += 1
            self.ws()
            start = self.pos
            m = _IDENT.match(self.text, self.pos)
            if not m:
                raise self.error('expected a function call after "|"')
            self.pos = m.end()
            self.ws()
            if self.peek() != '(':
                raise self.error('expected a function call after "|"', start)
            piped = self.call(m.group(), start)
            if isinstance(piped, Template):
                raise self.error('template() cannot be piped into', start)
            piped.args.insert(0, node)
            node = piped

    def primary_expression(self) -> Expression:
        start = self.pos
        m = _IDENT.match(self.text, start)
        if m:
            save = self.pos
            self.pos = m.end()
            self.ws()
            if self.peek() == '(':
                return self.call(m.group(), start)
            self.pos = save
        return self.path()

    def call(self, name: str, start: int) -> Call | Template:
        self.pos += 1  # '('
        if name == 'template':
            return self.template(start)
        args: list[Node] = []
        kwargs: list[tuple[str, Node]] = []
        self.ws()
        if self.peek() == ')':
            self.pos += 1
            return Call(name, args, kwargs, self.text[start:self.pos])
        while True:
            self.ws()
            key = self.kwarg_name()
            if key is not None:
                kwargs.append((key, self.argument()))
            elif kwargs:
                raise self.error('positional argument after keyword argument')
            else:
                args.append(self.argument())
            self.ws()
            ch = self.peek()
            if ch == ',':
                self.pos += 1
                continue
            if ch == ')':
                self.pos += 1
                return Call(name, args, kwargs, self.text[start:self.pos])
            raise self.error('expected "," or ")" in call to %s()' % name)

    def kwarg_name(self) -> str | None:
        m = _IDENT.match(self.text, self.pos)
        if not m:
            return None
        pos = m.end()
        while pos < self.n and self.text[pos].isspace():
            pos += 1
        if pos < self.n and self.text[pos] == '=':
            self.pos = pos + 1
            return m.group()
        return None

    def template(self, start: int) -> Template:
        self.ws()
        inner = self.primary_expression()
        if isinstance(inner, Template):
            raise self.error('invalid template() syntax, nested template')
        args: list[Const] = []
        kwargs: list[tuple[str, Const]] = []
        while True:
            self.ws()
            ch = self.peek()
            if ch == ')':
                self.pos += 1
                return Template(inner, args, kwargs, self.text[start:self.pos])
            if ch != ',':
                raise self.error('expected "," or ")" in template()')
            self.pos += 1
            self.ws()
            key = self.kwarg_name()
            self.ws()
            value = self.literal()
            if value is None or value.kind not in ('number', 'string') or \
                    (key is None and kwargs) or (key is not None and args):
                raise TargetSyntaxError('invalid template() syntax, only string/numeric '
                                        'arguments are allowed (target %r)' % self.text)
            if key is None:
                args.append(value)
            else:
                kwargs.append((key, value))

    def literal(self) -> Const | None:
        """A number, string, boolean, None or inf at the cursor, if one is there."""
        text, pos = self.text, self.pos
        ch = self.peek()
        if ch in _STRING:
            m = _STRING[ch].match(text, pos)
            if not m:
                raise self.error('unterminated string')
            self.pos = m.end()
            return Const('string', m.group()[1:-1], m.group())
        m = _IDENT.match(text, pos)
        if m and m.group().lower() in _KEYWORDS:
            end = m.end()
            if end >= self.n or text[end].isspace() or text[end] in ',)|':
                kind, value = _KEYWORDS[m.group().lower()]
                self.pos = end
                return Const(kind, value, m.group())
            return None
        m = _NUMBER.match(text, pos)
        if m:
            end = m.end()
            while end < self.n and text[end].isspace():
                end += 1
            if end >= self.n or text[end] in ',)\n':
                raw = m.group()
                self.pos = m.end()
                if 'e' in raw or 'E' in raw or '.' in raw:
                    return Const('number', float(raw), raw)
                return Const('number', int(raw), raw)
        return None

    def argument(self) -> Node:
        self.ws()
        lit = self.literal()
        if lit is not None:
            return lit
        return self.expression()

    # path := element ('.' element)*
    def path(self) -> PathExpr:
        parts: list[str] = []
        start = self.pos
        while True:
            element = self.path_element()
            if not element:
                if not parts and start >= self.n:
                    raise self.error('empty target')
                raise self.error('expected a metric path or function call')
            parts.append(element)
            if self.peek() == '.':
                self.pos += 1
                continue
            return PathExpr('.'.join(parts))

    def path_element(self) -> str:
        out: list[str] = []
        while True:
            ch = self.peek()
            if ch == '{':
                out.append(self.brace_group())
                continue
            piece = self.partial()
            if not piece:
                return ''.join(out)
            out.append(piece)

    def partial(self) -> str:
        text, pos, n = self.text, self.pos, self.n
        out: list[str] = []
        while pos < n:
            ch = text[pos]
            if ch == '\\':
                if pos + 1 < n and text[pos + 1] in _ESCAPABLE:
                    out.append(text[pos + 1])
                    pos += 2
                    continue
                self.pos = pos
                raise self.error('invalid escape')
            if ch in _SYMBOLS or ch.isspace():
                break
            out.append(ch)
            pos += 1
        self.pos = pos
        return ''.join(out)

    def brace_group(self) -> str:
        start = self.pos
        self.pos += 1
        alternatives = []
        while True:
            alt = self.partial()
            if not alt:
                raise self.error('empty alternative in {...}', self.pos)
            alternatives.append(alt)
            ch = self.peek()
            if ch == ',':
                self.pos += 1
                continue
            if ch == '}':
                self.pos += 1
                return '{' + ','.join(alternatives) + '}'
            raise self.error('unclosed "{" opened at position %d' % start)


def parse_target(text: str) -> Expression:
    """The syntax tree of one target; TargetSyntaxError when it is not valid graphite syntax."""
    parser = _Parser(text)
    node = parser.expression()
    parser.ws()
    if parser.pos != parser.n:
        raise parser.error('unexpected text after expression')
    return node


def iter_nodes(node: Node) -> Iterator[Node]:
    """Every node under ``node`` (inclusive), depth first."""
    yield node
    if isinstance(node, Call):
        for arg in node.args:
            yield from iter_nodes(arg)
        for _, arg in node.kwargs:
            yield from iter_nodes(arg)
    elif isinstance(node, Template):
        yield from iter_nodes(node.expr)
