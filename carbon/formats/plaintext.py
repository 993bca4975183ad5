"""The plaintext line format, ``metric value timestamp\n``: parse, check, encode.

One call handles every complete line of a socket read: no per-line callbacks.
Bad lines are returned (truncated) for counting and rate-limited logging; the
good lines around them are kept. ``parse_lines`` has a C twin (``_plaintext.c``) that
runs when built; ``parse_lines_py`` is the specification both are tested against.

``canonical_lines`` is the lean path for a read whose every line is already in
the form carbon's line client writes: it checks the whole read with a few C-level
operations (splits, one regex over the values, one over the timestamps) and returns
the lines and names as bytes (a ``LineBatch``), or None when any line needs
``parse_lines``.

``encode_line`` writes points as carbon's line client does; ``decode_line_stream``
reads them back (relay spools, test sinks) with ``parse_lines``'s rules.
"""

from __future__ import annotations

import re
import time

from carbon.batch import Batch

try:  # the C accelerator (setup.py builds it when it can): same results, ~2x faster
    from carbon.formats._plaintext import parse_lines as _native_parse_lines
except ImportError:  # pragma: no cover - depends on the build
    _native_parse_lines = None

MAX_LOGGED_LINE = 400
LINE_DELIMITER = b"\r\n"

# A value whose %.10f form (trailing zeros and dot stripped) is its own text: '-' the
# only sign, no leading zeros; an integer of at most 15 digits (exact as a double),
# or a decimal under 100000 with at most 10 decimals ending in a non-zero digit (the
# double is then within 1.5e-11 of it, so %.10f rounds back to the same digits).
# Possessive quantifiers: the same language, without backtracking bookkeeping.
_INTEGER = rb"-?+(?:0|[1-9][0-9]{0,14}+)"
# (Inside a possessive repeat each item matches on its own: longest alternative first.)
_VALUE = rb"-?+(?:[1-9][0-9]{5,14}+|(?:0|[1-9][0-9]{0,4}+)(?:\.[0-9]{0,9}[1-9])?+)"
_VALUES = re.compile(rb"%s(?: %s)*+" % (_VALUE, _VALUE))
_INTEGERS = re.compile(rb"%s(?: %s)*+" % (_INTEGER, _INTEGER))  # faster when no '.'
# A timestamp whose %d form is its own text and that is not -1 (which means now).
_STAMP = rb"[1-9][0-9]{0,14}+"
_STAMPS = re.compile(rb"%s(?: %s)*+" % (_STAMP, _STAMP))


class LineBatch:
    """Valid plaintext datapoints kept as bytes.

    ``lines[i]`` is ``b"<name> <value> <timestamp>"`` exactly as carbon's line client
    writes that point (value as ``%.10f`` without trailing zeros, integer timestamp),
    without the line terminator; ``names[i]`` is its name and, when given,
    ``values[i]`` and ``stamps[i]`` its other two fields. All lists are the same
    length and in arrival order.
    """

    __slots__ = ("lines", "names", "values", "stamps")

    def __init__(self, lines: list[bytes], names: list[bytes],
                 values: list[bytes] | None = None, stamps: list[bytes] | None = None) -> None:
        self.lines = lines
        self.names = names
        self.values = values
        self.stamps = stamps

    def __len__(self) -> int:
        return len(self.names)

    def points(self) -> Batch:
        """The same datapoints as ``(metric, timestamp, value)`` tuples."""
        if self.values is not None and self.stamps is not None:
            return list(zip(map(bytes.decode, self.names), map(float, self.stamps),
                            map(float, self.values), strict=True))
        return parse_lines(self.lines)[0]


def parse_lines(lines: list[bytes], now: float | None = None,
                resolution: int = 0) -> tuple[Batch, list[bytes]]:
    """Parse complete lines into a batch of (metric, timestamp, value).

    A line is bad if it has not exactly three fields, its name is not UTF-8,
    its value or timestamp is not a finite number. A timestamp of -1 means now
    (as in carbon). With ``resolution``, timestamps are floored to a multiple of it.
    Bad lines are returned as they came, for counting and logging.
    """
    if _native_parse_lines is not None and type(lines) is list:
        return _native_parse_lines(lines, time.time() if now is None else now,
                                   int(resolution or 0))
    return parse_lines_py(lines, now, resolution)


