"""The literal-node rule index never changes which rules match, or their order."""

from __future__ import annotations

from hypothesis import given, settings, strategies as st

from carbon.aggregator.rules import parse_rules

node = st.sampled_from(["a", "b", "web", "db", "x1", "cpu", "count", "g-1", "n_2"])
pattern_node = st.one_of(node, st.just("*"), st.just("<field>"), st.just("web*"),
                         st.just("<<rest>>"))


@settings(max_examples=200, deadline=None)
@given(patterns=st.lists(st.lists(pattern_node, min_size=1, max_size=4), min_size=1,
                         max_size=12),
       names=st.lists(st.lists(node, min_size=1, max_size=5), min_size=1, max_size=20))
def test_indexed_matching_equals_trying_every_rule(patterns, names):
    lines = []
    for number, raw in enumerate(patterns):
        # field names must be unique within a pattern
        parts = [p.replace("field", "f%d" % i).replace("rest", "r%d" % i)
                 for i, p in enumerate(raw)]
        fields = sorted({p.strip("<>") for p in parts if p.startswith("<")})
        output = "out%d" % number + "".join(".<%s>" % f for f in fields)
        lines.append("%s (60) = sum %s" % (output, ".".join(parts)))
    ruleset = parse_rules("\n".join(lines) + "\n")
    expected = []
    for parts in names:
        name = ".".join(parts)
        naive = []
        for rule in ruleset.rules:
            match = rule.regex.match(name)
            if match is not None:
                naive.append((rule, rule.template % match.groupdict()))
        assert list(ruleset.matches(name)) == naive
        expected.append(tuple(naive))
    # the bulk matcher (new names of a read, all at once) gives the same answers
    assert ruleset.resolve_many([".".join(parts) for parts in names]) == expected
