"""Unit systems and value scaling (si, binary, sec, msec): axis labels and the
render functions that print values (legendValue, ...) share them, as graphite-web's glyph
module serves its functions."""

from __future__ import annotations

import math
from typing import Any, Optional

UNIT_SYSTEMS: dict[str, tuple] = {
    'binary': (('Pi', 1024.0 ** 5), ('Ti', 1024.0 ** 4), ('Gi', 1024.0 ** 3),
               ('Mi', 1024.0 ** 2), ('Ki', 1024.0)),
    'si': (('P', 1000.0 ** 5), ('T', 1000.0 ** 4), ('G', 1000.0 ** 3), ('M', 1000.0 ** 2),
           ('k', 1000.0)),
    'sec': (('Y', 31536000), ('M', 2592000), ('D', 86400), ('H', 3600), ('m', 60)),
    'msec': (('Y', 31536000000), ('M', 2592000000), ('D', 86400000), ('H', 3600000),
             ('m', 60000), ('s', 1000)),
    'none': (),
}


def format_units(v: Any, step: Optional[float] = None, system: str = 'si',
                 units: Optional[str] = None) -> tuple[Any, str]:
    """(scaled value, prefix) for a value in the given unit system (si, binary, sec...)."""
    if v is None:
        return v, ''
    for prefix, size in UNIT_SYSTEMS[system]:
        if abs(v) >= size and (step is None or step >= size):
            scaled = v / size
            if scaled - math.floor(scaled) < 1e-11 and v > 1:
                scaled = float(math.floor(scaled))
            return scaled, prefix + (units or '')
    if v - math.floor(v) < 1e-11 and v > 1:
        v = float(math.floor(v))
    return v, units or ''
