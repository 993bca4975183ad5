"""The whole-read C path (carbon.relay.chunks): the same bytes as parse_lines +
encode_line, the same placement as the routers (every hash type, replicas, the
reference vectors), a bounded name table that follows placement changes."""

from __future__ import annotations

import math
import re

import pytest
from hypothesis import given, settings, strategies as st

from carbon.config.settings import Settings
from carbon.formats.pickled import encode_pickle_items, wire_items
from carbon.formats.plaintext import encode_line, parse_lines
from carbon.hashing import ConsistentHashRing
from carbon.relay.chunks import ChunkRouter
from carbon.relay.index import RouteIndex
from carbon.routers import make_router, parse_destinations
from carbon.relay._route import format_text, format_value, position
from tests.formats.number_texts import NUMBER_EDGES, float_repr, number_text
from tests.relay.test_relay_lines import (CANON_STAMPS, CANON_VALUES, ENDINGS, NAMES, OTHER_STAMPS,
                              OTHER_VALUES, SEPARATORS, BAD_NAMES)
from tests.relay.test_relay_routers import CASES, _settings

DESTS = ["127.0.0.1:2004:a", "127.0.0.1:2104:b", "127.0.0.2:2004:c", "127.0.0.3:2004:d"]

# Values and stamps the C path writes itself (anything float() reads, finite, and a
# stamp not meaning "now"); the rest of OTHER_* is bad or needs the parse path.
FINE_VALUES = st.one_of(
    CANON_VALUES,
    st.sampled_from([b"1.0", b"1.50", b"01", b"+1", b"1e3", b".5", b"5.", b"-0.0",
                     b"1234567890123456", b"0.12345678901", b"1234567890.12345678",
                     b"0.7362519846152", b"-1E-7", b"2.5e+3", b"0.00000000005", b"-5e-11"]),
    st.floats(allow_nan=False, allow_infinity=False, min_value=-8e15, max_value=8e15).map(
        lambda v: repr(v).encode()),
    st.floats(allow_nan=False, allow_infinity=False, min_value=-1e6, max_value=1e6).map(
        lambda v: ("%.17e" % v).encode()))
FINE_STAMPS = st.one_of(CANON_STAMPS, st.sampled_from(
    [b"0", b"1600000000.5", b"01600000000", b"1234567890123456", b"1e9", b"-5", b"-0.5",
     b"123456789012345678", b"9007199254740993", b"00000000000000001700000000"]))


@st.composite
def fine_line(draw: st.DrawFn) -> bytes:
    sep = draw(SEPARATORS)
    return (draw(st.sampled_from([b"", b" "])) + sep.join(
        [draw(NAMES), draw(FINE_VALUES), draw(FINE_STAMPS)]) + draw(ENDINGS))


@st.composite
def other_line(draw: st.DrawFn) -> bytes:
    fields = [draw(st.one_of(NAMES, BAD_NAMES)), draw(st.one_of(FINE_VALUES, OTHER_VALUES)),
              draw(st.one_of(FINE_STAMPS, OTHER_STAMPS))]
    fields += draw(st.lists(CANON_VALUES, max_size=1))
    return b" ".join(fields) + draw(ENDINGS)


def _chunk_router(router, dests, size: int = 10_000) -> ChunkRouter:
    return ChunkRouter(RouteIndex(router, dests, size), router, size)


def _received(routed, dests) -> dict:
    """Per destination: the lines written for it (without CRLF)."""
    payloads, counts = routed[0], routed[1]
    out = {}
    for dest, payload, count in zip(dests, payloads, counts, strict=True):
        lines = payload.split(b"\r\n")[:-1] if payload is not None else []
        assert len(lines) == count
        out[dest] = lines
    return out


def _expected(chunk: bytes, router, dests) -> dict:
    """What parse_lines + the router + encode_line make of ``chunk``, per destination."""
    points, bad = parse_lines(chunk.split(b"\n")[:-1], now=1.0)
    assert not bad
    return {dest: encode_line([p for p in points if dest in router.get_destinations(p[0])])[0]
            .split(b"\r\n")[:-1] for dest in dests}


