"""aggregation-rules.conf parsing, matching, caching and reloading."""

import json
import os
from pathlib import Path

import pytest

from carbon.aggregator.methods import AGGREGATION_METHODS
from carbon.aggregator.rules import (
    RuleSet,
    RulesFile,
    build_input_regex,
    load_rules,
    parse_rule,
    parse_rules,
    reload_rules,
)
from carbon.config.errors import ConfigError

REFERENCE = json.loads((Path(__file__).parent / "data" / "reference_vectors.json").read_text())

EXAMPLE = """\
# The form of each line in this file should be as follows:
#   output_template (frequency) = method input_pattern

<env>.applications.<app>.all.requests (60) = sum <env>.applications.<app>.*.requests
<env>.applications.<app>.all.latency (60) = avg <env>.applications.<app>.*.latency

   <env>.applications.<app>.all.<app_metric> (10) = max <env>.applications.<app>.*.<<app_metric>>
"""


def test_regexes_are_built_exactly_as_the_reference_builds_them():
    assert REFERENCE["regexes"], "vector file has no regexes"
    for pattern, expected in REFERENCE["regexes"].items():
        assert build_input_regex(pattern) == expected, pattern


def test_method_names_are_the_reference_ones():
    assert sorted(AGGREGATION_METHODS) == REFERENCE["methods"]


def test_parse_example_file_skips_comments_and_blank_lines():
    rules = parse_rules(EXAMPLE, "agg.conf")
    assert len(rules) == 3
    first = rules.rules[0]
    assert (first.output_pattern, first.frequency, first.method) == (
        "<env>.applications.<app>.all.requests", 60, "sum")
    assert first.line == 4 and first.path == "agg.conf"
    assert rules.rules[2].frequency == 10 and rules.rules[2].line == 7


def test_field_captures_one_node_and_double_field_captures_across_dots():
    rules = parse_rules(EXAMPLE)
    assert rules.get_aggregate_metrics("prod.applications.apache.www01.requests") == [
        (rules.rules[0], "prod.applications.apache.all.requests"),
        (rules.rules[2], "prod.applications.apache.all.requests"),
    ]
    assert rules.get_aggregate_metric("prod.applications.apache.www01.a.b.c") == (
        "prod.applications.apache.all.a.b.c")
    # <app> does not cross a dot, so a dotted app name does not match rule 1.
    assert rules.rules[0].match("prod.applications.a.b.www01.requests") is None
    assert rules.get_aggregate_metric("nothing.here") is None
    assert rules.get_aggregate_metrics("nothing.here") == []


def test_star_matches_one_node_and_partial_star_within_a_node():
    rule = parse_rule("servers.all.cpu (60) = sum servers.*.cpu")
    assert rule.match("servers.web1.cpu") == "servers.all.cpu"
    assert rule.match("servers.web1.extra.cpu") is None
    assert rule.match("servers..cpu") is None  # lone * needs at least one character
    rule = parse_rule("web.total (60) = sum web*.hits")
    assert rule.match("web.hits") == "web.total"
    assert rule.match("web01.hits") == "web.total"


def test_match_is_anchored_at_both_ends():
    rule = parse_rule("a.total (60) = sum a.<x>.b")
    assert rule.match("a.1.b") == "a.total"
    assert rule.match("za.1.b") is None
    assert rule.match("a.1.bz") is None


def test_regex_text_inside_a_node_is_kept():
    rule = parse_rule(
        r"<env>.apps.<app>.<domain>.requests (60) = sum <env>.apps.<app>.<domain>\d{2}.requests")
    assert rule.match("prod.apps.apache.www01.requests") == "prod.apps.apache.www.requests"
    assert rule.match("prod.apps.apache.wwwxx.requests") is None


def test_output_template_with_percent_and_double_brackets():
    rule = parse_rule("<a>.100%.<<b>> (60) = sum <a>.<<b>>")
    assert rule.match("x.y.z") == "x.100%.y.z"


def test_frequency_may_be_written_without_parentheses():
    assert parse_rule("out 30 = sum in").frequency == 30


