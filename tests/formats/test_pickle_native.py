"""The pickle receiver's C reader (carbon.formats._pickled) against the safe unpickler
plus points_from_pickle: whenever it answers, it answers the same; it answers for what
carbon's relays send; it never crashes on mutated or hostile bytes."""

from __future__ import annotations

import os
import pickle
import struct

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from carbon.formats import pickled
from carbon.formats.pickled import points_from_pickle
from carbon.formats.unpickler import PICKLE_ERRORS, safe_loads

native = pickled.native_points
pytestmark = pytest.mark.skipif(
    native is None and not os.environ.get("CARBON_REQUIRE_NATIVE"),
    reason="the C accelerator is not built")


def _key(batch: list) -> list:
    """Batch entries with floats as their bytes (-0.0 and 0.0 differ)."""
    return [(m, struct.pack("!d", t), struct.pack("!d", v), type(m)) for m, t, v in batch]


def _expected(data: bytes):
    try:
        items = safe_loads(data)
    except PICKLE_ERRORS:
        return None
    batch, bad = points_from_pickle(items)
    return _key(batch), bad


def _check(data: bytes) -> bool:
    """True if the C reader answered (then equal to the safe path)."""
    got = native(data)
    if got is None:
        return False
    assert _expected(data) == (_key(got[0]), got[1])
    return True


numbers = st.one_of(
    st.integers(0, 255), st.integers(256, 65535), st.integers(-(2 ** 31), 2 ** 31 - 1),
    st.integers(-(2 ** 63), 2 ** 63 - 1), st.integers(2 ** 63, 2 ** 70),
    st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([0.0, -0.0]),
    st.booleans(), st.none())
names = st.one_of(st.sampled_from(["a.b.c", "", "é.ü.ß", "x;tag=1", "a\udcff"]),
                  st.text(max_size=12), st.binary(max_size=6))
items = st.one_of(
    st.tuples(names, st.tuples(numbers, numbers)),
    st.tuples(names, st.tuples(numbers, numbers)),
    st.tuples(names, st.lists(numbers, min_size=2, max_size=2)),
    st.tuples(names), st.tuples(names, numbers), st.tuples(names, st.tuples(numbers)),
    st.lists(st.one_of(names, numbers), max_size=2))


@settings(max_examples=600, deadline=None)
@given(batch=st.lists(items, max_size=30), protocol=st.integers(0, 5),
       repeat=st.booleans())
def test_same_answer_as_the_safe_unpickler(batch, protocol: int, repeat: bool) -> None:
    if repeat and batch:  # the same objects again: BINGET in the pickle
        batch = batch + batch[: len(batch) // 2]
    _check(pickle.dumps(batch, protocol=protocol))


plain_numbers = st.one_of(
    st.integers(-(2 ** 63), 2 ** 63 - 1), st.integers(0, 70000),
    st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([0.0, -0.0]))
plain_items = st.tuples(st.one_of(st.text(max_size=10), st.sampled_from(["", "a\udcff"])),
                        st.tuples(plain_numbers, plain_numbers))


@settings(max_examples=600, deadline=None)
@given(batch=st.lists(plain_items, max_size=30), protocol=st.integers(2, 5),
       repeat=st.booleans())
def test_plain_items_with_edge_values(batch, protocol: int, repeat: bool) -> None:
    """Names and numbers of every kind a relay could send, NaN, inf, -0.0, 64-bit ints,
    empty and non-UTF-8-encodable names: the C reader answers, and the same."""
    if repeat and batch:
        batch = batch + batch[: len(batch) // 2]
    assert _check(pickle.dumps(batch, protocol=protocol))


@settings(max_examples=300, deadline=None)
@given(count=st.integers(0, 2500), protocol=st.integers(2, 5))
def test_what_relays_send_takes_the_c_path(count: int, protocol: int) -> None:
    names = ["carbon.agents.host%d.metric%d" % (i % 7, i) for i in range(50)]
    batch = [(names[i % 50], (1_700_000_000 + i, float(i) / 3)) for i in range(count)]
    batch += [("ms.stamps", (1_700_000_000_123, 1.5)), ("zero", (0, 0))]
    assert _check(pickle.dumps(batch, protocol=protocol))


def test_python2_strings_and_bad_items() -> None:
    # SHORT_BINSTRING names (a Python 2 relay), a NaN item and an empty name (bad)
    data = (b"\x80\x02]q\x00(U\x05a.b.cq\x01J\x00\xf1SeG?\xf8\x00\x00\x00\x00\x00\x00"
            b"\x86q\x02\x86q\x03h\x01J\x01\xf1SeG\x7f\xf8\x00\x00\x00\x00\x00\x00\x86\x86"
            b"U\x00K\x01K\x02\x86\x86e.")
    assert _check(data)
    assert native(data)[1] == 2
    assert native(b"\x80\x02]q\x00(U\x02\xff\xfeK\x01K\x02\x86\x86e.") is None  # not UTF-8


@settings(max_examples=1500, deadline=None)
@given(batch=st.lists(st.tuples(st.sampled_from(["a", "b.c"]),
                                st.tuples(st.integers(0, 2 ** 40), st.floats())),
                      max_size=8),
       protocol=st.integers(1, 5),
       edits=st.lists(st.tuples(st.integers(0, 10 ** 6), st.integers(0, 255)), max_size=4),
       cut=st.integers(0, 10 ** 6))
# a FRAME shortened so that a BINFLOAT crosses its end: the reference's file-based
# unpickler misreads it, so the C reader must leave it to the safe unpickler
@example(batch=[("a", (0, 0.0))], protocol=4, edits=[(3, 10)], cut=0)
def test_mutated_bytes_never_crash_and_never_disagree(batch, protocol, edits, cut) -> None:
    data = bytearray(pickle.dumps(batch, protocol=protocol))
    for position, byte in edits:
        data[position % len(data)] = byte
    data = bytes(data[: len(data) - cut % 3])
    _check(data)