SIMPLE_NUMBER = re.compile(rb"[0-9.eE+-]{1,63}")
ROUTER = make_router(Settings(RELAY_METHOD="consistent-hashing", REPLICATION_FACTOR=2,
                              DESTINATIONS=DESTS))


@settings(max_examples=300, deadline=None)
@given(lines=st.lists(st.one_of(fine_line(), other_line(), st.just(b""), st.just(b"  \r")),
                      max_size=25))
def test_chunk_path_writes_what_parse_and_encode_write(lines):
    dests = parse_destinations(DESTS)
    chunks = _chunk_router(ROUTER, dests)
    chunk = b"".join(line + b"\n" for line in lines)
    routed = chunks.route(chunk, 0)
    points, bad = parse_lines(chunk.split(b"\n")[:-1], now=-1.5)  # "now" stays visible
    if routed is None:  # only a read the parse path must see declines
        assert bad or any(-2.0 < p[1] <= -1.0 or abs(p[1]) >= 9e18 or abs(p[2]) >= 9e15
                          for p in points) or any(
            not SIMPLE_NUMBER.fullmatch(field) for line in lines
            for field in line.split()[1:3])  # float() reads '1_000' too: parsed, not here
        return
    assert not bad
    assert routed[4] == len(points)
    assert _received(routed, dests) == _expected(chunk, ROUTER, dests)


@settings(max_examples=200, deadline=None)
@given(lines=st.lists(fine_line(), min_size=1, max_size=25))
def test_every_read_of_valid_lines_takes_the_chunk_path(lines):
    _assert_chunk_path(lines)


def _assert_chunk_path(lines: list[bytes]) -> bytes:
    """The read of ``lines`` is routed in C, as parse_lines + encode_line would; returns it."""
    dests = parse_destinations(DESTS)
    chunk = b"".join(line + b"\n" for line in lines)
    routed = _chunk_router(ROUTER, dests).route(chunk, 0)
    assert routed is not None and routed[4] == len(lines)
    assert _received(routed, dests) == _expected(chunk, ROUTER, dests)
    return chunk


@settings(max_examples=200, deadline=None)
@given(lines=st.lists(st.one_of(fine_line(), other_line()), max_size=25))
def test_pickle_items_are_what_the_tuple_path_pickles(lines):
    """For pickle destinations: the same message items, pickled to the same bytes."""
    dests = parse_destinations(DESTS)
    chunk = b"".join(line + b"\n" for line in lines)
    routed = _chunk_router(ROUTER, dests).route(chunk, 0, True)
    points, bad = parse_lines(chunk.split(b"\n")[:-1], now=-1.5)
    if routed is None:
        assert bad or any(-2.0 < p[1] <= -1.0 or abs(p[1]) >= 9e18 for p in points) or any(
            not SIMPLE_NUMBER.fullmatch(field) for line in lines
            for field in line.split()[1:3])
        return
    for dest, items, count in zip(dests, routed[0], routed[1], strict=True):
        expected = wire_items([p for p in points if dest in ROUTER.get_destinations(p[0])])
        assert (items or []) == expected and count == len(expected)
        assert encode_pickle_items(items or [])[0] == encode_pickle_items(expected)[0]



def _routes_as_parsed(lines: list[bytes]) -> object:
    """Each line alone through the C path: declined only where the parse path must
    decide, else the bytes parse_lines + encode_line make. Returns the routed reads."""
    dests = parse_destinations(DESTS)
    chunks = _chunk_router(ROUTER, dests)
    routed_all = []
    for line in lines:
        routed = chunks.route(line + b"\n", 0)
        points, bad = parse_lines([line], now=-1.5)
        if routed is None:
            assert bad or any(-2.0 < p[1] <= -1.0 or abs(p[1]) >= 9e18 or abs(p[2]) >= 9e15
                              for p in points), line
        else:
            assert not bad and _received(routed, dests) == _expected(line + b"\n", ROUTER, dests)
        routed_all.append(routed)
    return routed_all


