"""Tagged series names: parsing, validation, normal form and storage paths."""

from __future__ import annotations

import hashlib
import os

import pytest

from carbon import tags


@pytest.mark.parametrize("name, normal", [
    ("a.b.c", "a.b.c"),
    ("a.b;y=2;x=1", "a.b;x=1;y=2"),
    ("a.b;x=1;y=2", "a.b;x=1;y=2"),
    # Segments sort as whole ";tag=value" strings: "." (0x2e) sorts before "=" (0x3d).
    ("m;a=1;a.b=2", "m;a.b=2;a=1"),
    ("m;x=2;x=1", "m;x=1"),  # a repeated tag: the last one counts
    ("m;name=other;z=1", "m;z=1"),  # "name" is always the metric itself
    ("~m.n;k=v", "m.n;k=v"),  # leading "~" is stripped from the name
    ("~plain", "plain"),
    ("m;k=v=w;j=x~", "m;j=x~;k=v=w"),  # "=" (and "~" not first) allowed in values
    ("m;k=!^", "m;k=!^"),
    ('m{b="2",a="1"}', "m;a=1;b=2"),
    ('m.n{a="x\\"y",b="c\\\\d"}', 'm.n;a=x"y;b=c\\d'),
    ('m{a="1":,b="2"}', "m;a=1;b=2"),  # carbon also accepts ":," between labels
    ("m{a=1}", "m{a=1}"),  # not OpenMetrics (no closing '"}'): a plain name
])
def test_normalize(name: str, normal: str) -> None:
    assert tags.normalize(name) == normal
    assert tags.parse(name).path == normal


@pytest.mark.parametrize("name", [
    "", ";a=b", "~", "~~;a=b", "m;a", "m;=1", "m;a=", "m;a=~x", "m;a!b=1", "m;a^b=1",
    "m;a=1;", 'm{a="1"}}"}', '{a="1"}', 'm{a="1";b="2"}', 'm{a=""}', 'm{!a="1"}',
])
def test_invalid_names_raise_value_error(name: str) -> None:
    with pytest.raises(ValueError):
        tags.normalize(name)
    with pytest.raises(tags.InvalidTaggedName):
        tags.parse(name)


def test_parse_keeps_metric_and_tags() -> None:
    series = tags.parse("~a.b;y=2;x=1")
    assert series.metric == "~a.b"
    assert series.tags == {"x": "1", "y": "2", "name": "a.b"}
    assert tags.format_tags({"name": "q", "b": "1", "a": "2"}) == "q;a=2;b=1"


def test_is_tagged() -> None:
    assert tags.is_tagged("a.b;x=1")
    assert not tags.is_tagged("a.b.x")
    assert not tags.is_tagged('a.b{x="1"}')  # OpenMetrics names are tagged once parsed
    assert tags.is_tagged(tags.normalize('a.b{x="1"}'))


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf8")).hexdigest()


def test_encode_untagged() -> None:
    assert tags.encode("a.b.c", "/") == "a/b/c"
    assert tags.encode("..a.b", "/") == "a/b"
    assert tags.encode("a..b", "/") == "a//b"
    assert tags.encode("a.b.c") == "a.b.c"
    assert tags.decode("a/b/c", "/") == "a.b.c"


def test_encode_tagged_paths() -> None:
    name = "some.metric;tag1=value2;tag2=value.2"
    digest = _sha(name)
    assert tags.encode(name, "/", hash_only=True) == "_tagged/%s/%s/%s" % (
        digest[:3], digest[3:6], digest)
    assert tags.encode(name, "/", hash_only=False) == "_tagged/%s/%s/%s" % (
        digest[:3], digest[3:6], "some_DOT_metric;tag1=value2;tag2=value_DOT_2")
    assert tags.decode(tags.encode(name, "/"), "/") == name
    unicode_name = "m;k=\u00e9"
    assert tags.encode(unicode_name, "/", True).endswith(_sha(unicode_name))


def test_filesystem_path() -> None:
    name = "a.b;x=1"
    digest = _sha(name)
    assert tags.filesystem_path("/data", name, True) == os.path.join(
        "/data", "_tagged", digest[:3], digest[3:6], digest + ".wsp")
    assert tags.filesystem_path("/data", name, False) == os.path.join(
        "/data", "_tagged", digest[:3], digest[3:6], "a_DOT_b;x=1.wsp")
    assert tags.filesystem_path("/data/", "x.y.z", True) == "/data/x/y/z.wsp"
