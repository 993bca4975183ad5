"""Stage a whole socket read of canonical lines in one call.

``stage(chunk, max_length, matches, extra, lo, hi, touched)`` is the aggregator's
lean path for a read (complete lines). It returns:

* None when the read is not handled: a line is not canonical (exactly as
  ``canonical_lines`` decides, including the ``max_length`` limit; 0 means none)
  or has a timestamp ``t`` outside ``lo <= t < hi``. Nothing was staged.
* With ``matches`` None: the number of lines (they were only checked).
* A list of the names (bytes, first-seen order, no repeats) found neither in
  ``matches`` nor in ``extra`` (dicts of name -> tuple of staging lists, or None).
  Nothing was staged; look them up and call again.
* Otherwise the number of lines: each value (as ``float()`` converts it) was appended
  to every list of its name's tuple, in line order, and a list receiving its first
  value was appended to ``touched``.

The C accelerator ``carbon.aggregator._staging`` implements it when built;
``stage_chunk`` below is the pure-Python twin, with identical results.
"""

from __future__ import annotations

from carbon.formats.plaintext import canonical_lines

_NOT_STAGING = "staging entries must be tuples of lists"


def stage_chunk(chunk: bytes, max_length: int, matches: dict | None, extra: dict | None,
                lo: int, hi: int, touched: list | None) -> int | list[bytes] | None:
    """The pure-Python ``stage`` (see the module docstring)."""
    batch = canonical_lines(chunk, max_length)
    if batch is None:
        return None
    assert batch.stamps is not None and batch.values is not None
    for stamp in set(batch.stamps):
        if not lo <= int(stamp) < hi:
            return None
    if matches is None:
        return len(batch)
    found = []
    unknown: dict[bytes, None] = {}
    for name in batch.names:
        slots = matches.get(name)
        if slots is None and extra is not None:
            slots = extra.get(name)
        if slots is None:
            unknown[name] = None
            continue
        if not isinstance(slots, tuple) or not all(isinstance(s, list) for s in slots):
            raise TypeError(_NOT_STAGING)
        found.append(slots)
    if unknown:
        return list(unknown)
    assert touched is not None
    append_values(found, batch.values, touched)
    return len(batch)


def append_values(found: list[tuple[list, ...]], values: list[bytes], touched: list) -> None:
    """Append each value (as ``float()`` converts it) to every staging list of its
    name's tuple, in order; a list receiving its first value is added to ``touched``."""
    for slots, text in zip(found, values, strict=True):
        if slots:
            value = float(text)
            for slot in slots:
                if not slot:
                    touched.append(slot)
                slot.append(value)


try:
    from carbon.aggregator._staging import stage
except ImportError:  # the C accelerator was not built
    stage = stage_chunk