def test_number_edges_route_as_parsed():
    values = _routes_as_parsed([b"a.b %s 1700000000" % text for text in NUMBER_EDGES])
    stamps = _routes_as_parsed([b"a.b 0.7362519846152 %s" % text for text in NUMBER_EDGES])
    for text, routed in zip(NUMBER_EDGES, stamps, strict=True):
        if text.isdigit() and len(text) <= 19 and int(text) < 9e18:
            assert routed is not None, text  # digit timestamps stay on the C path
    assert sum(r is not None for r in values) > len(NUMBER_EDGES) // 2


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(number_text(), number_text()), min_size=1, max_size=10))
def test_number_texts_route_as_parsed(pairs):
    _routes_as_parsed([b"a.b %s %s" % pair for pair in pairs])


@settings(max_examples=200, deadline=None)
@given(st.lists(float_repr(), min_size=1, max_size=10))
def test_float_reprs_route_as_parsed(values):
    _routes_as_parsed([b"a.b %s 1700000000" % value for value in values])

# Name bytes that are not whitespace to bytes.split(), control bytes below 0x20 among
# them (the C splitter screens 16 bytes at a time for bytes <= 0x20, then looks each up).
NAME_BYTES = bytes(b for b in range(1, 0x7F) if b not in b" \t\n\r\x0b\x0c")
WHITESPACE = st.text(" \t\r\x0b\x0c", min_size=1, max_size=3).map(str.encode)


@st.composite
def long_field_line(draw: st.DrawFn) -> bytes:
    """Fields of 1-70 bytes with any whitespace between them, so that separators fall
    at every offset of a 16-byte block and lines end close to the read's end."""
    name = draw(st.binary(min_size=1, max_size=70).map(
        lambda raw: bytes(NAME_BYTES[b % len(NAME_BYTES)] for b in raw)))
    value = draw(st.sampled_from([b"1", b"0.7362519846152", b"-123456.78901234567",
                                  b"12345678901234.5", b"1e3"]))
    stamp = draw(st.sampled_from([b"1700000000", b"0", b"1600000000.5"]))
    lead, tail = draw(st.sampled_from([b"", b" ", b"\t\x0b"])), draw(ENDINGS)
    return lead + draw(WHITESPACE).join([name, value, stamp]) + tail


@settings(max_examples=300, deadline=None)
@given(lines=st.lists(long_field_line(), min_size=1, max_size=12))
def test_splitting_long_fields_and_control_bytes_is_bytes_split(lines):
    chunk = _assert_chunk_path(lines)
    chunks = _chunk_router(ROUTER, parse_destinations(DESTS))
    assert chunks.route(chunk + b"x\x01 1 2 3\n", 0) is None  # 4 fields


def test_table_growth_keeps_every_name():
    """Slots are rebuilt from the names' entries as the table doubles: every name stays
    found (none placed and added twice) and keeps its destinations."""
    router = make_router(Settings(RELAY_METHOD="consistent-hashing", DESTINATIONS=DESTS))
    dests = parse_destinations(DESTS)
    chunks = _chunk_router(router, dests, size=100_000)
    names = ["grow.%s.m%d" % ("x" * (i % 40), i) for i in range(20_000)]  # 1024 -> 32768 slots
    chunk = b"".join(b"%s 1 1700000000\n" % n.encode() for n in names)
    for _ in range(2):
        got = {d: sorted(line.split(b" ")[0].decode() for line in lines)
               for d, lines in _received(chunks.route(chunk, 0), dests).items()}
        assert got == {d: sorted(n for n in names if d in router.get_destinations(n))
                       for d in dests}
        assert chunks.known == len(names)


def test_declined_reads():
    chunks = _chunk_router(ROUTER, parse_destinations(DESTS))
    for chunk in (b"a 1 1\nb nan 1\n", b"a 1 -1\n", b"a inf 1\n", b"a 1\n", b"a 1 1 1\n",
                  b"\xff 1 1\n", b"a 1e400 1\n", b"a 1 1", b"a 1_0 1\n", b"a 9e15 1\n",
                  b"a 1 1e19\n"):
        assert chunks.route(chunk, 0) is None, chunk
    assert chunks.route(b"a.b 1 1\n" + b"x" * 50 + b" 1 1\n", 40) is None  # overlong
    assert chunks.route(b"a.b 1 1\n", 40) is not None


