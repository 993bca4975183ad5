"""relay-rules.conf: ordered regex rules naming destinations, plus one default rule."""

from __future__ import annotations

import re

from carbon.config.errors import ConfigError
from carbon.config.inifile import read_ini
from carbon.relay.destinations import Destination, parse_destinations

_BOOLEANS = {"1": True, "yes": True, "true": True, "on": True,
             "0": False, "no": False, "false": False, "off": False}


class RelayRule:
    """One relay-rules.conf section: regex (searched, case-insensitive) -> destinations."""

    def __init__(self, name: str, pattern: str | None, destinations: list[Destination],
                 continue_matching: bool = False) -> None:
        self.name = name
        self.pattern = pattern
        self.regex = re.compile(pattern, re.I) if pattern is not None else None
        self.destinations = destinations
        self.continue_matching = continue_matching

    def matches(self, metric: str) -> bool:
        return self.regex is None or self.regex.search(metric) is not None


def load_relay_rules(path: str) -> list[RelayRule]:
    """Read relay-rules.conf: pattern rules in file order, then the one default rule.

    Errors are ConfigErrors naming the file, the line and the key.
    """
    rules: list[RelayRule] = []
    default: RelayRule | None = None
    for section in read_ini(path):  # it refuses a section given twice
        dest_entry = section.get("destinations")
        if dest_entry is None:
            raise ConfigError("section [%s] does not define a 'destinations' list"
                              % section.name, path, section.line)
        try:
            destinations = parse_destinations([dest_entry.value])
        except ValueError as exc:
            raise ConfigError(str(exc), path, dest_entry.line, "destinations") from None
        pattern, default_entry = section.get("pattern"), section.get("default")
        if pattern is not None:
            if default_entry is not None:
                raise ConfigError("section [%s] contains both 'pattern' and 'default'. "
                                  "You must use one or the other." % section.name,
                                  path, section.line)
            continue_entry = section.get("continue")
            keep_going = (_boolean(continue_entry.value, path, continue_entry.line, "continue")
                          if continue_entry is not None else False)
            try:
                rules.append(RelayRule(section.name, pattern.value, destinations, keep_going))
            except re.error as exc:
                raise ConfigError("invalid regular expression %r: %s" % (pattern.value, exc),
                                  path, pattern.line, "pattern") from None
            continue
        if default_entry is None:
            raise ConfigError("section [%s] has neither 'pattern' nor 'default'"
                              % section.name, path, section.line)
        if not _boolean(default_entry.value, path, default_entry.line, "default"):
            continue
        if default is not None:
            raise ConfigError("Only one default rule can be specified (first in [%s])"
                              % default.name, path, default_entry.line, "default")
        default = RelayRule(section.name, None, destinations)
    if default is None:
        raise ConfigError("No default rule defined. You must specify exactly one rule with "
                          "'default = true' instead of a pattern.", path)
    rules.append(default)
    return rules


def _boolean(text: str, path: str, line: int, key: str) -> bool:
    try:
        return _BOOLEANS[text.strip().lower()]
    except KeyError:
        raise ConfigError("invalid boolean %r" % text, path, line, key) from None
