"""The C line parser gives exactly the pure-Python parser's results."""

from __future__ import annotations

import math
import os

import pytest
from hypothesis import example, given, settings, strategies as st

from carbon.formats import plaintext
from tests.formats.number_texts import NUMBER_EDGES, float_repr, number_text

native = plaintext._native_parse_lines

pytestmark = pytest.mark.skipif(
    native is None and not os.environ.get("CARBON_REQUIRE_NATIVE"),
    reason="C accelerator not built")


def test_accelerator_is_built_where_required():
    # tools/test.sh builds with CARBON_REQUIRE_NATIVE=1: there the C path is what runs.
    assert native is not None
    assert plaintext.parse_lines.__module__ == "carbon.formats.plaintext"


def same(lines: list[bytes], now: float = 1234.5, resolution: int = 0) -> None:
    got_batch, got_bad = native(lines, now, resolution)
    want_batch, want_bad = plaintext.parse_lines_py(lines, now, resolution)
    assert got_bad == want_bad
    assert len(got_batch) == len(want_batch)
    for got, want in zip(got_batch, want_batch, strict=True):
        assert got[0] == want[0] and type(got[0]) is str
        for a, b in zip(got[1:], want[1:], strict=True):
            # bit-identical doubles, -0.0 included
            assert math.copysign(1, a) == math.copysign(1, b) and a == b


TOKENS = [b"0", b"-0", b"1", b"-1", b"1.5", b"-1.5", b".5", b"5.", b"-.5", b"1e3", b"1E-3",
          b"+1", b"1_0", b"inf", b"-inf", b"nan", b"Infinity", b"0x10", b"1e999", b"-1e999",
          b"123456789012345", b"1234567890123456", b"12345678901234567890", b"0.1",
          b"0.30000000000000004", b"3.14159", b"1..2", b"--1", b"-", b".", b"", b"e5",
          b"1e", b"\xd9\xa1", b"\xff", b"-1.0", b"-1.5", b"-2", b"-1.999", b"00012",
          b"1.000000000000000000000001", b"9007199254740993", b"4.35", b"1e-400"]


@settings(max_examples=500, deadline=None)
@given(st.lists(st.lists(st.sampled_from(TOKENS + [b"a.b", b"\xe2\x82\xac", b"x;t=1"]),
                         max_size=5), max_size=30),
       st.sampled_from([b" ", b"  ", b"\t", b" \r", b"\x0b", b"\x0c", b"\x1c", b"\xa0"]),
       st.sampled_from([0, 1, 10, 60, 7]))
@example([[b"a", b"1", b"-1"], [b"a", b"1", b"-1.5"], [b"a", b"1", b"-2"]], b" ", 60)
def test_same_as_python_on_token_soup(rows, separator, resolution):
    same([separator.join(row) for row in rows], resolution=resolution)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.binary(max_size=40), max_size=30), st.sampled_from([0, 10]))
def test_same_as_python_on_random_bytes(lines, resolution):
    same(lines, resolution=resolution)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.floats(allow_nan=True, allow_infinity=True),
                          st.floats(min_value=-1e20, max_value=1e20)), max_size=20),
       st.sampled_from([0, 1, 60]))
def test_same_as_python_on_float_reprs(pairs, resolution):
    lines = []
    for value, stamp in pairs:
        lines.append(b"m %r %r" % (value, stamp))
        lines.append(b"m %.10f %d" % (value, stamp) if math.isfinite(value)
                     else b"m %r 1" % value)
    same(lines, resolution=resolution)


def test_rejects_non_bytes_lines_with_type_error():
    with pytest.raises(TypeError):
        native(["a 1 2"], 0.0, 0)


def test_number_edges_read_as_float_reads_them():
    """Each edge text as value and as timestamp, alone and after other fields."""
    lines = [b"m %s 1" % text for text in NUMBER_EDGES]
    lines += [b"m 1 %s" % text for text in NUMBER_EDGES]
    lines += [b"m %s %s" % (text, text) for text in NUMBER_EDGES]
    same(lines)
    same(lines, resolution=60)
    native_batch, _ = native([b"m 1 %s" % text for text in NUMBER_EDGES], 0.0, 0)
    assert len(native_batch) > len(NUMBER_EDGES) // 2  # most of them are numbers


@settings(max_examples=500, deadline=None)
@given(st.lists(st.tuples(number_text(), number_text()), min_size=1, max_size=20))
def test_same_as_python_on_number_texts(pairs):
    same([b"m %s %s" % pair for pair in pairs])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(float_repr(), float_repr()), min_size=1, max_size=20))
def test_same_as_python_on_full_precision_reprs(pairs):
    """repr of floats of every magnitude (16-17 digits, around the 2**53 bound)."""
    same([b"m %s %s" % pair for pair in pairs])


def long_mantissa_texts(count: int, seed: int) -> list[bytes]:
    """Decimals whose digits are above 2**53 (16-19 of them, 1-19 after the point, as a
    17-digit repr writes many values), and halfway cases between two doubles that such
    text can hold exactly (x.5 in [2**52, 2**53), odd integers in [2**53, 2**54))."""
    import random
    rng = random.Random(seed)
    texts = []
    for _ in range(count):
        digits = rng.randint(16, 19)
        mantissa = rng.randrange(2 ** 53 + 1, 10 ** digits)
        fraction = rng.randint(1, 19)
        text = str(mantissa).rjust(fraction + 1, "0")
        text = text[:-fraction] + "." + text[-fraction:]
        texts.append(("-" if rng.random() < 0.2 else "") + text)
    for _ in range(count // 10):
        texts.append("%d.5" % rng.randrange(2 ** 52, 2 ** 53))
        texts.append("%d.0" % (rng.randrange(2 ** 52, 2 ** 53) * 2 + 1))
        texts.append("%d.50000000000000001" % rng.randrange(2 ** 52, 2 ** 53))
        texts.append("%d.49999999999999999" % rng.randrange(2 ** 52, 2 ** 53))
    texts += ["9007199254740993.0", "9007199254740995.0", "18446744073709551615.0",
              "0.9999999999999999999", "9999999999999999999.0", "0.0000000000000000001",
              "1.0000000000000000001", "0.1234567890123456789", "1234567890123456789.",
              "-9999999999999999999.", "9007199254740993."]
    return [t.encode() for t in texts]


def test_long_mantissas_read_as_float_reads_them():
    """The 128-bit exact division for digits above 2**53 (carbon/formats/_number.h):
    bit-identical to float() on 100,000 random decimals and the halfway cases."""
    texts = long_mantissa_texts(100_000, seed=17)
    lines = [b"m %s 1" % text for text in texts]
    batch, bad = native(lines, 0.0, 0)
    assert not bad and len(batch) == len(texts)
    for (_, _, value), text in zip(batch, texts, strict=True):
        want = float(text)
        assert value == want and math.copysign(1, value) == math.copysign(1, want), text