@settings(max_examples=500, deadline=None)
@given(st.floats(allow_nan=False, allow_infinity=False, min_value=-8.9e15, max_value=8.9e15))
def test_value_text_is_python_formatting(value):
    assert format_value(value) == ("%.10f" % value).rstrip("0").rstrip(".").encode()


@settings(max_examples=500, deadline=None)
@given(whole=st.integers(0, 10 ** 15 - 1), fraction=st.text("0123456789", max_size=25),
       tie=st.sampled_from(["", "5", "49999999", "50000001", "5000000000000"]),
       negative=st.booleans())
def test_decimal_text_rounds_like_its_double(whole, fraction, tie, negative):
    """The shortcut that reads "%.10f" off the decimal text answers like the double or
    not at all (near a tie, or past what a double holds to 10 decimals)."""
    digits = (fraction + "0" * 10)[:10] + tie if tie else fraction
    text = "%s%d%s" % ("-" if negative else "", whole, "." + digits if digits else "")
    got = format_text(text.encode())
    if got is not None:
        assert got == ("%.10f" % float(text)).rstrip("0").rstrip(".").encode()


def test_decimal_text_shortcut_is_taken():
    for text in (b"0.7362519846152", b"123.45678901234567", b"-0.00000000001", b"42"):
        assert format_text(text) == ("%.10f" % float(text)).rstrip("0").rstrip(".").encode()
    for text in (b"0.00000000005", b"1e3", b"123456789.123456789", b"+1", b"."):
        assert format_text(text) is None


def test_value_text_edges():
    ties = [(2 * k + 1) / 2 ** 11 for k in range(300)]  # exact halves at the 11th decimal
    tiny = [5e-11, -5e-11, 4.9999999999e-11, 1e-300, -0.0, 0.0, 5e-324, 2 ** 52 + 0.5]
    for value in ties + tiny + [math.nextafter(x, 1) for x in ties]:
        assert format_value(value) == ("%.10f" % value).rstrip("0").rstrip(".").encode()


def test_positions_equal_the_python_hashes():
    from carbon.hashing import hash_function
    names = ["", "a", "x" * 55, "x" * 56, "x" * 64, "x" * 119, "unicode.é.名前", "a b"] + [
        "bench.host%03d.metric%06d" % (i % 7, i) for i in range(500)]
    for kind, hash_type in ((1, "carbon_ch"), (2, "fnv1a_ch"), (3, "mmh3_ch")):
        assert [position(kind, n.encode()) for n in names] == list(
            map(hash_function(hash_type), names))


PLACEMENTS = [(h, r, d) for h in ("carbon_ch", "fnv1a_ch", "mmh3_ch", "jump_fnv1a_ch",
                                  "crelay_carbon_ch")
              for r, d in ((1, True), (2, True), (2, False))]


@pytest.mark.parametrize("hash_type,replication,diverse", PLACEMENTS)
def test_placement_equals_the_router(hash_type, replication, diverse):
    router = make_router(Settings(RELAY_METHOD="consistent-hashing", ROUTER_HASH_TYPE=hash_type,
                                  REPLICATION_FACTOR=replication, DIVERSE_REPLICAS=diverse,
                                  DESTINATIONS=DESTS))
    dests = parse_destinations(DESTS)
    names = ["bench.host%03d.metric%06d" % (i % 7, i) for i in range(3000)] + [
        "unicode.é.名前", "a", "x" * 300]
    ring = router.ring
    if type(ring) is ConsistentHashRing:  # a name past the last position wraps around
        last = ring._positions[-1]
        names.append(next(n for n in ("wrap.%d" % i for i in range(1_000_000))
                          if ring.compute_ring_position(n) > last))
    chunks = _chunk_router(router, dests)
    chunk = b"".join(b"%s 0.7362519846152 1700000000\n" % n.encode() for n in names)
    routed = chunks.route(chunk, 0)
    in_c = replication == 1 and not hash_type.startswith("crelay")
    assert chunks.ring_kind != 0 if in_c else chunks.ring_kind == 0
    got = {d: [line.split(b" ")[0].decode() for line in lines]
           for d, lines in _received(routed, dests).items()}
    assert got == {d: [n for n in names if d in router.get_destinations(n)] for d in dests}
    assert routed[4] == len(names) and routed[2] == 0


