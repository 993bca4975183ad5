"""rewrite-rules.conf and the pre/post rewrite stages around aggregation."""

import os

import pytest

from carbon.aggregator.buffers import BufferManager
from carbon.aggregator.processor import AggregationConfig, AggregationProcessor
from carbon.aggregator.rules import parse_rules
from carbon.config.errors import ConfigError
from carbon.config.settings import Settings
from carbon.instrumentation.stats import Stats
from carbon.pipeline import Pipeline, Sink
from carbon.rewrite import (
    POST,
    PRE,
    RewriteProcessor,
    RewriteRulesFile,
    load_rewrite_rules,
    parse_rewrite_rules,
)

TEXT = """\
# rewrite rules
[pre]
^old\\.    = new.
-          = _

[POST]
_sum$ =
^new\\.(\\w+)\\.raw$ = forwarded.\\1
"""


class ListSink(Sink):
    def __init__(self):
        self.points = []

    def put_many(self, batch):
        self.points.extend(batch)


def test_sections_rules_and_python_re_semantics():
    rules = parse_rewrite_rules(TEXT, "rw.conf")
    assert [r.pattern for r in rules.rules(PRE)] == ["^old\\.", "-"]
    assert [r.replacement for r in rules.rules(POST)] == ["", "forwarded.\\1"]
    assert rules.errors == []
    assert rules.apply(PRE, "old.a-b-c") == "new.a_b_c"  # every occurrence replaced
    assert rules.apply(POST, "new.web.raw") == "forwarded.web"  # group reference
    assert rules.apply(POST, "x.requests_sum") == "x.requests"  # empty replacement
    assert rules.apply("other", "old.a") == "old.a"


def test_repeated_section_heading_starts_it_afresh_like_the_reference():
    rules = parse_rewrite_rules("[pre]\na = b\n[post]\nc = d\n[pre]\ne = f\n")
    assert [r.pattern for r in rules.rules(PRE)] == ["e"]
    assert [r.pattern for r in rules.rules(POST)] == ["c"]


def test_bad_lines_are_skipped_with_errors_or_raised_when_strict():
    text = "[pre]\na = b\n(unclosed = x\nno equals sign\nc = \\9\n"
    rules = parse_rewrite_rules(text, "rw.conf")
    assert [r.pattern for r in rules.rules(PRE)] == ["a"]
    assert [e.line for e in rules.errors] == [3, 4, 5]
    assert all(e.path == "rw.conf" for e in rules.errors)
    assert "Invalid regular expression" in rules.errors[0].reason
    assert "not a section heading or rule" in rules.errors[1].reason
    assert "invalid group reference" in rules.errors[2].reason
    with pytest.raises(ConfigError) as info:
        parse_rewrite_rules(text, "rw.conf", strict=True)
    assert info.value.line == 3
    outside = parse_rewrite_rules("a = b\n")
    assert outside.errors[0].line == 1 and "outside any section" in outside.errors[0].reason


def test_processor_rewrites_names_and_keeps_points_untouched_otherwise():
    proc = RewriteProcessor(parse_rewrite_rules(TEXT), PRE, cache_size=2)
    batch = [("old.a-b", 1.0, 2.0), ("keep.me", 3.0, 4.0), ("old.c", 5.0, 6.0)] * 3
    out = proc.process(batch)
    assert out == [("new.a_b", 1.0, 2.0), ("keep.me", 3.0, 4.0), ("new.c", 5.0, 6.0)] * 3
    assert out[1] is batch[1]
    empty = RewriteProcessor(parse_rewrite_rules(TEXT), "nosuch")
    assert empty.process(batch) is batch


def test_pre_runs_before_aggregation_and_post_after_it():
    """rewrite:pre -> aggregate -> rewrite:post -> sink; aggregates go straight out."""
    rewrite = parse_rewrite_rules(TEXT)
    settings = Settings()
    agg = AggregationProcessor(
        parse_rules("new.all.raw_sum (60) = sum new.*.raw\n"),
        BufferManager.from_settings(settings), AggregationConfig.from_settings(settings),
        Stats())
    sink = ListSink()
    pipeline = Pipeline([RewriteProcessor(rewrite, PRE), agg, RewriteProcessor(rewrite, POST)],
                        sink)
    pipeline.process([("old.web.raw", 960.0, 1.0), ("old.db.raw", 961.0, 2.0)])
    # pre renamed old.* to new.* so the rule matched; post then rewrote the
    # forwarded names, which only works on the pre-rewritten form.
    assert sink.points == [("forwarded.web", 960.0, 1.0), ("forwarded.db", 961.0, 2.0)]
    # Generated aggregates are not run through [post] (so _sum$ is not stripped).
    assert agg.flush(1000) == [("new.all.raw_sum", 960.0, 3.0)]


def test_missing_file_means_no_rules_and_changes_are_picked_up(tmp_path):
    path = tmp_path / "rewrite-rules.conf"
    assert load_rewrite_rules(str(path)).sections == {}
    watched = RewriteRulesFile(str(path))
    assert watched.check() == (False, [])
    path.write_text("[pre]\na = b\nbad line\n")
    os.utime(path, (1000, 1000))
    changed, errors = watched.check()
    assert changed and [e.line for e in errors] == [3]
    assert watched.rules.apply(PRE, "a") == "b"
    assert watched.check() == (False, [])
