"""storage-schemas.conf and storage-aggregation.conf, matched like carbon 1.1.10."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any

from carbon.config.errors import ConfigError
from carbon.config.watched import file_mtime
from carbon.config.inifile import read_ini
from carbon.config.retention import parse_retention

AGGREGATION_METHODS = ("average", "sum", "last", "max", "min", "avg_zero", "absmax", "absmin")
DEFAULT_RETENTIONS = [(60, 60 * 24 * 7)]


@dataclass
class Schema:
    """One section: a regex (None for the built-in default) and what it assigns."""
    name: str
    pattern: str | None
    value: Any

    def __post_init__(self) -> None:
        self.regex = re.compile(self.pattern) if self.pattern is not None else None

    def matches(self, metric: str) -> bool:
        return self.regex is None or bool(self.regex.search(metric))


def validate_archives(archives: list[tuple[int, int]]) -> None:
    """Whisper's archive-list rules; ValueError describing the first violation."""
    if not archives:
        raise ValueError("at least one archive is required")
    archives = sorted(archives)
    for i, (precision, points) in enumerate(archives[:-1]):
        nxt_precision, nxt_points = archives[i + 1]
        if precision == nxt_precision:
            raise ValueError("two archives have the same precision %ds" % precision)
        if nxt_precision % precision != 0:
            raise ValueError("higher precision %ds does not evenly divide lower %ds"
                             % (precision, nxt_precision))
        if precision * points >= nxt_precision * nxt_points:
            raise ValueError("lower precision archive %ds:%d must cover a longer time than"
                             " %ds:%d" % (nxt_precision, nxt_points, precision, points))
        if points < nxt_precision // precision:
            raise ValueError("archive %ds:%d has too few points to consolidate to %ds"
                             % (precision, points, nxt_precision))


def _pattern(section: Any, path: str) -> str | None:
    entry = section.get("pattern")
    if entry is None:
        return None
    try:
        re.compile(entry.value)
    except re.error as exc:
        raise ConfigError("invalid regular expression %r: %s" % (entry.value, exc),
                          path, entry.line, "pattern") from None
    return entry.value


def load_storage_schemas(path: str, warnings: list[str] | None = None) -> list[Schema]:
    """Schemas in file order, then the default (60s:7d). Bad entries raise ConfigError."""
    schemas: list[Schema] = []
    warn = warnings if warnings is not None else []
    if os.path.exists(path):
        for section in read_ini(path):
            pattern = _pattern(section, path)
            entry = section.get("retentions")
            if entry is None:
                warn.append("%s line %d: schema [%s] has no retentions, skipped"
                            % (path, section.line, section.name))
                continue
            if pattern is None:
                warn.append("%s line %d: schema [%s] has no pattern, skipped"
                            % (path, section.line, section.name))
                continue
            try:
                archives = [parse_retention(part) for part in entry.value.split(",")]
                validate_archives(archives)
            except ValueError as exc:
                raise ConfigError(str(exc), path, entry.line, "retentions") from None
            schemas.append(Schema(section.name, pattern, archives))
    schemas.append(Schema("default", None, list(DEFAULT_RETENTIONS)))
    return schemas


def load_aggregation_schemas(path: str, warnings: list[str] | None = None) -> list[Schema]:
    """Aggregation schemas: value is (xFilesFactor or None, method or None)."""
    schemas: list[Schema] = []
    warn = warnings if warnings is not None else []
    if os.path.exists(path):
        for section in read_ini(path):
            pattern = _pattern(section, path)
            if pattern is None:
                warn.append("%s line %d: section [%s] has no pattern, skipped"
                            % (path, section.line, section.name))
                continue
            xff = section.get("xFilesFactor")
            method = section.get("aggregationMethod")
            xff_value = None
            if xff is not None:
                try:
                    xff_value = float(xff.value)
                except ValueError:
                    xff_value = -1.0
                if not 0 <= xff_value <= 1:
                    raise ConfigError("xFilesFactor must be a number between 0 and 1, got %r"
                                      % xff.value, path, xff.line, "xFilesFactor")
            if method is not None and method.value not in AGGREGATION_METHODS:
                raise ConfigError("unknown aggregationMethod %r (known: %s)" % (
                    method.value, ", ".join(AGGREGATION_METHODS)), path, method.line,
                    "aggregationMethod")
            schemas.append(Schema(section.name, pattern,
                                  (xff_value, method.value if method else None)))
    schemas.append(Schema("default", None, (None, None)))
    return schemas


def first_match(schemas: list[Schema], metric: str) -> Schema:
    for schema in schemas:
        if schema.matches(metric):
            return schema
    return schemas[-1]


class SchemaFiles:
    """Both schema files, re-read when they change; a bad edit keeps the old rules."""

    def __init__(self, conf_dir: str) -> None:
        self.storage_path = os.path.join(conf_dir, "storage-schemas.conf")
        self.aggregation_path = os.path.join(conf_dir, "storage-aggregation.conf")
        self.warnings: list[str] = []
        self.storage = load_storage_schemas(self.storage_path, self.warnings)
        self.aggregation = load_aggregation_schemas(self.aggregation_path, self.warnings)
        self._mtimes = self._current_mtimes()

    def _current_mtimes(self) -> tuple[float | None, float | None]:
        return file_mtime(self.storage_path), file_mtime(self.aggregation_path)

    def reload_if_changed(self) -> str | None:
        """Re-read changed files. Returns an error message if a new file is invalid."""
        mtimes = self._current_mtimes()
        if mtimes == self._mtimes:
            return None
        self._mtimes = mtimes
        try:
            storage = load_storage_schemas(self.storage_path)
            aggregation = load_aggregation_schemas(self.aggregation_path)
        except ConfigError as exc:
            return "keeping previous schemas: %s" % exc
        self.storage, self.aggregation = storage, aggregation
        return None

    def for_metric(self, metric: str) -> tuple[Schema, Schema]:
        return first_match(self.storage, metric), first_match(self.aggregation, metric)
