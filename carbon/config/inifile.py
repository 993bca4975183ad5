"""A small INI reader that remembers the line of every key, for precise errors."""

from __future__ import annotations

from dataclasses import dataclass, field

from carbon.config.errors import ConfigError


@dataclass
class Entry:
    key: str
    value: str
    line: int


@dataclass
class Section:
    name: str
    line: int
    entries: list[Entry] = field(default_factory=list)

    def get(self, key: str) -> Entry | None:
        low = key.lower()
        for entry in reversed(self.entries):
            if entry.key.lower() == low:
                return entry
        return None

    def as_dict(self) -> dict[str, str]:
        return {e.key.lower(): e.value for e in self.entries}


def parse_ini(text: str, path: str = "<string>") -> list[Section]:
    """Parse INI text into sections in file order.

    Accepts ``key = value`` and ``key: value``, ``#`` and ``;`` comments and
    indented continuation lines, like Python's configparser. A section given twice, or a
    key given twice in one section (keys compare case-insensitively), is a ConfigError
    naming both lines: carbon 1.1.10's configparser refuses such a file too.
    """
    sections: list[Section] = []
    section_lines: dict[str, int] = {}
    key_lines: dict[str, int] = {}
    current: Section | None = None
    last: Entry | None = None
    for number, raw in enumerate(text.splitlines(), start=1):
        stripped = raw.strip()
        if not stripped or stripped[0] in "#;":
            continue
        if raw[0] in " \t" and last is not None:
            last.value = (last.value + "\n" + stripped).strip()
            continue
        last = None
        if stripped.startswith("["):
            if not stripped.endswith("]"):
                raise ConfigError("malformed section header %r" % stripped, path, number)
            current = Section(stripped[1:-1].strip(), number)
            if current.name in section_lines:
                raise ConfigError("section [%s] already defined on line %d, again on line %d"
                                  % (current.name, section_lines[current.name], number),
                                  path, number)
            section_lines[current.name] = number
            key_lines = {}
            sections.append(current)
            continue
        cut = [i for i in (stripped.find("="), stripped.find(":")) if i > 0]
        if not cut:
            raise ConfigError("expected 'key = value', got %r" % stripped, path, number)
        if current is None:
            raise ConfigError("key outside of any [section]", path, number)
        pos = min(cut)
        last = Entry(stripped[:pos].strip(), stripped[pos + 1:].strip(), number)
        low = last.key.lower()
        if low in key_lines:
            raise ConfigError("%s already given in [%s] on line %d, again on line %d"
                              % (last.key, current.name, key_lines[low], number),
                              path, number, last.key)
        key_lines[low] = number
        current.entries.append(last)
    return sections


def read_ini(path: str) -> list[Section]:
    """Read and parse an INI file; a missing or unreadable file is a ConfigError."""
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except OSError as exc:
        raise ConfigError("cannot read config file: %s" % exc.strerror, path) from None
    except UnicodeDecodeError:
        raise ConfigError("config file is not valid UTF-8", path) from None
    return parse_ini(text, path)
