"""whitelist.conf / blacklist.conf: one regex a line, re-read when the file changes."""

from __future__ import annotations

import re

from carbon.config.errors import ConfigError
from carbon.config.watched import file_mtime


class PatternList:
    """A list of regexes; ``matches(name)`` is true if any regex searches true."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.patterns: list[re.Pattern[str]] = []
        self._mtime = -1.0
        self.reload()

    def reload(self) -> None:
        """Re-read the file if it changed; an invalid regex raises ConfigError."""
        mtime = file_mtime(self.path)
        if mtime is None:
            self.patterns, self._mtime = [], -1.0
            return
        if mtime == self._mtime:
            return
        patterns = []
        with open(self.path, encoding="utf-8") as handle:
            for number, line in enumerate(handle, start=1):
                text = line.strip()
                if not text or text.startswith("#"):
                    continue
                try:
                    patterns.append(re.compile(text))
                except re.error as exc:
                    raise ConfigError("invalid regular expression %r: %s" % (text, exc),
                                      self.path, number) from None
        self.patterns, self._mtime = patterns, mtime

    def __bool__(self) -> bool:
        return bool(self.patterns)

    def matches(self, name: str) -> bool:
        for regex in self.patterns:
            if regex.search(name):
                return True
        return False
