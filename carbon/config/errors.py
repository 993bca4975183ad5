"""Configuration errors that name the file, line and key at fault."""

from __future__ import annotations


class ConfigError(Exception):
    """An invalid configuration value or rule.

    The message always names the file and, where known, the line and key so an
    operator can fix it without reading a traceback.
    """

    def __init__(self, message: str, path: str | None = None, line: int | None = None,
                 key: str | None = None) -> None:
        self.path = path
        self.line = line
        self.key = key
        self.reason = message
        where = []
        if path:
            where.append(str(path))
        if line is not None:
            where.append("line %d" % line)
        if key:
            where.append("key %s" % key)
        prefix = ", ".join(where)
        super().__init__("%s: %s" % (prefix, message) if prefix else message)
