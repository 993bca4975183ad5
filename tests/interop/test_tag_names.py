"""Series names parsed exactly as carbon 1.1.10 parses them: carbon.tags against the
reference's own ``TaggedSeries.parse`` (in its venv, one process for every example) over
fuzzed names in both syntaxes (``a.b;k=v`` and OpenMetrics ``a.b{k="v"}``)."""

from __future__ import annotations

import json
import subprocess
from typing import Iterator

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from carbon import tags
from tests.interop.reference import carbon_venv, reference_env

ORACLE = r"""
import json, sys
from carbon.util import TaggedSeries
for line in sys.stdin:
    out = []
    for name in json.loads(line):
        try:
            out.append(["ok", TaggedSeries.parse(name).path])
        except Exception as exc:
            out.append(["error", "%s" % exc])
    sys.stdout.write(json.dumps(out) + "\n")
    sys.stdout.flush()
"""


class Oracle:
    """carbon 1.1.10's TaggedSeries.parse in a long-lived process: a JSON list of names in,
    a JSON list of ["ok", path] / ["error", message] out."""

    def __init__(self) -> None:
        venv = carbon_venv()
        self.proc = subprocess.Popen([str(venv / "bin" / "python"), "-c", ORACLE],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                     env=reference_env(), cwd=str(venv))

    def parse(self, names: list[str]) -> list[tuple[str, str]]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(names) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        assert line, "the reference parser exited"
        return [tuple(item) for item in json.loads(line)]

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


@pytest.fixture(scope="module")
def oracle() -> Iterator[Oracle]:
    made = Oracle()
    yield made
    made.close()


def ours(name: str) -> tuple[str, str]:
    try:
        return "ok", tags.normalize(name)
    except ValueError as exc:
        return "error", str(exc)


def assert_same(oracle: Oracle, names: list[str]) -> None:
    for name, (status, text) in zip(names, oracle.parse(names), strict=True):
        mine = ours(name)
        assert mine[0] == status, (name, mine, (status, text))
        if status == "ok":
            assert mine[1] == text, name
        # and as every daemon applies it to a batch (bad names replaced here by a marker)
        batch = tags.normalize_batch([(name, 1.0, 2.0)], lambda n, e: "<invalid>")
        assert batch[0][0] == (text if status == "ok" else "<invalid>"), name


# Characters that matter to either syntax, a few ordinary ones and some non-ASCII.
SPECIAL = ";=!^~\"\\,:{}. /"
chars = st.sampled_from(list(SPECIAL) + list("abxyz019_-") + ["é", "ü", "日"])
text = st.text(chars, max_size=8)
words = st.text(st.sampled_from(list("abcxyz.09_-~") + ["é"]), min_size=0, max_size=6)
clean = st.text(st.sampled_from(list("abcxyz.09_-/") + ["é"]), min_size=1, max_size=5)


@st.composite
def carbon_names(draw: st.DrawFn) -> str:
    metric = draw(st.one_of(clean, words, text))
    pair = st.builds(lambda t, v: "%s=%s" % (t, v), clean, clean)
    segments = draw(st.lists(st.one_of(
        pair, pair, pair, st.builds(lambda t, v: "%s=%s" % (t, v), words, words), text),
        max_size=4))
    name = ";".join([metric] + segments)
    return name + (";" if draw(st.booleans()) and draw(st.booleans()) else "")


@st.composite
def openmetrics_names(draw: st.DrawFn) -> str:
    metric = draw(st.one_of(clean, words, text))
    labels = []
    for _ in range(draw(st.integers(0, 4))):
        value = draw(st.one_of(clean, clean, words, st.text(
            st.sampled_from(list('ab"\\~;,=') + ["é"]), max_size=6)))
        escaped = value.replace("\\", "\\\\").replace('"', '\\"') \
            if draw(st.booleans()) else value
        labels.append('%s="%s"' % (draw(st.one_of(clean, clean, words, text)), escaped))
    separator = draw(st.sampled_from([",", ",", ":,", ", ", ";"]))
    return "%s{%s}" % (metric, separator.join(labels))


names = st.one_of(carbon_names(), carbon_names(), openmetrics_names(), openmetrics_names(),
                  text, words)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(names, min_size=1, max_size=40))
def test_fuzzed_names_parse_as_carbon_parses_them(oracle: Oracle, batch: list[str]) -> None:
    assert_same(oracle, batch)


def test_the_names_of_the_issue_and_the_tagged_tests(oracle: Oracle) -> None:
    names = ['disk.free{host="om1",dc="east"}', 'disk.free;host=om1;dc=east',
             "cpu;host=", "cpu;ho!st=x", "cpu;host=~x", "cpu;host=a;", "~cpu.load",
             'm{a="x\\"y",b="c\\\\d"}', 'm{a="1":,b="2"}', "m{a=1}", 'm{a="1"}}"}',
             'req.count{path="/a b/é",code="200"}', "", "~", "a.b", "a;b=c=d;b=e"]
    assert_same(oracle, names)
    assert ours('disk.free{host="om1",dc="east"}') == ("ok", "disk.free;dc=east;host=om1")
