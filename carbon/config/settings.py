"""The Settings object: every daemon's configuration, loaded once and passed in."""

from __future__ import annotations

import difflib
from typing import Any

from carbon.config.defaults import DEFAULTS, PATH_KEYS
from carbon.config.errors import ConfigError

_TRUE = {"1", "yes", "true", "on"}
_FALSE = {"0", "no", "false", "off"}


class Settings(dict):
    """A dict of carbon.conf keys with attribute access (``settings.MAX_CACHE_SIZE``).

    A fresh Settings holds carbon 1.1.10's code defaults. Nothing here is global:
    each daemon (and each test) builds its own and passes it to the parts it uses.
    """

    def __init__(self, **overrides: Any) -> None:
        super().__init__()
        for key, value in DEFAULTS.items():
            self[key] = list(value) if isinstance(value, list) else value
        self.update(overrides)

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None

    def __setattr__(self, name: str, value: Any) -> None:
        self[name] = value

    def set_from_text(self, key: str, text: str, path: str | None = None,
                      line: int | None = None) -> None:
        """Parse ``text`` into the type of ``key``'s default and store it."""
        self[key] = parse_value(key, text, path, line)


def parse_value(key: str, text: str, path: str | None = None, line: int | None = None) -> Any:
    """Convert a carbon.conf value to the type of its default, as carbon 1.1.10's
    ``Settings.readFrom`` does: booleans by ConfigParser's words (1/yes/true/on,
    0/no/false/off), lists split on commas and stripped, a key without a default (or
    defaulting to None) a number when the text is one, else text. The one parser of
    the daemons' loader and of ``carbon.conf.Settings.readFrom``. On purpose:

    - a value the default's type cannot take (``MAX_CACHE_SIZE = lots``, ``ENABLE_X =
      maybe``) is a ConfigError naming file, line and key (carbon keeps the text, or
      raises ValueError for a boolean, and fails later with a traceback);
    - a text key stays text (carbon makes ``USER = 1000`` or ``AMQP_PASSWORD = 1234`` a
      number, which then fails where a string is needed), and so do path keys;
    - empty list entries (``a, b,``) are dropped (carbon keeps '', which its
      DESTINATIONS parser refuses and every consumer here skipped anyway).
    """
    default = DEFAULTS.get(key)
    text = text.strip()
    if isinstance(default, bool):
        low = text.lower()
        if low in _TRUE:
            return True
        if low in _FALSE:
            return False
        raise ConfigError("invalid boolean %r (use True or False)" % text, path, line, key)
    if isinstance(default, list):
        return [v.strip() for v in text.split(",") if v.strip()]
    if isinstance(default, (int, float)) and key not in PATH_KEYS:
        try:
            return int(text)
        except ValueError:
            pass
        try:
            return float(text)
        except ValueError:
            raise ConfigError("invalid number %r" % text, path, line, key) from None
    # Strings and None-defaulted keys: numbers when they look like numbers.
    if default is None:
        try:
            return int(text)
        except ValueError:
            try:
                return float(text)
            except ValueError:
                return text
    return text


def nearest_key(key: str, known: list[str] | None = None) -> str | None:
    """The known key closest to a misspelled one, or None."""
    candidates = known if known is not None else list(DEFAULTS) + list(PATH_KEYS)
    match = difflib.get_close_matches(key, candidates, n=1, cutoff=0.6)
    return match[0] if match else None
