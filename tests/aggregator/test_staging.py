"""The C read stager (carbon.aggregator._staging) gives exactly the results of its
pure-Python twin (staging.stage_chunk, built on canonical_lines) on any input."""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from carbon.aggregator.staging import stage_chunk
from carbon.formats.plaintext import canonical_lines

native = pytest.importorskip("carbon.aggregator._staging")

NAMES = [b"a", b"in.x.sum", b"in.y.sum", b"\xc3\xafn.\xc3\xa9", b"in.\xf0\x9f\x98\x80",
         b"in.\x01ctl", b"in.\x7f", b"x" * 30,
         # never canonical: invalid UTF-8, whitespace, empty
         b"in.\xff", b"in.\xed\xa0\x80", b"in.\xc0\x80", b"in.\xf4\x90\x80\x80", b"in.\xe2\x82",
         b"in.\x80", b"in\tx", b"in\x0bx", b"in\x0cx", b"in\rx", b""]
VALUES = [b"0", b"-0", b"1", b"-1", b"42", b"2.5", b"-0.1", b"0.1234567891", b"99999.5",
          b"123456789012345", b"-999999999999999", b"100000", b"12345.00001",
          # not canonical
          b"007", b"1.50", b"1.", b".5", b"-", b"+1", b"1e5", b"nan", b"inf", b"0.12345678901",
          b"1234567890123456", b"123456.5", b"-0.0", b"1,5", b"\xd9\xa1", b""]
STAMPS = [b"1000", b"1001", b"1009", b"1010", b"1019", b"1059", b"999999999999999",
          # not canonical
          b"-1", b"0", b"01", b"1000.0", b"1e3", b"1000000000000000", b"", b"\xd9\xa1"]
SEPS = [b" "] * 6 + [b"  ", b"\t", b" \t"]
ENDS = [b"\n"] * 6 + [b"\r\n", b"\r\r\n", b"\n\r", b" \n"]

GOOD = st.builds(lambda n, v, t, e: b"%s %s %s%s" % (n, v, t, e), st.sampled_from(NAMES[:8]),
                 st.sampled_from(VALUES[:13]), st.sampled_from(STAMPS[:7]),
                 st.sampled_from([b"\n"] * 4 + [b"\r\n"]))
ANY = st.one_of(
    st.builds(lambda n, s1, v, s2, t, e: n + s1 + v + s2 + t + e,
              st.sampled_from(NAMES), st.sampled_from(SEPS), st.sampled_from(VALUES),
              st.sampled_from(SEPS), st.sampled_from(STAMPS), st.sampled_from(ENDS)),
    st.sampled_from([b"\n", b"a 1\n", b"a 1 2 3\n", b"a 1 2", b"\r\n", b" a 1 1000\n"]),
    st.binary(max_size=30))
# Mostly canonical reads, some with one line of anything at any position, some random bytes.
ALL_GOOD = st.lists(GOOD, min_size=1, max_size=12).map(b"".join)
CHUNK = st.one_of(
    ALL_GOOD, ALL_GOOD, ALL_GOOD,
    st.tuples(st.lists(GOOD, max_size=8), ANY, st.lists(GOOD, max_size=8)).map(
        lambda parts: b"".join(parts[0]) + parts[1] + b"".join(parts[2])),
    st.binary(max_size=80))
MAX_LENGTH = st.sampled_from([0] * 3 + [16384] * 3 + [14, 20, -1])
BOUNDS = st.sampled_from([(0, 1 << 62)] * 3 + [(1000, 1010), (1000, 1060), (1001, 1002)])


def run(function, chunk: bytes, max_length: int, bounds: tuple[int, int],
        layout: list, extra_layout: list, validate_only: bool):
    lists: list[list] = [[] for _ in range(4)]

    def mapping(pairs: list) -> dict:
        return {NAMES[n]: tuple(lists[k] for k in ks) for n, ks in pairs}

    touched: list[list] = []
    result = function(chunk, max_length, None if validate_only else mapping(layout),
                      mapping(extra_layout) or None, bounds[0], bounds[1], touched)
    # Float bits (so -0.0 and 0.0 differ) and which list, by position, was touched when.
    return (result, [[v.hex() for v in values] for values in lists],
            [next(i for i, values in enumerate(lists) if values is t) for t in touched])