def parse_lines_py(lines: list[bytes], now: float | None = None,
                   resolution: int = 0) -> tuple[Batch, list[bytes]]:
    """The pure-Python ``parse_lines``: the specification the C one is tested against,
    and what runs when the C accelerator is not built."""
    batch: Batch = []
    bad: list[bytes] = []
    append = batch.append
    for line in lines:
        parts = line.split()
        if len(parts) != 3:
            if parts:
                bad.append(line)
            continue
        try:
            name = parts[0].decode("utf-8")
            value = float(parts[1])
            stamp = float(parts[2])
        except (ValueError, UnicodeDecodeError):
            bad.append(line)
            continue
        # x - x is 0.0 only for finite x (inf - inf and nan - nan are nan).
        if value - value != 0.0 or stamp - stamp != 0.0:
            bad.append(line)
            continue
        if -2.0 < stamp <= -1.0:
            stamp = now if now is not None else time.time()
        if resolution:
            stamp = float(int(stamp) // resolution * resolution)
        append((name, stamp, value))
    return batch, bad


def canonical_lines(chunk: bytes, max_length: int = 0) -> LineBatch | None:
    """Lines of ``chunk`` (complete lines, each ending in ``\\n``) as a LineBatch, if
    every line is valid, canonical and at most ``max_length`` bytes; else None.

    Canonical: ``name value timestamp`` separated by single spaces, an optional
    ``\\r`` before the newline, a UTF-8 name and value and timestamp written exactly
    as carbon's line client would write them after parsing (see ``_VALUE``,
    ``_STAMP``). Such a line is valid for ``parse_lines`` and forwarding its bytes
    is the same as parsing and re-encoding it. Anything else returns None and the
    caller uses ``parse_lines``, which applies every rule.
    """
    original = chunk
    if b"\r" in chunk:
        chunk = chunk.replace(b"\r\n", b"\n")
        if b"\r" in chunk:
            return None
    if b"\t" in chunk or b"\x0b" in chunk or b"\x0c" in chunk:
        return None
    if not chunk.isascii():
        try:
            chunk.decode("utf-8")
        except UnicodeDecodeError:
            return None
    lines = chunk.split(b"\n")
    if lines.pop() or not lines:
        return None  # not newline-terminated, or empty
    count = len(lines)
    if max_length and len(chunk) > max_length and max(map(len, (
            lines if chunk is original else original.split(b"\n")))) > max_length:
        return None  # the receiver drops overlong lines
    # Each line "n v t" becomes the tokens n, v, t, "\n": 4 per line if and only if
    # every line has exactly three single-space separated fields.
    tokens = chunk.replace(b"\n", b" \n ").split(b" ")
    if len(tokens) != 4 * count + 1 or tokens[3::4].count(b"\n") != count:
        return None
    names = tokens[0:4 * count:4]
    if b"" in names:
        return None
    values = tokens[1::4]
    joined = b" ".join(values)
    if not (_VALUES if b"." in joined else _INTEGERS).fullmatch(joined):
        return None
    stamps = tokens[2::4]
    if not _STAMPS.fullmatch(b" ".join(stamps)):
        return None
    return LineBatch(lines, names, values, stamps)


def split_buffer(buffer: bytes, max_length: int) -> tuple[list[bytes], bytes, int]:
    """Split a receive buffer into complete lines and the unfinished tail.

    Returns (lines, tail, overlong): lines longer than ``max_length`` are dropped
    and counted in ``overlong``; an unfinished tail longer than ``max_length`` is
    discarded too (the rest of that line will be skipped by the caller).
    """
    lines = buffer.split(b"\n")
    tail = lines.pop()
    overlong = 0
    if max_length and lines and max(map(len, lines)) > max_length:
        kept = [line for line in lines if len(line) <= max_length]
        overlong = len(lines) - len(kept)
        lines = kept
    return lines, tail, overlong


def printable(line: bytes) -> str:
    """A bad line as it is logged: decoded leniently and cut to 400 characters."""
    text = line.strip().decode("utf-8", "backslashreplace")
    if len(text) > MAX_LOGGED_LINE:
        text = text[:MAX_LOGGED_LINE] + "..."
    return text


def format_value(value: float) -> str:
    """The reference line client's value text: ``%.10f`` minus trailing zeros and dot."""
    if isinstance(value, float):
        return ("%.10f" % value).rstrip("0").rstrip(".")
    return "%d" % value


def encode_line(points: Batch, max_per_message: int = 500) -> tuple[bytes, int, int]:
    """Encode ``points`` as plaintext lines; points that cannot be written are skipped.

    Returns (bytes, lines, points) like the pickle encoder (``max_per_message`` is
    accepted for that symmetry; lines need no messages).
    """
    try:
        text = "".join(["%s %s %d\r\n" % (m, ("%.10f" % v).rstrip("0").rstrip("."), t)
                        for m, t, v in points])
        return text.encode("utf-8"), len(points), len(points)
    except (ValueError, OverflowError, TypeError):
        pass
    lines = []
    for m, t, v in points:
        try:
            lines.append("%s %s %d\r\n" % (m, format_value(v), t))
        except (ValueError, OverflowError, TypeError):
            continue
    return "".join(lines).encode("utf-8"), len(lines), len(lines)


def decode_line_stream(buffer: bytes) -> tuple[Batch, bytes, int]:
    """Decode complete lines with ``parse_lines``'s rules (three fields, a UTF-8 name, a
    finite value and timestamp); returns (points, unfinished tail, bad lines)."""
    lines = buffer.split(b"\n")
    tail = lines.pop()
    points, bad = parse_lines(lines)
    return points, tail, len(bad)
