"""Every numeric /render parameter with bad values, against the WSGI app: a 400 naming the
parameter (or a drawing, where the value is usable), never a 5xx with a traceback."""

from __future__ import annotations

import os
import time
from typing import Any, Iterator

import pytest

from tests.webapp.helpers import call, make_whisper
from webapp.app import make_app
from webapp.settings import make_settings

# The graph options that take numbers (graphite-web's names), and the render parameters
# that are not graph options.
GRAPH_NUMBERS = [
    'width', 'height', 'margin', 'fontSize', 'lineWidth', 'thickness', 'leftWidth',
    'rightWidth', 'minXStep', 'areaAlpha', 'connectedLimit', 'minorY', 'legendMaxItems',
    'valueLabelsMin', 'logBase', 'min', 'max', 'yMin', 'yMax', 'yMinLeft', 'yMinRight',
    'yMaxLeft', 'yMaxRight', 'yLimit', 'yLimitLeft', 'yLimitRight', 'yStep', 'yStepLeft',
    'yStepRight', 'yDivisors',
]
REQUEST_NUMBERS = ['maxDataPoints', 'cacheTimeout', 'maxStep', 'xFilesFactor', 'from',
                   'until', 'now']
BAD = ['abc', '', 'nan', 'inf', '-inf', '-5', '0', '1e-300', '1e308', '99999999999999999999',
       'true', '1,2']
# Values no numeric graph option can use: these must be a 400 naming the parameter.
NEVER_DRAWN = ['abc', 'nan', 'inf', '-inf', '1e308', 'true']
# The line graph with a left and a right axis, a log axis, a pie, and the data formats.
VARIANTS: list[dict[str, Any]] = [
    {'target': ['a.b', 'secondYAxis(a.b)']},
    {'target': 'a.b', 'logBase': '10'},
    {'target': ['a:3', 'b:4'], 'graphType': 'pie'},
    {'target': 'a.b', 'format': 'json'},
]


@pytest.fixture(scope='module')
def app(tmp_path_factory: Any) -> Iterator[Any]:
    tmp = tmp_path_factory.mktemp('badparams')
    now = int(time.time())
    whisper_dir = os.path.join(str(tmp), 'whisper')
    make_whisper(whisper_dir, 'a.b', [(now - 60 * i, float(i)) for i in range(30)])
    application = make_app(make_settings(STORAGE_DIR=str(tmp), WHISPER_DIR=whisper_dir,
                                         CARBONLINK_HOSTS=[]))
    yield application
    application.close()


def render(app: Any, variant: dict[str, Any], key: str, value: str) -> tuple[int, str]:
    params = dict(variant, **{'from': '-1h'})
    params[key] = value
    status, _headers, body = call(app, '/render', params)
    return status, body.decode('utf-8', 'replace')


PIE_NUMBERS = ('width', 'height', 'margin', 'fontSize', 'valueLabelsMin')


@pytest.mark.parametrize('key', GRAPH_NUMBERS + REQUEST_NUMBERS)
def test_no_bad_value_gives_a_server_error(app, key):
    """No 5xx for any value; a 400 names the parameter; a graph option that is no usable
    number is a 400 wherever it is drawn (json ignores graph options, as graphite-web)."""
    failures = []
    for variant in VARIANTS:
        drawn = key in GRAPH_NUMBERS and variant.get('format') != 'json' and (
            variant.get('graphType') != 'pie' or key in PIE_NUMBERS)
        for value in BAD:
            status, body = render(app, variant, key, value)
            if status >= 500 or 'Traceback' in body:
                failures.append('%s=%r %r: %d %s' % (key, value, variant, status, body[:300]))
            elif status == 400 and key not in body:
                failures.append('%s=%r %r: 400 without the name: %s' % (key, value, variant,
                                                                       body[:300]))
            elif drawn and value in NEVER_DRAWN and not (
                    status == 400 and body.startswith('Invalid parameters (')):
                failures.append('%s=%r %r: %d, not a 400: %s' % (key, value, variant, status,
                                                                 body[:100]))
    assert failures == []


def test_width_abc_is_a_400_naming_width(app):
    status, body = render(app, VARIANTS[0], 'width', 'abc')
    assert (status, body) == (400, "Invalid parameters (width must be a number, got 'abc')")


@pytest.mark.parametrize('params,needle', [
    ({'yMin': '10', 'yMax': '5'}, 'less than'),            # both ends fixed, the wrong way
    ({'yMax': '1e-300'}, 'too narrow'),                     # data 0..29 under a tiny top
    ({'width': '8192', 'height': '8192'}, 'pixels'),        # each side fine, the area not
    ({'maxDataPoints': '0', 'format': 'json'}, 'maxDataPoints'),
    ({'cacheTimeout': '99999999999999999999'}, 'cacheTimeout'),
    ({'xFilesFactor': 'abc', 'format': 'json'}, 'xFilesFactor'),
])
def test_combinations_that_cannot_be_drawn_are_400s(app, params, needle):
    status, _headers, body = call(app, '/render', dict({'target': 'a.b', 'from': '-1h'},
                                                       **params))
    assert status == 400 and needle in body.decode(), (status, body[:300])


def test_usable_values_still_draw(app):
    for params in ({'width': '800', 'height': '600'}, {'yMin': '-5', 'yMax': 'max'},
                   {'logBase': 'e'}, {'yDivisors': '3,7'}, {'width': '1.5e2'},
                   {'areaAlpha': '0.5', 'areaMode': 'all'}, {'yStep': '2.5'}):
        status, headers, body = call(app, '/render', dict({'target': 'a.b', 'from': '-1h'},
                                                           **params))
        assert status == 200 and body[:8] == b'\x89PNG\r\n\x1a\n', (params, status, body[:200])


@pytest.mark.parametrize('path', ['/tags/autoComplete/tags', '/tags'])
def test_tag_limits_beyond_sqlite_integers_are_no_limit(app, path):
    status, _headers, body = call(app, path, {'limit': '99999999999999999999'})
    assert status == 200, body[:300]
