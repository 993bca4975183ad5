"""``carbon.conf``: the reference module name tools import (carbonate: ``Settings``).

A face over :mod:`carbon.config`, our configuration package. ``Settings()`` starts from
carbon 1.1.10's code defaults, is a dict with attribute access, and ``readFrom(path,
section)`` reads one section of a carbon.conf with the reference's typing (a key's
default type decides: lists split on commas, booleans as ConfigParser reads them,
anything else a number when it parses as one). The reference's module-level
``settings`` singleton is not provided: our daemons build their Settings and pass it in.
"""

from __future__ import annotations

from configparser import ConfigParser
from typing import Any

from carbon.config.defaults import DEFAULTS
from carbon.config.settings import Settings as _Settings

defaults: dict[str, Any] = dict(DEFAULTS)


class CarbonConfigException(Exception):
    """A carbon.conf that cannot be read (the reference's exception name)."""


class Settings(_Settings):
    """carbon 1.1.10's ``carbon.conf.Settings``: defaults, item and attribute access."""

    def readFrom(self, path: str, section: str) -> None:  # noqa: N802 - reference name
        """Read ``section`` of ``path`` over the current values (missing section: no-op)."""
        parser = ConfigParser()
        if not parser.read(path):
            raise CarbonConfigException("Failed to read config file %s" % path)
        if not parser.has_section(section):
            return
        for key, value in parser.items(section):
            key = key.upper()
            kind = type(DEFAULTS[key]) if key in DEFAULTS else str
            if kind is list:
                self[key] = [v.strip() for v in value.split(",")]
            elif kind is bool:
                self[key] = parser.getboolean(section, key)
            else:
                self[key] = _number_or_text(value)


def _number_or_text(value: str) -> Any:
    for kind in (int, float):
        try:
            return kind(value)
        except ValueError:
            pass
    return value
