"""Files re-read when they change (rules files): what tells that they changed."""

from __future__ import annotations

import os


def file_mtime(path: str) -> float | None:
    """``path``'s modification time, or None when it cannot be read (missing)."""
    try:
        return os.stat(path).st_mtime
    except OSError:
        return None
