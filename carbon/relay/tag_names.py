"""TAG_RELAY_NORMALIZED: tagged series are routed by their normalised names."""

from __future__ import annotations

from carbon.batch import Batch
from carbon.tags import normalize


def normalize_names(batch: Batch) -> Batch:
    """``batch`` with every tagged name (``a;k=v``, ``{...}``, ``~...``) normalised; a
    name that does not parse is kept as received, like the reference."""
    out: Batch = []
    for point in batch:
        name = point[0]
        if ";" in name or "{" in name or name[:1] == "~":
            try:
                normalized = normalize(name)
            except ValueError:
                normalized = name
            if normalized != name:
                point = (normalized, point[1], point[2])
        out.append(point)
    return out
