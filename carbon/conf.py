"""``carbon.conf``: the reference module name tools import (carbonate: ``Settings``).

A face over :mod:`carbon.config`, our configuration package. ``Settings()`` starts from
carbon 1.1.10's code defaults, is a dict with attribute access, and ``readFrom(path,
section)`` reads one section of a carbon.conf as the reference does (ConfigParser) and
types each value with the daemons' own parser, ``carbon.config.settings.parse_value``.
The reference's module-level ``settings`` singleton is not provided: our daemons build
their Settings and pass it in.
"""

from __future__ import annotations

from configparser import ConfigParser
from typing import Any

from carbon.config.defaults import DEFAULTS
from carbon.config.settings import Settings as _Settings
from carbon.config.settings import parse_value

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
            self[key] = parse_value(key, value, path)
