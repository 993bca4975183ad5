"""AggregationProcessor.process_lines gives the same buffers and aggregates as process."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from carbon.aggregator.buffers import BufferManager
from carbon.aggregator.processor import AggregationProcessor
from carbon.aggregator.rules import parse_rules
from carbon.config.settings import Settings
from carbon.instrumentation.stats import Stats
from carbon.pipeline import Pipeline
from carbon.receivers.lineparse import canonical_lines, parse_lines
from carbon.rewrite import RewriteProcessor, parse_rewrite_rules

RULES = """\
agg.<g>.sum (10) = sum in.<g>.*.sum
agg.<g>.avg (10) = avg in.<g>.*.avg
agg.<g>.min (20) = min in.<g>.*.min
agg.<g>.max (10) = max in.<g>.*.max
agg.<g>.count (60) = count in.<g>.*.count
agg.<g>.p90 (10) = p90 in.<g>.*.p90
agg.both (10) = sum in.b.*.sum
"""
SHARED = RULES + "agg.<g>.sum (10) = max in.<g>.x.*\n"  # two rules feed agg.<g>.sum

NAMES = st.builds("in.{}.{}.{}".format, st.sampled_from("ab"), st.sampled_from("xy"),
                  st.sampled_from(["sum", "avg", "min", "max", "count", "p90", "none"]))
VALUES = st.sampled_from(["0", "-0", "1", "-1", "2.5", "0.1", "1e16", "-1e16", "123456789",
                          "99999.1234567891", "nan", "inf", "007", "1.50"])
STAMPS = st.sampled_from(["1000", "1001", "1009", "1010", "1019", "1020", "1059", "1060",
                          "-1", "1000.5", "950"])
LINES = st.one_of(
    st.builds("{} {} {}".format, NAMES, VALUES, STAMPS),
    st.sampled_from(["", "bad line", "in.a.x.sum 1", "in.a.x.sum  1 1000", "in.a.x.sum x 1000"]))
CHUNKS = st.lists(st.lists(LINES, min_size=1, max_size=30), min_size=1, max_size=8)


class _Sink:
    accepts_lines = True

    def put_many(self, batch) -> None:
        self.last = batch

    def put_lines(self, batch) -> None:
        self.last = batch


def make(rules: str, rewrite: str = "", **overrides):
    conf = Settings(**overrides)
    stats = Stats()
    proc = AggregationProcessor(parse_rules(rules), BufferManager.from_settings(conf),
                                conf, stats)
    rewrites = parse_rewrite_rules(rewrite)
    pipeline = Pipeline([RewriteProcessor(rewrites, "pre"), proc,
                         RewriteProcessor(rewrites, "post")], _Sink())
    return proc, stats, pipeline


def feed(pipeline: Pipeline, chunk: bytes, lean: bool) -> None:
    """What LineReceiver does with one read (now fixed for -1 timestamps)."""
    if lean and pipeline.accepts_lines:
        batch = canonical_lines(chunk)
        if batch is not None:
            pipeline.process_lines(batch)
            return
    points, _ = parse_lines(chunk.split(b"\n")[:-1], now=1005.0)
    pipeline.process(points)


def state(proc: AggregationProcessor, stats: Stats):
    proc.settle()
    buffers = [(name, ob.frequency, ob.rule.key, ob.tomb_base, ob.tomb_mask,
                [(i, acc.n, acc.dirty, acc.value()) for i, acc in ob.intervals.items()])
               for name, ob in proc.buffers.outputs.items()]
    return buffers, dict(stats.counters)


def run(chunks: list[list[str]], lean: bool, rules: str, rewrite: str = ""):
    proc, stats, pipeline = make(rules, rewrite, FORWARD_ALL=False)
    out = []
    for number, lines in enumerate(chunks):
        feed(pipeline, "".join(line + "\n" for line in lines).encode(), lean)
        if number % 3 == 2:
            out.append(proc.flush(1000.0 + 25 * number))
            out.append(state(proc, stats))
    out.append(proc.flush(1200.0, force=True))
    out.append(state(proc, stats))
    return out


@settings(max_examples=300, deadline=None)
@given(CHUNKS, st.sampled_from([RULES, SHARED]))
def test_lines_path_matches_tuple_path(chunks, rules):
    assert run(chunks, True, rules) == run(chunks, False, rules)


@settings(max_examples=50, deadline=None)
@given(CHUNKS)
def test_lines_path_with_pre_rewrites_matches_tuple_path(chunks):
    rewrite = "[pre]\n\\.y\\. = .x.\n"
    assert run(chunks, True, RULES, rewrite) == run(chunks, False, RULES, rewrite)


def test_lines_are_staged_then_settled_in_arrival_order():
    proc, stats, pipeline = make(RULES, FORWARD_ALL=False)
    feed(pipeline, b"in.a.x.sum 0.1 1000\nin.a.y.sum 0.2 1001\nin.a.x.sum 0.3 1002\n", True)
    assert proc.buffers.outputs == {}  # staged, not yet added
    assert proc.flush(1010.0) == [("agg.a.sum", 1000.0, 0.1 + 0.2 + 0.3)]
    feed(pipeline, b"in.a.x.sum 2 1003\n", True)  # that interval is still buffered
    assert proc.flush(1020.0) == [("agg.a.sum", 1000.0, 0.1 + 0.2 + 0.3 + 2)]


def test_forward_all_lines_continue_as_tuples():
    proc, _, pipeline = make(RULES, FORWARD_ALL=True)
    feed(pipeline, b"in.a.x.sum 1 1000\nother 2 1000\n", True)
    assert pipeline.sink.last == [("in.a.x.sum", 1000.0, 1.0), ("other", 1000.0, 2.0)]
