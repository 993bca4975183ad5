"""/functions descriptions: Grafana shows them as each function's help, so each one says what
the function does, names every parameter and carries an example target that parses."""

from __future__ import annotations

import inspect
import json
import re
import statistics
from typing import Any
from urllib.parse import unquote

import pytest

from webapp.functions.registry import PIE_FUNCTIONS
from webapp.plugins import RENDER_FUNCTIONS
from webapp.render.grammar import Call, iter_nodes, parse_target
from tests.webapp.helpers import call
from tests.webapp.reference_functions import load, shape

MIN_LENGTH = 200        # every description; the one-liners were 20 to 140 characters
MEDIAN_FLOOR = 400      # the median was 64 characters (65 over the series functions)


def _answers(app: Any) -> list[tuple[str, dict]]:
    """(kind, entry) for every function /functions lists, series and pie ones."""
    out = []
    for kind, params in (('series', {}), ('pie', {'type': 'pie'})):
        status, _, body = call(app, '/functions', params)
        assert status == 200
        out += [(kind, info) for info in json.loads(body).values()]
    return out


def _example(description: str) -> str:
    """The text of the description's example block (RST, as Grafana renders it)."""
    head, sep, tail = description.partition('Example:')
    assert sep, 'no "Example:" section'
    assert '.. code-block:: none' in tail
    return tail


def _targets(example: str) -> list[str]:
    """The ``&target=`` values of an example (URL parameters after them cut off)."""
    found = []
    for line in example.splitlines():
        for piece in line.strip().split('&'):
            if piece.startswith('target='):
                found.append(unquote(piece[len('target='):]))
    return found


def test_every_description_is_full(app: Any) -> None:
    answers = _answers(app)
    assert len(answers) == len(RENDER_FUNCTIONS.names()) + len(PIE_FUNCTIONS.names())
    problems = []
    for kind, info in answers:
        name, text = info['name'], info['description']
        if len(text) < MIN_LENGTH:
            problems.append('%s: %d characters' % (name, len(text)))
        if 'Parameters:' not in text:
            problems.append('%s: no Parameters section' % name)
        for param in info['params']:
            if '``%s``' % param['name'] not in text:
                problems.append('%s: parameter %s not described' % (name, param['name']))
        example = _example(text)
        targets = _targets(example)
        if not targets:
            problems.append('%s: no &target= in its example' % name)
        if kind == 'pie':
            if 'pieMode=%s' % name not in example:
                problems.append('%s: example does not choose pieMode=%s' % (name, name))
            continue
        called = set()
        for target in targets:
            called |= {node.name for node in iter_nodes(parse_target(target))
                       if isinstance(node, Call)}
        if name not in called:
            problems.append('%s: no example calls %s(...) (calls: %s)'
                            % (name, name, sorted(called)))
    assert not problems, '\n'.join(problems)


def test_median_length_went_up(app: Any) -> None:
    lengths = [len(info['description']) for _, info in _answers(app)]
    assert statistics.median(lengths) >= MEDIAN_FLOOR, statistics.median(lengths)


def test_description_lives_with_the_declaration() -> None:
    """One home: /functions reads the function's own docstring, nothing else."""
    for registry in (RENDER_FUNCTIONS, PIE_FUNCTIONS):
        for name in registry.names():
            fn = registry.get(name)
            from webapp.functions.registry import function_info
            assert function_info(fn)['description'] == inspect.getdoc(fn.func), name


def test_descriptions_are_our_own_rst() -> None:
    """Plain RST Grafana's rst2html renders: no graphite-web signature lines or Sphinx roles."""
    for name in RENDER_FUNCTIONS.names():
        text = inspect.getdoc(RENDER_FUNCTIONS.get(name).func)
        assert not re.search(r':py:func:|:ref:|\.\. versionadded', text), name
        assert not text.startswith(name + '('), name


def test_pretty_list_and_details_answer(app: Any) -> None:
    status, headers, body = call(app, '/functions', {'pretty': '1'})
    assert status == 200 and headers['Content-Type'] == 'application/json'
    assert body.startswith(b'{\n  "absolute": {\n    "description": ')
    data = json.loads(body)
    assert set(data) == set(RENDER_FUNCTIONS.names())
    status, _, one = call(app, '/functions/movingAverage', {'pretty': '1'})
    assert status == 200
    info = json.loads(one)
    assert info == data['movingAverage']
    assert set(info) == {'name', 'function', 'description', 'module', 'group', 'params'}
    assert info['function'] == 'movingAverage(seriesList, windowSize, xFilesFactor=None)'
    assert [p['name'] for p in info['params']] == ['seriesList', 'windowSize', 'xFilesFactor']
    assert '&target=movingAverage(' in info['description']


@pytest.mark.parametrize('name', ['avg', 'pct', 'map', 'reduce', 'xFilesFactor', 'time', 'sin',
                                  'randomWalk', 'sum'])
def test_alias_examples_show_the_short_name(app: Any, name: str) -> None:
    info = json.loads(call(app, '/functions/%s' % name)[2])
    assert info['name'] == name
    assert re.search(r'&target=(\w+\()*%s\(' % name, info['description'])


def test_shape_is_graphite_webs(app: Any) -> None:
    """Everything but the description text (and the module path) is what graphite-web
    1.1.10 answers: names, signatures, groups, every param's name, type, required, default,
    options, multiple and suggestions (tests/data/graphite-web-functions.json)."""
    recorded = load()
    for kind, params in (('series', {}), ('pie', {'type': 'pie'})):
        ours = json.loads(call(app, '/functions', params)[2])
        assert shape(ours) == recorded[kind], kind