@pytest.mark.parametrize("line, reason", [
    ("out (60) sum in", "expected 'output_template (frequency) = method input_pattern'"),
    ("out = sum in", "left of '='"),
    ("out extra (60) = sum in", "left of '='"),
    ("out (60) = sum", "right of '='"),
    ("out (60) = sum in # comment", "right of '='"),
    ("out (sixty) = sum in", "frequency must be an integer"),
    ("out (0) = sum in", "frequency must be a positive"),
    ("out (60) = median in", "Invalid aggregation method 'median'"),
    ("out (60) = sum in.(unclosed", "not a valid regular expression"),
    ("out.<missing> (60) = sum in.<field>", "<missing> not captured"),
    ("out.<x (60) = sum in.<x>", "unmatched '<' or '>'"),
    ("<a>.<a> (60) = sum <a>.<a>", "not a valid regular expression"),
])
def test_bad_rule_names_file_line_and_reason(line, reason):
    text = "# header\n\nok (60) = sum ok.*\n" + line + "\n"
    with pytest.raises(ConfigError) as info:
        parse_rules(text, "/etc/carbon/aggregation-rules.conf")
    err = info.value
    assert err.path == "/etc/carbon/aggregation-rules.conf"
    assert err.line == 4
    assert reason in err.reason
    assert "line 4" in str(err)


def test_missing_file_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError) as info:
        load_rules(str(tmp_path / "nope.conf"))
    assert "cannot read" in info.value.reason


def test_lru_cache_is_bounded_and_answers_stay_correct():
    rules = RuleSet([parse_rule("all.<b> (60) = sum <a>.<b>")], cache_size=50)
    for i in range(1000):
        assert rules.get_aggregate_metric("host%d.m%d" % (i, i % 7)) == "all.m%d" % (i % 7)
    assert rules.cached_names == 50
    for i in range(1000):  # evicted names are recomputed correctly
        assert rules.get_aggregate_metric("host%d.m%d" % (i, i % 7)) == "all.m%d" % (i % 7)
    assert rules.cached_names == 50
    uncached = RuleSet(rules.rules, cache_size=0)
    assert uncached.get_aggregate_metric("h.x") == "all.x" and uncached.cached_names == 0


def test_cached_answer_cannot_be_mutated_through_the_public_api():
    rules = parse_rules(EXAMPLE)
    first = rules.get_aggregate_metrics("prod.applications.a.b.requests")
    first.clear()
    assert len(rules.get_aggregate_metrics("prod.applications.a.b.requests")) == 2


def _write(path, text, mtime):
    path.write_text(text)
    os.utime(path, (mtime, mtime))


def test_reload_keeps_old_rules_when_the_new_file_fails(tmp_path):
    path = tmp_path / "aggregation-rules.conf"
    _write(path, "total (60) = sum *.hits\n", 1000)
    old = load_rules(str(path))
    _write(path, "total (60) = sum *.hits\nbroken line here\n", 2000)
    kept, error = reload_rules(str(path), old)
    assert kept is old
    assert error is not None and error.line == 2 and error.path == str(path)
    assert kept.get_aggregate_metric("a.hits") == "total"
    path.unlink()
    kept, error = reload_rules(str(path), old)
    assert kept is old and error is not None


def test_rules_file_reloads_on_change_and_survives_bad_edits(tmp_path):
    path = tmp_path / "aggregation-rules.conf"
    _write(path, "total (60) = sum *.hits\n", 1000)
    watched = RulesFile(str(path), cache_size=10)
    assert watched.check() == (False, None)
    _write(path, "total (60) = sum *.hits\nx (60) = nosuch y\n", 2000)
    changed, error = watched.check()
    assert not changed and error.line == 2 and "nosuch" in error.reason
    assert watched.ruleset.get_aggregate_metric("a.hits") == "total"
    assert watched.check() == (False, None)  # a bad file is reported once
    _write(path, "total2 (30) = avg *.hits\n", 3000)
    changed, error = watched.check()
    assert changed and error is None
    assert watched.ruleset.get_aggregate_metric("a.hits") == "total2"
    assert watched.ruleset.cache_size == 10
