"""Parse plaintext ``metric value timestamp`` lines in bulk.

One call handles every complete line of a socket read: no per-line callbacks.
Bad lines are returned (truncated) for counting and rate-limited logging; the
good lines around them are kept.
"""

from __future__ import annotations

import time

from carbon.pipeline import Batch

MAX_LOGGED_LINE = 400


def parse_lines(lines: list[bytes], now: float | None = None,
                resolution: int = 0) -> tuple[Batch, list[bytes]]:
    """Parse complete lines into a batch of (metric, timestamp, value).

    A line is bad if it has not exactly three fields, its name is not UTF-8,
    its value or timestamp is not a finite number. A timestamp of -1 means now
    (as in carbon). With ``resolution``, timestamps are floored to a multiple of it.
    """
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


def split_buffer(buffer: bytes, max_length: int) -> tuple[list[bytes], bytes, int]:
    """Split a receive buffer into complete lines and the unfinished tail.

    Returns (lines, tail, overlong): lines longer than ``max_length`` are dropped
    and counted in ``overlong``; an unfinished tail longer than ``max_length`` is
    discarded too (the rest of that line will be skipped by the caller).
    """
    lines = buffer.split(b"\n")
    tail = lines.pop()
    overlong = 0
    if max_length and any(len(line) > max_length for line in lines):
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