@pytest.mark.parametrize("case", CASES, ids=lambda c: "%s-%s-%dd-r%d" % (
    c["router"], c["hash_type"], len(c["destinations"]), c["replication_factor"]))
def test_reference_vectors(case):
    router = make_router(_settings(case))
    dests = parse_destinations(case["destinations"])
    names = [n for n in case["routes"] if n and not any(c.isspace() for c in n)]
    routed = _chunk_router(router, dests).route(
        b"".join(b"%s 1.5 1700000000\n" % n.encode() for n in names), 0)
    got = _received(routed, dests)
    for name in names:
        where = {str(d) for d in dests if any(line.split(b" ")[0] == name.encode()
                                               for line in got[d])}
        assert where == set(case["routes"][name]), name


def test_table_is_bounded_and_follows_placement_changes():
    router = make_router(Settings(RELAY_METHOD="consistent-hashing", DESTINATIONS=DESTS))
    dests = parse_destinations(DESTS)
    chunks = _chunk_router(router, dests, size=1000)
    names = ["bounded.m%d" % i for i in range(6000)]
    for start in range(0, len(names), 500):
        part = names[start:start + 500]
        routed = chunks.route(b"".join(b"%s 1 1700000000\n" % n.encode() for n in part), 0)
        assert routed is not None
        assert chunks.known <= 2 * 1000
    assert 0 < chunks.memory < 2 * 1000 * 200
    router.remove_destination(("127.0.0.1", 2104, "b"))
    chunk = b"".join(b"%s 1 1700000000\n" % n.encode() for n in names[:500])
    got = {d: [line.split(b" ")[0].decode() for line in lines]
           for d, lines in _received(chunks.route(chunk, 0), dests).items()}
    assert got == {d: [n for n in names[:500] if d in router.get_destinations(n)]
                   for d in dests}
    assert not got[parse_destinations(["127.0.0.1:2104:b"])[0]]


def test_rules_router_unroutable_names_are_counted(tmp_path):
    rules = tmp_path / "relay-rules.conf"
    rules.write_text("[a]\npattern = ^a\\.\ndestinations = 127.0.0.1:2004:a\n"
                     "[rest]\ndefault = true\ndestinations = 127.0.0.9:2004:z\n")
    router = make_router(Settings(RELAY_METHOD="rules", DESTINATIONS=DESTS[:2],
                                  **{"relay-rules": str(rules)}))
    dests = parse_destinations(DESTS[:2])
    routed = _chunk_router(router, dests).route(b"a.x 1 1\nb.y 2 2\na.z 3 3\nb.w 4 4\n", 0)
    payloads, counts, nowhere, example, lines = routed
    assert payloads == [b"a.x 1 1\r\na.z 3 3\r\n", None] and counts == [2, 0]
    assert (nowhere, example, lines) == (2, b"b.y", 4)


def test_no_name_table():
    """RELAY_HASH_CACHE_SIZE = 0: ring names are still placed in C on every read."""
    router = make_router(Settings(RELAY_METHOD="consistent-hashing", DESTINATIONS=DESTS))
    dests = parse_destinations(DESTS)
    chunks = _chunk_router(router, dests, size=0)
    names = ["nocache.m%d" % i for i in range(300)]
    for _ in range(2):
        routed = chunks.route(b"".join(b"%s 1 1700000000\n" % n.encode() for n in names), 0)
        got = {d: [line.split(b" ")[0].decode() for line in lines]
               for d, lines in _received(routed, dests).items()}
        assert got == {d: [n for n in names if d in router.get_destinations(n)] for d in dests}
        assert chunks.known <= 2
