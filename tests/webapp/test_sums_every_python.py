"""The render app adds as graphite-web 1.1.10 does (left to right from 0) on every Python,
also on 3.12+ where builtin ``sum()`` is compensated (webapp/pysum.py, docs/webapp.md
"Sums"): the Python functions, the numpy paths and the C file sums agree; the C and numpy
compensated mode (kept, unused) equals 3.12's ``sum()``."""

from __future__ import annotations

import json
import sys
from typing import Any

import numpy as np
import pytest
from hypothesis import example, given, settings, strategies as st

from tests.webapp.helpers import aligned_now, call, make_whisper
from tests.webapp.json_oracle import plain_sum
from webapp import pysum
from webapp.app import make_app
from webapp.storage import packed, whisper_read

# 1e16 + 1.0 rounds back to 1e16: left to right gives 0.0, 3.12's sum() 1.0
CANCELLING = [1e16, 1.0, -1e16]
floats = st.lists(st.floats(allow_nan=False, allow_infinity=False, width=64), max_size=40)


def neumaier(values: list) -> float:
    """Python 3.12's sum() of floats, written out: total and correction, the correction
    added at the end where it is non-zero and finite."""
    total, correction = 0.0, 0.0
    for x in values:
        summed = total + x
        correction += (total - summed) + x if abs(total) >= abs(x) else (x - summed) + total
        total = summed
    return total + correction if correction != 0.0 and correction == correction and \
        abs(correction) != float('inf') else total


@settings(max_examples=300, deadline=None)
@given(floats)
@example(CANCELLING)
def test_total_adds_left_to_right(values: list) -> None:
    assert repr(pysum.total(values)) == repr(plain_sum(values))
    assert repr(pysum.total(iter(values))) == repr(plain_sum(values))


def test_builtin_sum_is_what_this_python_says() -> None:
    """The premise: 3.12+ compensates (so the render app must not call sum() there)."""
    assert sum(CANCELLING) == (1.0 if sys.version_info >= (3, 12) else 0.0)
    assert neumaier(CANCELLING) == 1.0 and plain_sum(CANCELLING) == 0.0


@settings(max_examples=200, deadline=None)
@given(floats)
@example(CANCELLING)
def test_numpy_compensated_mode_equals_neumaier(values: list) -> None:
    acc, comp = np.zeros(1), np.zeros(1)
    plain = np.zeros(1)
    with np.errstate(all='ignore'):
        for v in values:
            pysum.add_into(np, acc, comp, np.array([v]), compensated=True)
            pysum.add_into(np, plain, None, np.array([v]))
        got = pysum.result(np, acc, comp, compensated=True)[0]
    assert repr(float(got)) == repr(neumaier(values))
    assert repr(float(pysum.result(np, plain, None)[0])) == repr(float(plain_sum(values)))
    if sys.version_info >= (3, 12):
        assert repr(float(got)) == repr(float(sum(values)))


def write_files(folder: str, now: int, values: list) -> list[str]:
    return [make_whisper(folder, 'grp.m%d' % i, [(now - 60, v)]) for i, v in enumerate(values)]


@pytest.mark.parametrize('compensated', [False, True])
def test_c_file_sums_both_modes(tmp_path: Any, compensated: bool) -> None:
    now = aligned_now(60)
    paths = write_files(str(tmp_path), now, CANCELLING)
    rows = [answer[0][1] for answer in whisper_read.read_many(paths, now - 600, now, now)]
    acc, comp, count = packed.sum_rows(rows, [0, 0, 0], 1, compensated)
    with np.errstate(all='ignore'):
        sums = pysum.result(np, acc, comp, compensated=compensated)
    want = neumaier(CANCELLING) if compensated else plain_sum(CANCELLING)
    assert [v for v, n in zip(sums[0].tolist(), count[0].tolist(), strict=True) if n] == [want]


@pytest.mark.parametrize('target', [
    'sumSeries(grp.*)',                         # plain paths: C sums while reading files
    'sumSeries(scale(grp.*,1))',                # function results: numpy columns
    'sum(grp.m0,grp.m1,grp.m2)',
    'groupByNode(grp.*,0,"sumSeries")',
    'averageSeries(grp.*)',
    'movingSum(sumSeries(grp.*),1)',
])
def test_render_answers_as_graphite_web_on_every_python(tmp_path: Any, make_web_settings: Any,
                                                        target: str) -> None:
    """The cancelling sum through the render app: 0.0 (graphite-web 1.1.10's answer),
    never 3.12's 1.0, on every path."""
    now = aligned_now(60)
    write_files(str(tmp_path), now, CANCELLING)
    app = make_app(make_web_settings(WHISPER_DIR=str(tmp_path)))
    try:
        status, _, body = call(app, '/render', {'target': target, 'format': 'json',
                                                'from': now - 600, 'until': now, 'now': now})
    finally:
        app.close()
    assert status == 200, body
    values = [v for v, _ in json.loads(body)[0]['datapoints'] if v is not None]
    want = plain_sum(CANCELLING) / (3 if target.startswith('average') else 1)
    assert values and values[-1] == want and all(v == want for v in values), values


def test_python_function_paths_add_left_to_right() -> None:
    """The per-point Python functions (safeSum and friends) too, with lists numpy
    does not take."""
    from webapp.functions.common import safe_avg, safe_sum
    values = [None, *CANCELLING, None]
    assert repr(safe_sum(values)) == repr(plain_sum(CANCELLING))
    assert repr(safe_avg(values)) == repr(plain_sum(CANCELLING) / 3)
