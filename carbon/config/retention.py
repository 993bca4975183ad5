"""Retention definitions such as ``10s:1d`` or ``60:1440``."""

from __future__ import annotations

import re

UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}
# Longer spellings whisper accepts; carbon 1.1.10 itself only takes one letter.
UNIT_WORDS = {"seconds": "s", "minutes": "m", "hours": "h", "days": "d", "weeks": "w",
              "years": "y", "min": "m"}
_AMOUNT = re.compile(r"^(\d+)([a-z]*)$")


def _unit(word: str) -> int:
    if word in UNIT_SECONDS:
        return UNIT_SECONDS[word]
    for long_name, letter in UNIT_WORDS.items():
        if long_name.startswith(word) or word.startswith(long_name):
            return UNIT_SECONDS[letter]
    raise ValueError("Invalid unit '%s'" % word)


def parse_retention(text: str) -> tuple[int, int]:
    """``"10s:1d"`` -> ``(10, 8640)``: (seconds per point, number of points)."""
    try:
        precision_text, points_text = text.strip().split(":")
    except ValueError:
        raise ValueError("Invalid retention definition '%s'" % text.strip()) from None
    match = _AMOUNT.match(precision_text.strip())
    if not match:
        raise ValueError("Invalid precision specification '%s'" % precision_text)
    precision = int(match.group(1)) * (_unit(match.group(2)) if match.group(2) else 1)
    match = _AMOUNT.match(points_text.strip())
    if not match:
        raise ValueError("Invalid retention specification '%s'" % points_text)
    if match.group(2):
        points = int(match.group(1)) * _unit(match.group(2)) // precision
    else:
        points = int(match.group(1))
    if precision <= 0 or points <= 0:
        raise ValueError("Retention '%s' must have positive precision and points" % text)
    return precision, points
