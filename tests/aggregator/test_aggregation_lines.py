"""AggregationProcessor.process_lines and process_chunk (with the C or the pure-Python
stager) give the same buffers and aggregates as process."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from carbon.aggregator.buffers import BufferManager
from carbon.aggregator.processor import AggregationConfig, AggregationProcessor
from carbon.aggregator.rules import parse_rules
from carbon.aggregator.staging import stage, stage_chunk
from carbon.config.settings import Settings
from carbon.instrumentation.stats import Stats
from carbon.pipeline import Pipeline, Processor
from carbon.formats.plaintext import canonical_lines, parse_lines
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
# Reads the chunk path takes: canonical, one timestamp each, sometimes one other line.
CANONICAL = st.builds(
    lambda stamp, pairs, other: ["%s %s %s" % (n, v, stamp) for n, v in pairs] + other,
    st.sampled_from(["1000", "1009", "1010", "1019", "1020", "1060", "950"]),
    st.lists(st.tuples(NAMES, st.sampled_from(["0", "-0", "1", "-1", "2.5", "0.1", "123456789",
                                               "99999.1234567891", "-1000000000000"])),
             min_size=1, max_size=30),
    st.lists(LINES, max_size=1))
READS = st.one_of(CHUNKS, st.lists(CANONICAL, min_size=1, max_size=8))


class _Sink:
    accepts_lines = True

    def put_many(self, batch) -> None:
        self.last = batch

    def put_lines(self, batch) -> None:
        self.last = batch


def make(rules: str, rewrite: str = "", cache_size: int = 100000, stager=stage, **overrides):
    conf = Settings(**overrides)
    stats = Stats()
    proc = AggregationProcessor(parse_rules(rules, cache_size=cache_size),
                                BufferManager.from_settings(conf),
                                AggregationConfig.from_settings(conf), stats)
    proc.stage = stager
    rewrites = parse_rewrite_rules(rewrite)
    pipeline = Pipeline([RewriteProcessor(rewrites, "pre"), proc,
                         RewriteProcessor(rewrites, "post")], _Sink())
    return proc, stats, pipeline


def feed(pipeline: Pipeline, chunk: bytes, lean: bool, chunks: bool = False) -> None:
    """What LineReceiver does with one read (now fixed for -1 timestamps)."""
    if chunks and pipeline.accepts_chunks and pipeline.process_chunk(chunk) is not None:
        return
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


def run(chunks: list[list[str]], lean: bool, rules: str, rewrite: str = "",
        whole: bool = False, **options):
    proc, stats, pipeline = make(rules, rewrite, FORWARD_ALL=False, **options)
    out = []
    for number, lines in enumerate(chunks):
        feed(pipeline, "".join(line + "\n" for line in lines).encode(), lean, whole)
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


@settings(max_examples=300, deadline=None)
@given(READS, st.sampled_from([RULES, SHARED]), st.sampled_from([100000, 0, 3]),
       st.sampled_from([stage, stage_chunk]))
def test_chunk_path_matches_tuple_path(chunks, rules, cache_size, stager):
    """Whole reads (C or Python stager), with the name cache big, off or tiny."""
    expected = run(chunks, False, rules)
    assert run(chunks, True, rules, whole=True, cache_size=cache_size, stager=stager) == expected


@settings(max_examples=50, deadline=None)
@given(CHUNKS)
def test_lines_path_with_pre_rewrites_matches_tuple_path(chunks):
    rewrite = "[pre]\n\\.y\\. = .x.\n"
    assert run(chunks, True, RULES, rewrite) == run(chunks, False, RULES, rewrite)
    assert run(chunks, True, RULES, rewrite, whole=True) == run(chunks, False, RULES, rewrite)


def test_lines_are_staged_then_settled_in_arrival_order():
    proc, stats, pipeline = make(RULES, FORWARD_ALL=False)
    feed(pipeline, b"in.a.x.sum 0.1 1000\nin.a.y.sum 0.2 1001\nin.a.x.sum 0.3 1002\n", True)
    assert proc.buffers.outputs == {}  # staged, not yet added
    assert proc.flush(1010.0) == [("agg.a.sum", 1000.0, sum([0.1, 0.2, 0.3]))]
    feed(pipeline, b"in.a.x.sum 2 1003\n", True)  # that interval is still buffered
    assert proc.flush(1020.0) == [("agg.a.sum", 1000.0, sum([0.1, 0.2, 0.3, 2.0]))]


def test_forward_all_lines_continue_as_tuples():
    proc, _, pipeline = make(RULES, FORWARD_ALL=True)
    feed(pipeline, b"in.a.x.sum 1 1000\nother 2 1000\n", True)
    assert pipeline.sink.last == [("in.a.x.sum", 1000.0, 1.0), ("other", 1000.0, 2.0)]


def test_whole_reads_are_staged_then_settled_in_arrival_order():
    proc, stats, pipeline = make(RULES, FORWARD_ALL=False)
    read = b"in.a.x.sum 0.1 1000\nin.a.y.sum 0.2 1001\nin.a.x.sum 0.3 1002\nother 5 1003\n"
    assert pipeline.accepts_chunks and pipeline.process_chunk(read) == 4
    assert proc.buffers.outputs == {}  # staged, not yet added
    assert proc.flush(1010.0) == [("agg.a.sum", 1000.0, sum([0.1, 0.2, 0.3]))]
    assert pipeline.process_chunk(b"in.a.x.sum 2 1003\n") == 1
    assert proc.flush(1020.0) == [("agg.a.sum", 1000.0, sum([0.1, 0.2, 0.3, 2.0]))]


def test_reads_the_chunk_path_leaves_to_the_other_paths():
    proc, _, pipeline = make(RULES, FORWARD_ALL=False)
    assert pipeline.process_chunk(b"in.a.x.sum 1 1000\nin.a.x.sum 1 1010\n") is None  # 2 intervals
    assert pipeline.process_chunk(b"in.a.x.sum 1.50 1000\n") is None  # not canonical
    assert pipeline.process_chunk(b"in.a.x.sum 1 -1\n") is None  # now
    assert pipeline.process_chunk(b"in.a.x.sum 1 1000\n", max_length=10) is None  # overlong
    assert proc.buffers.outputs == {} and not proc._touched
    proc, _, pipeline = make(RULES, FORWARD_ALL=True)  # inputs pass on: tuples
    assert pipeline.process_chunk(b"in.a.x.sum 1 1000\n") is None
    proc, _, pipeline = make(SHARED, FORWARD_ALL=False)  # two rules feed one output
    assert pipeline.process_chunk(b"in.a.x.sum 1 1000\n") is None
    assert pipeline.process_chunk(b"in.b.y.sum 1 1000\n") is None


def test_no_rules_consumes_and_counts_canonical_reads():
    proc, _, pipeline = make("", FORWARD_ALL=False)
    assert pipeline.process_chunk(b"a 1 1000\nb 2 2000\n") == 2
    assert pipeline.process_chunk(b"a 1 -1\n") is None


class _Plain(Processor):
    """A stage that declares only ``process``: reads do not pass it untouched."""

    def process(self, batch):
        return batch


def test_only_stages_that_pass_reads_untouched_may_come_first():
    _, _, pipeline = make(RULES, FORWARD_ALL=False)
    assert pipeline.accepts_chunks
    _, _, pipeline = make(RULES, "[pre]\nx = y\n", FORWARD_ALL=False)  # pre rewrites
    assert not pipeline.accepts_chunks and pipeline.process_chunk(b"a 1 1000\n") is None
    _, _, pipeline = make(RULES, "[post]\nx = y\n", FORWARD_ALL=False)  # post only: fine
    assert pipeline.accepts_chunks
    plain = Pipeline([_Plain(), pipeline.processors[1]], _Sink())  # e.g. a list filter
    assert not plain.accepts_chunks


def test_staging_settles_by_itself_after_many_lines(monkeypatch):
    monkeypatch.setattr("carbon.aggregator.processor.SETTLE_AFTER", 3)
    proc, _, pipeline = make(RULES, FORWARD_ALL=False)
    pipeline.process_chunk(b"in.a.x.sum 1 1000\nin.a.x.sum 2 1000\n")
    assert proc.buffers.outputs == {}
    pipeline.process_chunk(b"in.a.x.sum 4 1000\n")
    assert proc.buffers.outputs["agg.a.sum"].intervals[1000.0].value() == 7.0
    assert not proc._touched


def test_name_cache_stays_bounded_on_the_chunk_path():
    proc, _, pipeline = make(RULES, cache_size=3, FORWARD_ALL=False)
    read = b"".join(b"in.a.h%d.sum %d 1000\n" % (i, i) for i in range(5))
    assert pipeline.process_chunk(read) == 5
    assert len(proc._byte_matches) <= 3
    assert pipeline.process_chunk(read + read) == 10
    assert len(proc._byte_matches) <= 3
    assert proc.flush(1010.0) == [("agg.a.sum", 1000.0, 30.0)]


def test_reloaded_frequencies_restart_the_staging_key():
    """(1000,) is the key of 1009 for 10 s and of 1000 for 8 s: not the same intervals."""
    proc, _, pipeline = make("out (10) = sum in.*\n", FORWARD_ALL=False)
    assert pipeline.process_chunk(b"in.a 1 1009\n") == 1
    proc.set_ruleset(parse_rules("out (8) = sum in.*\n"))
    assert pipeline.process_chunk(b"in.a 2 1000\n") == 1
    # the old rule's buffer is retired with its value; the new one starts at 1000
    assert sorted(proc.flush(1100.0, force=True)) == [("out", 1000.0, 1.0), ("out", 1000.0, 2.0)]
