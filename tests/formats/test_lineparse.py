"""Batched plaintext parsing: good lines survive any amount of bad input."""

from __future__ import annotations

import math

from hypothesis import given, settings, strategies as st

from carbon.formats.plaintext import parse_lines, split_buffer
from carbon.formats.pickled import points_from_pickle


def test_valid_and_invalid_lines():
    lines = [b"a.b 1.5 100", b"bad line", b"c 2 200 extra", b"d nan 5", b"e 1 inf",
             b"f.g -3 300", b"\xff\xfe 1 2", b"", b"h 1e3 1.5e2", b"i x 10"]
    batch, bad = parse_lines(lines)
    assert batch == [("a.b", 100.0, 1.5), ("f.g", 300.0, -3.0), ("h", 150.0, 1000.0)]
    assert len(bad) == 6


def test_minus_one_means_now_and_resolution():
    batch, _ = parse_lines([b"a 1 -1"], now=1234.5)
    assert batch == [("a", 1234.5, 1.0)]
    batch, _ = parse_lines([b"a 1 125"], resolution=60)
    assert batch == [("a", 120.0, 1.0)]


def test_split_buffer_keeps_tail_and_drops_overlong():
    lines, tail, overlong = split_buffer(b"a 1 2\n" + b"x" * 50 + b"\nb 1 2\nc 1", 20)
    assert lines == [b"a 1 2", b"b 1 2"] and tail == b"c 1" and overlong == 1


name = st.text(alphabet=st.characters(blacklist_categories=("Cs", "Zs", "Zl", "Zp", "Cc")),
               min_size=1, max_size=30).filter(lambda s: not any(c.isspace() for c in s))
finite = st.floats(allow_nan=False, allow_infinity=False, width=64)
stamp = st.integers(min_value=0, max_value=2 ** 31)


@settings(max_examples=200, deadline=None)
@given(good=st.lists(st.tuples(name, finite, stamp), max_size=20),
       junk=st.lists(st.binary(max_size=60), max_size=20), seed=st.randoms())
def test_every_valid_line_in_a_mixed_stream_is_parsed(good, junk, seed):
    good_lines = [("%s %r %d" % (n, v, t)).encode() for n, v, t in good]
    junk = [j.replace(b"\n", b" ") for j in junk]
    # junk that happens to be a valid line is fine; count what must come through
    stream = [(line, True) for line in good_lines] + [(line, False) for line in junk]
    seed.shuffle(stream)
    batch, bad = parse_lines([line for line, _ in stream])
    expected = [(n, float(t), float(v)) for n, v, t in good]
    for point in expected:
        assert point in batch
    assert len(batch) + len(bad) <= len(stream)
    for _metric, ts, value in batch:
        assert math.isfinite(ts) and math.isfinite(value)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=400))
def test_random_bytes_never_crash(data):
    lines, tail, _ = split_buffer(data, 100)
    parse_lines(lines + [tail])


def test_points_from_pickle_skips_bad_items():
    batch, bad = points_from_pickle([("a", (1, 2)), ("b", ("x", 1)), (b"c", (3, 4)),
                                     ("d",), ("e", (1, float("nan"))), (5, (1, 2))])
    assert batch == [("a", 1.0, 2.0), ("c", 3.0, 4.0)] and bad == 4
    assert points_from_pickle({"not": "a list"}) == ([], 1)
