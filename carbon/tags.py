"""Tagged series names, as carbon 1.1.10 understands them.

A tagged name is ``metric;tag=value;...`` (or OpenMetrics ``metric{tag="value",...}``,
which is converted). Its normalised form is the metric followed by the ``;tag=value``
segments sorted as strings (``name`` is always the metric itself). On disk, tagged
series live under ``_tagged/<h[0:3]>/<h[3:6]>/`` where ``h`` is the sha256 of the
name; the file is ``h`` itself (TAG_HASH_FILENAMES) or the name with ``.`` spelled
``_DOT_``. Untagged names map dots to directories.
"""

from __future__ import annotations

import re
from hashlib import sha256
from operator import itemgetter
from os.path import join, sep as os_sep
from typing import Callable, Optional, Sequence

__all__ = [
    "InvalidTaggedName", "TaggedSeries", "validate_tag_and_value", "parse", "normalize",
    "format_tags", "is_tagged", "encode", "decode", "filesystem_path", "needs_normalizing",
    "normalize_batch",
]

PROHIBITED_TAG_CHARS = ";!^="

# One OpenMetrics label: name="value" where value may hold \" and \\ escapes. The
# separator group accepts "," or ":," (carbon 1.1.10 accepts both) or the end.
_OPENMETRICS_LABEL = re.compile(r'([^=]+)="((?:[\\]["\\]|[^"\\])+)"(:?,|$)')


class InvalidTaggedName(ValueError):
    """A metric name that cannot be parsed as a (tagged) series name."""


class TaggedSeries:
    """A parsed series: the metric as given and its tags (``name`` included)."""

    __slots__ = ("metric", "tags")

    def __init__(self, metric: str, tags: dict[str, str]) -> None:
        self.metric = metric
        self.tags = tags

    @property
    def path(self) -> str:
        """The normalised name: ``name`` then ``;tag=value`` segments in sorted order."""
        return format_tags(self.tags)

    def __repr__(self) -> str:
        return "TaggedSeries(%r, %r)" % (self.metric, self.tags)


def validate_tag_and_value(tag: str, value: str) -> None:
    """Raise InvalidTaggedName unless ``tag=value`` is allowed in a series name."""
    if not tag:
        raise InvalidTaggedName("Tag may not be empty")
    if not value:
        raise InvalidTaggedName('Value for tag "%s" may not be empty' % tag)
    for char in PROHIBITED_TAG_CHARS:
        if char in tag:
            raise InvalidTaggedName('Character "%s" is not allowed in tag "%s"' % (char, tag))
    if ";" in value:
        raise InvalidTaggedName(
            'Character ";" is not allowed in value "%s" of tag %s' % (value, tag))
    if value[0] == "~":
        raise InvalidTaggedName('Tag values are not allowed to start with "~" in tag "%s"' % tag)


def _name_tag(metric: str) -> str:
    """The metric as a ``name`` tag value: leading ``~`` removed, never empty."""
    value = metric.lstrip("~")
    if not value:
        raise InvalidTaggedName(
            "Cannot use metric name %s as tag value, results in an empty string" % metric)
    return value


def _parse_carbon(path: str) -> TaggedSeries:
    segments = path.split(";")
    metric = segments[0]
    if not metric:
        raise InvalidTaggedName("Cannot parse path %s, no metric found" % path)
    tags: dict[str, str] = {}
    for segment in segments[1:]:
        tag, eq, value = segment.partition("=")
        if not eq or not tag:
            raise InvalidTaggedName("Cannot parse path %s, invalid segment %s" % (path, segment))
        validate_tag_and_value(tag, value)
        tags[tag] = value
    tags["name"] = _name_tag(metric)
    return TaggedSeries(metric, tags)


def _parse_openmetrics(path: str) -> TaggedSeries:
    parts = path[:-1].split("{", 2)
    if len(parts) != 2:
        raise InvalidTaggedName("Cannot parse path %s, more than one '{'" % path)
    metric, rawtags = parts
    if not metric:
        raise InvalidTaggedName("Cannot parse path %s, no metric found" % path)
    tags: dict[str, str] = {}
    while rawtags:
        match = _OPENMETRICS_LABEL.match(rawtags)
        if not match:
            raise InvalidTaggedName("Cannot parse path %s, invalid segment %s" % (path, rawtags))
        tag = match.group(1)
        value = match.group(2).replace('\\"', '"').replace("\\\\", "\\")
        validate_tag_and_value(tag, value)
        tags[tag] = value
        rawtags = rawtags[len(match.group(0)):]
    tags["name"] = _name_tag(metric)
    return TaggedSeries(metric, tags)