LAYOUT = st.lists(st.tuples(st.one_of(st.integers(0, 7), st.integers(0, len(NAMES) - 1)),
                            st.lists(st.integers(0, 3), max_size=3)), max_size=10)


@settings(max_examples=3000, deadline=None)
@given(CHUNK, MAX_LENGTH, BOUNDS, LAYOUT, LAYOUT, st.booleans())
@example(b"a 1 1000\n", 0, (0, 1 << 62), [], [], True)
@example(b"a 1 1000\r\n", 9, (0, 1 << 62), [], [], True)  # the CR counts in the length
@example(b"a 1 1000\r\n", 10, (0, 1 << 62), [], [], True)
@example(b"a 0.5 1000\nb 7 1001\n", 0, (1000, 1010), [(0, [0, 1])], [], False)
def test_native_stage_equals_python_twin(chunk, max_length, bounds, layout, extra, validate):
    assert (run(native.stage, chunk, max_length, bounds, layout, extra, validate)
            == run(stage_chunk, chunk, max_length, bounds, layout, extra, validate))


@settings(max_examples=2000, deadline=None)
@given(CHUNK, MAX_LENGTH)
def test_native_accepts_exactly_what_canonical_lines_accepts(chunk, max_length):
    batch = canonical_lines(chunk, max_length)
    counted = native.stage(chunk, max_length, None, None, 0, 1 << 62, None)
    assert counted == (None if batch is None else len(batch))


INTEGER = st.integers(-10**15 + 1, 10**15 - 1).map(lambda i: b"%d" % i)
DECIMAL = st.builds(lambda sign, whole, head, last: b"%s%d.%s%s" % (sign, whole, head, last),
                    st.sampled_from([b"", b"-"]), st.integers(0, 99999),
                    st.text("0123456789", max_size=9).map(str.encode),
                    st.sampled_from([b"%d" % d for d in range(1, 10)]))


@settings(max_examples=3000, deadline=None)
@given(st.lists(st.one_of(INTEGER, DECIMAL), min_size=1, max_size=20))
def test_values_convert_exactly_as_float_does(values):
    chunk = b"".join(b"m %s 1000\n" % v for v in values)
    slot: list[float] = []
    assert native.stage(chunk, 0, {b"m": (slot,)}, None, 0, 1 << 62, []) == len(values)
    assert [v.hex() for v in slot] == [float(v).hex() for v in values]


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=200), st.integers(-5, 300))
def test_arbitrary_bytes_never_crash(chunk, max_length):
    for data in (chunk, chunk + b"\n"):
        result = native.stage(data, max_length, {}, None, 0, 1 << 62, [])
        assert result is None or isinstance(result, (int, list))


def test_unknown_names_are_reported_once_in_first_seen_order_and_nothing_is_staged():
    slot: list[float] = []
    chunk = b"b 1 1000\na 2 1000\nb 3 1000\nc 4 1000\n"
    assert native.stage(chunk, 0, {b"a": (slot,)}, None, 0, 2000, []) == [b"b", b"c"]
    assert slot == []
    touched: list[list] = []
    assert native.stage(chunk, 0, {b"a": (slot,)}, {b"b": (slot,), b"c": ()}, 0, 2000,
                        touched) == 4
    assert slot == [1.0, 2.0, 3.0] and touched == [slot]


def test_bad_arguments_raise_instead_of_crashing():
    with pytest.raises(TypeError):
        native.stage(b"a 1 1000\n", 0, {b"a": [[]]}, None, 0, 2000, [])  # not a tuple
    with pytest.raises(TypeError):
        native.stage(b"a 1 1000\n", 0, {b"a": ((),)}, None, 0, 2000, [])  # not lists
    with pytest.raises(TypeError):
        native.stage("a 1 1000\n", 0, {}, None, 0, 2000, [])
    with pytest.raises(TypeError):
        native.stage(b"a 1 1000\n", 0, {}, None, 0, 2000)
    with pytest.raises(TypeError):
        native.stage(b"a 1 1000\n", 0, {}, None, 0, 2000, None)
    with pytest.raises(OverflowError):
        native.stage(b"a 1 1000\n", 0, {}, None, 0, 1 << 70, [])
    for function in (native.stage, stage_chunk):
        with pytest.raises(TypeError):
            function(b"a 1 1000\n", 0, {b"a": [[]]}, None, 0, 2000, [])
