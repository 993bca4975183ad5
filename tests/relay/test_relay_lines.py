"""The relay's lean path, piece by piece: canonical_lines against parse_lines (the
same validity rules, the same bytes out), the route index against the routers, the
line queue, the pipeline fallback and the white/blacklist on LineBatches."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from carbon.config.settings import Settings
from carbon.instrumentation.stats import Stats
from carbon.pipeline import LineBatch, Pipeline, Processor, Sink
from carbon.processors.filters import ListFilter
from carbon.formats.plaintext import canonical_lines, parse_lines
from carbon.relay.destinations import Destination
from carbon.relay.index import RouteIndex
from carbon.relay.linefilter import LineListFilter
from carbon.relay.queues import LineQueue
from carbon.formats.plaintext import encode_line
from carbon.routers import make_router
from tests.relay.test_relay_routers import CASES, _settings


def reference_output(chunk: bytes) -> tuple[list[bytes], int]:
    """What the tuple path makes of ``chunk``: encoded good lines and the bad count."""
    lines = chunk.split(b"\n")
    lines.pop()
    points, bad = parse_lines(lines, now=1.0)
    payload, _, _ = encode_line(points)
    return payload.split(b"\r\n")[:-1], len(bad)


# Tokens that are canonical, and tokens that are valid but need re-encoding or are bad.
NAMES = st.sampled_from([b"a.b.c", b"servers.web01.cpu", b"x", b"7", "caf\u00e9.m".encode(),
                         b"weird!@#$%^&*()_+=[]{}", b"n\x00ul", b"tag;k=v"])
BAD_NAMES = st.sampled_from([b"\xff\xfe", b""])
CANON_VALUES = st.sampled_from([b"0", b"-0", b"1", b"42", b"-7", b"0.5", b"-0.25", b"3.1415926535",
                                b"123456789012345", b"12345.6789012345", b"999999999999999"])
OTHER_VALUES = st.sampled_from([
    b"1.0", b"1.50", b"01", b"+1", b"1e3", b".5", b"5.", b"-0.0", b"1234567890123456",
    b"0.12345678901", b"1_000", b"inf", b"nan", b"-inf", b"abc", b"", b"1.2.3", b"--1",
    b"1234567890.12345678", b"0x10", b"\xc2\xa0"])
CANON_STAMPS = st.sampled_from([b"1", b"1600000000", b"999999999999999", b"42"])
OTHER_STAMPS = st.sampled_from([b"-1", b"0", b"-1.5", b"1600000000.5", b"01600000000",
                                b"1234567890123456", b"1e9", b"nan", b"x", b"-5", b""])
SEPARATORS = st.sampled_from([b" ", b" ", b" ", b"  ", b"\t", b" \t"])
ENDINGS = st.sampled_from([b"", b"", b"\r", b" ", b"\r\r", b"\t"])


@st.composite
def canonical_line(draw: st.DrawFn) -> bytes:
    return b" ".join([draw(NAMES), draw(CANON_VALUES), draw(CANON_STAMPS)])


@st.composite
def any_line(draw: st.DrawFn) -> bytes:
    name = draw(st.one_of(NAMES, BAD_NAMES))
    value = draw(st.one_of(CANON_VALUES, OTHER_VALUES))
    stamp = draw(st.one_of(CANON_STAMPS, OTHER_STAMPS))
    fields = [name, value, stamp] + draw(st.lists(CANON_VALUES, max_size=1))
    if draw(st.booleans()):
        fields = fields[:draw(st.integers(0, 2))]
    line = draw(SEPARATORS).join(fields) if draw(st.booleans()) else b" ".join(fields)
    return draw(st.sampled_from([b"", b"", b" "])) + line + draw(ENDINGS)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.one_of(canonical_line(), any_line()), min_size=1, max_size=12))
def test_lean_path_equals_parse_and_encode(lines):
    chunk = b"\n".join(lines) + b"\n"
    expected, bad = reference_output(chunk)
    batch = canonical_lines(chunk)
    if batch is not None:  # taken only when every line is good, and then byte-identical
        assert bad == 0 and len(expected) == len(lines)
        assert batch.lines == expected
        assert batch.names == [line.split(b" ", 1)[0] for line in expected]
        assert batch.points() == parse_lines(expected)[0]


@settings(max_examples=200, deadline=None)
@given(st.lists(canonical_line(), min_size=1, max_size=30),
       st.sampled_from([b"\n", b"\r\n"]))
def test_canonical_reads_take_the_lean_path(lines, newline):
    chunk = newline.join(lines) + newline
    batch = canonical_lines(chunk)
    assert batch is not None
    assert batch.lines == reference_output(chunk)[0] == lines


def test_lean_path_declines_what_needs_the_rules():
    assert canonical_lines(b"a 1 -1\n") is None  # -1 is "now"
    assert canonical_lines(b"a 1 2") is None  # no newline
    assert canonical_lines(b"a 1 2\n\nb 1 2\n") is None  # a blank line
    assert canonical_lines(b"a 1 2 3\n4 5\n") is None  # fields shifted between lines
    # %.10f prints 12345678.1234566998: decimals this large are re-encoded.
    assert canonical_lines(b"a 12345678.1234567 1\n") is None
    assert canonical_lines(b"a 99999.0000000001 1\n").lines == [b"a 99999.0000000001 1"]


@settings(max_examples=2000, deadline=None)
@given(st.integers(0, 10 ** 16), st.integers(0, 10 ** 12), st.integers(0, 12), st.booleans())
def test_every_accepted_value_round_trips(whole, fraction, decimals, negative):
    text = ("-" if negative else "") + str(whole)
    if decimals:
        text += "." + str(fraction).zfill(decimals)[-decimals:]
    chunk = b"m %s 1\n" % text.encode()
    batch = canonical_lines(chunk)
    expected = reference_output(chunk)[0]
    if batch is not None:
        assert batch.lines == expected
    canonical = text == ("%.10f" % float(text)).rstrip("0").rstrip(".")
    if canonical and (whole < 100000 or not decimals) and len(str(whole)) <= 15:
        assert batch is not None, text  # the lean path takes the usual values
    assert canonical_lines(b" a 1 2\n") is None
    assert canonical_lines(b"a 1 2\n" + b"x" * 30 + b" 1 2\n", max_length=20) is None
    assert canonical_lines(b"a 1 2\r\n" + b"b" * 16 + b" 1 2\r\n", max_length=20) is None
    assert canonical_lines(b"a 1 2\r\n" + b"b" * 15 + b" 1 2\r\n", max_length=21) is not None


def _index_destinations(index: RouteIndex, dests: list, names: list[str]) -> list[set]:
    codes = index.codes([n.encode() for n in names])
    assert codes is not None
    return [{dests[k] for k in index.members[code]} for code in codes]


@pytest.mark.parametrize("case", CASES[:12], ids=lambda c: "%s-%s-r%d" % (
    c["router"], c["hash_type"], c["replication_factor"]))
def test_route_index_equals_router(case):
    router = make_router(_settings(case))
    dests = [Destination(*d) for d in {d: None for r in case["routes"].values()
                                       for d in map(_parse, r)}]
    index = RouteIndex(router, dests, size=50)
    names = list(case["routes"])
    for start in range(0, len(names), 40):  # several batches: the bound retires entries
        part = names[start:start + 40] + names[:5]
        got = _index_destinations(index, dests, part)
        assert got == [set(router.get_destinations(n)) for n in part]
        assert len(index.current) <= 50 + 45


def _parse(text: str) -> Destination:
    from carbon.relay.destinations import parse_destination
    return parse_destination(text)


def test_route_index_follows_destination_changes():
    dests = [Destination("127.0.0.1", 2000 + i, chr(97 + i)) for i in range(3)]
    router = make_router(Settings(RELAY_METHOD="consistent-hashing"), dests)
    index = RouteIndex(router, dests, size=1000)
    names = ["m.%d" % i for i in range(300)]
    before = _index_destinations(index, dests, names)
    router.remove_destination(dests[0])
    after = _index_destinations(index, dests, names)
    assert all(dests[0] not in d for d in after)
    assert after != before and after == [set(router.get_destinations(n)) for n in names]


def test_route_index_rules_router_and_unroutable(tmp_path):
    rules = tmp_path / "relay-rules.conf"
    rules.write_text("[web]\npattern = ^web\\.\ndestinations = 127.0.0.1:1:a, 127.0.0.1:2:b\n"
                     "[db]\npattern = ^db\\.\ndestinations = 127.0.0.1:2:b\n"
                     "[rest]\ndefault = true\ndestinations = 127.0.0.1:9:z\n")
    settings = Settings(RELAY_METHOD="rules")
    settings["relay-rules"] = str(rules)
    dests = [Destination("127.0.0.1", 1, "a"), Destination("127.0.0.1", 2, "b")]
    index = RouteIndex(make_router(settings, dests), dests, size=10)
    assert _index_destinations(index, dests, ["web.x", "db.y", "other"]) == [
        set(dests), {dests[1]}, set()]


def test_line_queue_takes_whole_payloads_and_decodes():
    queue = LineQueue()
    assert queue.add([("a", 1.0, 2.5), ("b", float("nan"), 3.0)]) == 1  # cannot be written
    queue.add_prepared(b"c 1 2\r\nd 3 4\r\n", 2)
    assert queue.queued == 3 and len(queue) == 2
    assert queue.take(1) == (b"a 2.5 1\r\n", 1, 1)
    assert queue.take_points(100) == [("c", 2.0, 1.0), ("d", 4.0, 3.0)]
    assert queue.queued == 0 and not queue


class _Collect(Sink):
    accepts_lines = True

    def __init__(self) -> None:
        self.lines: list[LineBatch] = []
        self.points: list = []

    def put_lines(self, batch: LineBatch) -> None:
        self.lines.append(batch)

    def put_many(self, batch: list) -> None:
        self.points.append(batch)


class _Upper(Processor):
    """A stage that declares only ``process``."""

    def process(self, batch: list) -> list:
        return [(m.upper(), t, v) for m, t, v in batch]


def test_pipeline_falls_back_to_tuples_for_stages_without_lines():
    batch = canonical_lines(b"a 1 2\nb 3 4\n")
    sink = _Collect()
    assert Pipeline([], sink).accepts_lines
    Pipeline([], sink).process_lines(batch)
    assert sink.lines == [batch]
    plain = Pipeline([_Upper()], sink)
    assert not plain.accepts_lines
    plain.process_lines(batch)
    assert sink.points == [[("A", 2.0, 1.0), ("B", 4.0, 3.0)]]


def test_list_filter_on_line_batches_matches_tuple_filter(tmp_path):
    (tmp_path / "white").write_text("^keep\\.\n")
    (tmp_path / "black").write_text("secret\n")
    from carbon.config.patternlist import PatternList

    stats = Stats()
    plain = ListFilter(PatternList(str(tmp_path / "white")),
                       PatternList(str(tmp_path / "black")), stats)
    lines_filter = LineListFilter(plain, size=100)
    chunk = b"keep.a 1 2\ndrop.b 1 2\nkeep.secret 1 2\nkeep.c 5 6\n"
    kept = lines_filter.process_lines(canonical_lines(chunk))
    assert kept.lines == [b"keep.a 1 2", b"keep.c 5 6"] and kept.names == [b"keep.a", b"keep.c"]
    assert stats.get("blacklistMatches") == 1 and stats.get("whitelistRejects") == 1
    assert plain.process(canonical_lines(chunk).points()) == kept.points()


def test_relay_daemon_filters_line_batches_on_the_lean_path(tmp_path):
    from carbon.logs import MemoryLog
    from carbon.daemon.relay import RelayDaemon
    from tests.relay.harness import run_reactor

    (tmp_path / "blacklist.conf").write_text("^secret\\.\n")
    settings = Settings(USE_WHITELIST=True, CONF_DIR=str(tmp_path), STORAGE_DIR=str(tmp_path),
                        RELAY_METHOD="consistent-hashing", DESTINATIONS=["127.0.0.1:1:a"])
    settings["whitelist"] = str(tmp_path / "whitelist.conf")
    settings["blacklist"] = str(tmp_path / "blacklist.conf")
    daemon = run_reactor(lambda reactor: RelayDaemon(settings, MemoryLog(), reactor))
    assert daemon.pipeline.accepts_lines
    queued = []
    daemon.relay.put_lines = queued.append
    daemon.pipeline.process_lines(canonical_lines(b"secret.a 1 2\npublic.b 3 4\n"))
    assert [batch.lines for batch in queued] == [[b"public.b 3 4"]]
    assert daemon.stats.get("blacklistMatches") == 1