def parse(path: str) -> TaggedSeries:
    """Parse a carbon (``a.b;x=1``) or OpenMetrics (``a.b{x="1"}``) series name.

    Raises InvalidTaggedName (a ValueError) for names carbon 1.1.10 rejects.
    """
    if path[-2:] == '"}' and "{" in path:
        return _parse_openmetrics(path)
    return _parse_carbon(path)


def format_tags(tags: dict[str, str]) -> str:
    """``name`` followed by the other ``;tag=value`` segments, sorted as whole strings."""
    return tags.get("name", "") + "".join(
        sorted(";%s=%s" % (tag, value) for tag, value in tags.items() if tag != "name"))


def normalize(path: str) -> str:
    """The normalised series name, equal to carbon 1.1.10's ``TaggedSeries.parse(path).path``.

    Untagged names come back unchanged (minus any leading ``~``). Raises InvalidTaggedName.
    """
    if ";" not in path and "{" not in path and path[:1] != "~":
        if not path:
            raise InvalidTaggedName("Cannot parse path %s, no metric found" % path)
        return path
    return parse(path).path


def needs_normalizing(name: str) -> bool:
    """True when carbon 1.1.10's ``TaggedSeries.parse(name).path`` may differ from ``name``
    or fail: a ``;``, a leading ``~``, an OpenMetrics ``{...}`` form, or an empty name."""
    return ";" in name or name[:1] == "~" or (name[-2:] == '"}' and "{" in name) or not name


def _any_needs_normalizing(names: list[str]) -> bool:
    """``any(map(needs_normalizing, names))`` as C-level single-character searches (a
    false positive only costs the exact per-name check)."""
    joined = "".join(names)
    return ";" in joined or "~" in joined or "}" in joined or not all(names)


Point = tuple  # (metric, timestamp, value)


def normalize_batch(batch: Sequence[Point],
                    on_invalid: Callable[[str, ValueError], Optional[str]]) -> Sequence[Point]:
    """Points with every name as carbon 1.1.10 stores or routes it
    (``TaggedSeries.parse(name).path``: tags sorted, OpenMetrics labels converted, a
    leading ``~`` dropped). A name that does not parse is replaced by
    ``on_invalid(name, error)``, or its point left out when that returns None. A batch
    with nothing to change is returned as it is."""
    if not batch or not _any_needs_normalizing(list(map(itemgetter(0), batch))):
        return batch
    out = []
    for point in batch:
        name = point[0]
        if needs_normalizing(name):
            try:
                normal = normalize(name)
            except ValueError as exc:
                normal = on_invalid(name, exc)
                if normal is None:
                    continue
            if normal != name:
                point = (normal,) + tuple(point[1:])
        out.append(point)
    return out


def is_tagged(name: str) -> bool:
    """True when ``name`` is a tagged series name (carbon's test: it contains ``;``)."""
    return ";" in name


def encode(metric: str, sep: str = ".", hash_only: bool = False) -> str:
    """The storage path of ``metric`` relative to the data directory, without extension.

    Untagged: dots become ``sep`` and leading separators are dropped. Tagged:
    ``_tagged/<h[0:3]>/<h[3:6]>/<h or name with '.' as '_DOT_'>`` joined with ``sep``.
    """
    if ";" in metric:
        digest = sha256(metric.encode("utf8")).hexdigest()
        leaf = digest if hash_only else metric.replace(".", "_DOT_")
        return sep.join(("_tagged", digest[0:3], digest[3:6], leaf))
    return metric.replace(".", sep).lstrip(sep)


def decode(path: str, sep: str = ".") -> str:
    """The series name of a storage path produced by ``encode`` (hash-only paths stay hashes)."""
    if path.startswith("_tagged"):
        return path.split(sep, 3)[-1].replace("_DOT_", ".")
    return path.replace(sep, ".")


def filesystem_path(data_dir: str, metric: str, hash_only: bool, suffix: str = ".wsp") -> str:
    """The file holding ``metric`` under ``data_dir`` (``hash_only`` is TAG_HASH_FILENAMES)."""
    return join(data_dir, encode(metric, os_sep, hash_only=hash_only) + suffix)
