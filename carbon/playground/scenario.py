"""Scenario files (TOML): topology, load, base carbon.conf keys, a sweep, bounds.

Everything is checked before anything starts; a bad file raises ScenarioError naming
file, line and key.

    [scenario]            name, description, interval, settle_timeout, mode, subjects,
                          profile, allow_drops, warmup, precreate, reference_points,
                          stop_timeout, repeats
    [scenario.bounds]     cpu_percent, rss_mb, writes_per_second
    [topology]            caches, relay, aggregator, render, aggregation_rules
    [load]                carbon.playground.loadgen.LoadProfile fields (not host/port)
    [carbon]              carbon.conf keys every daemon gets
    [sweep]               carbon.conf keys and ``disk`` -> lists of values (crossed)
    [quick]               the same tables again; merged over the above with --quick
    [long]                the same again, merged with --long (a study longer than 15 min)
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from carbon.config.defaults import DEFAULTS
from carbon.config.errors import ConfigError
from carbon.config.settings import parse_value
from carbon.playground.loadgen import LoadProfile, profile_from
from carbon.plugins import WRITE_STRATEGIES

try:
    import tomllib
except ImportError:  # Python < 3.11
    try:
        import tomli as tomllib  # type: ignore[no-redef]
    except ImportError:
        tomllib = None  # type: ignore[assignment]

DISKS = ("none", "nvme", "ssd", "hdd")
MODES = ("restart", "hup")
SUBJECTS = ("ours", "reference")
HUP_KEYS = ("MAX_UPDATES_PER_SECOND", "MAX_CREATES_PER_MINUTE", "CACHE_WRITE_STRATEGY",
            "MAX_CACHE_SIZE")
REFERENCE_STRATEGIES = ("timesorted", "sorted", "max", "naive")  # carbon 1.1.10 accepts
TABLES = ("scenario", "topology", "load", "carbon", "sweep", "quick", "long")
FORMS = ("quick", "long")  # tables merged over the rest by --quick / --long


class ScenarioError(ValueError):
    """A bad scenario file: the message names file, line and key."""


@dataclass
class Bounds:
    cpu_percent: float = 0.0  # 0: no bound
    rss_mb: float = 0.0
    writes_per_second: float = 0.0


@dataclass
class Topology:
    caches: int = 1
    relay: bool = False
    aggregator: bool = False
    render: bool = False
    aggregation_rules: list = field(default_factory=list)


@dataclass
class Settings:
    """The ``[scenario]`` table."""

    name: str = ""
    description: str = ""
    interval: float = 1.0
    settle_timeout: float = 60.0
    mode: str = "restart"
    subjects: list = field(default_factory=lambda: ["ours"])
    profile: bool = False
    allow_drops: bool = False
    warmup: bool = True  # one point to every metric first, until every file exists
    precreate: bool = False  # the playground creates the files instead (one cache)
    # seconds each daemon may take after SIGTERM (a cache drains its whole cache first)
    # before it is killed: points a kill loses are the playground's doing, not the daemon's
    stop_timeout: float = 300.0
    # sweep key -> values: the points carbon 1.1.10 runs (it cannot be stepped by SIGHUP,
    # so a hup sweep restarts it per point; a few representative points keep that short)
    reference_points: dict = field(default_factory=dict)
    # runs of each (subject, disk) group's first point, when the group has several points:
    # the spread between them is the run-to-run noise a recommendation must beat (1: not
    # measured, so nothing is recommended)
    repeats: int = 2


REPEAT = "repeat"  # key of a repeated point: which run of its group's first point it is


@dataclass
class Scenario:
    path: str
    settings: Settings
    bounds: Bounds
    topology: Topology
    load: LoadProfile
    carbon: dict[str, Any]
    sweep: dict[str, list]
    quick: bool = False
    long: bool = False

    def points(self) -> list[dict[str, Any]]:
        """Every sweep point: the crossed product of the sweep lists, each with every
        subject (carbon 1.1.10 only at ``reference_points`` when those are given)."""
        keys = list(self.sweep)
        combos = itertools.product(*(self.sweep[key] for key in keys)) if keys else [()]
        only = self.settings.reference_points
        out = []
        for combo in combos:
            for subject in self.settings.subjects:
                point = dict(zip(keys, combo, strict=True))
                if subject == "reference" and any(
                        str(point[key]) not in [str(v) for v in values]
                        for key, values in only.items()):
                    continue
                point.setdefault("disk", "none")
                point["subject"] = subject
                out.append(point)
        return out

    def runs(self) -> list[dict[str, Any]]:
        """What is run: every point, then, for each (subject, disk) group of more than one
        point, its first point again until it has run ``repeats`` times (marked
        ``repeat``: 2, 3...). Run last, the repeats' spread includes the drift over the
        sweep, not only back-to-back jitter."""
        points = self.points()
        firsts: dict[tuple[str, str], dict] = {}
        sizes: dict[tuple[str, str], int] = {}
        for point in points:
            group = (point["subject"], point["disk"])
            firsts.setdefault(group, point)
            sizes[group] = sizes.get(group, 0) + 1
        extra = [dict(first, **{REPEAT: run}) for group, first in firsts.items()
                 if sizes[group] > 1 for run in range(2, self.settings.repeats + 1)]
        return points + extra


def key_line(text: str, table: str, key: str) -> int | None:
    """The line of ``key`` inside ``[table]`` (dotted tables, inline tables), else of the
    table header, else None."""
    lines = text.splitlines()
    if not table:  # a top-level table or key
        for number, line in enumerate(lines, 1):
            if re.match(r"^\s*\[+\s*%s\s*[\].]" % re.escape(key), line) or \
                    re.match(r"^\s*%s\s*=" % re.escape(key), line):
                return number
        return None
    current = ""
    header_line = None
    parts = table.split(".")
    key_pattern = re.compile(r"^\s*\"?%s\"?\s*=" % re.escape(key))
    inline = re.compile(r"^\s*%s\s*=\s*\{.*\b%s\s*=" % (re.escape(parts[-1]), re.escape(key)))
    parent = ".".join(parts[:-1])
    for number, line in enumerate(lines, 1):
        stripped = line.strip()
        match = re.match(r"^\[([^\]]+)\]", stripped)
        if match:
            current = match.group(1).strip()
            if current == table:
                header_line = number
            continue
        if current == table and key_pattern.match(line):
            return number
        if parent and current == parent and inline.match(line):
            return number
    return header_line


class _Checker:
    def __init__(self, path: str, text: str) -> None:
        self.path = path
        self.text = text
        self.reference = False  # subjects include carbon 1.1.10

    def fail(self, table: str, key: str, message: str) -> ScenarioError:
        line = key_line(self.text, table, key)
        where = "%s, line %d" % (self.path, line) if line else self.path
        return ScenarioError("%s, key %s: %s" % (where, "%s.%s" % (table, key) if table
                                                 else key, message))

    def dataclass_from(self, table: str, cls: Any, values: Any) -> Any:
        obj = cls()
        if not isinstance(values, dict):
            raise self.fail("", table, "must be a table")
        known = {item.name for item in fields(cls)}
        for key, value in values.items():
            if key not in known:
                if isinstance(value, dict):
                    continue  # a sub-table, checked by its caller
                raise self.fail(table, key, "unknown key (known: %s)" % ", ".join(sorted(known)))
            default = getattr(obj, key)
            if isinstance(default, bool) and not isinstance(value, bool):
                raise self.fail(table, key, "%r is not true or false" % (value,))
            if isinstance(default, (int, float)) and not isinstance(default, bool):
                if isinstance(value, bool) or not isinstance(value, (int, float)):
                    raise self.fail(table, key, "%r is not a number" % (value,))
                if value < 0:
                    raise self.fail(table, key, "%r must not be negative" % (value,))
                value = type(default)(value)
            if isinstance(default, str) and not isinstance(value, str):
                raise self.fail(table, key, "%r is not a string" % (value,))
            if isinstance(default, list) and not isinstance(value, list):
                raise self.fail(table, key, "%r is not a list" % (value,))
            if isinstance(default, dict) and not isinstance(value, dict):
                raise self.fail(table, key, "%r is not a table" % (value,))
            setattr(obj, key, value)
        return obj

    def carbon_value(self, table: str, key: str, value: Any) -> Any:
        if key not in DEFAULTS:
            raise self.fail(table, key, "not a carbon.conf key")
        if isinstance(value, bool):
            text = "True" if value else "False"
        elif isinstance(value, list):
            text = ", ".join(str(item) for item in value)
        else:
            text = str(value)
        try:
            parsed = parse_value(key, text)
        except ConfigError as exc:
            raise self.fail(table, key, exc.reason) from None
        if key == "CACHE_WRITE_STRATEGY":
            if parsed not in WRITE_STRATEGIES:
                raise self.fail(table, key, "unknown strategy %r (known: %s)"
                                % (parsed, ", ".join(WRITE_STRATEGIES.names())))
            if self.reference and table == "carbon":  # swept ones: see reference_strategies
                self.reference_strategy(table, parsed)
        return text

    def reference_strategy(self, table: str, strategy: str) -> None:
        if strategy not in REFERENCE_STRATEGIES:
            raise self.fail(table, "CACHE_WRITE_STRATEGY", "carbon 1.1.10 (subject reference) "
                            "does not know %r (it knows %s)"
                            % (strategy, ", ".join(REFERENCE_STRATEGIES)))


def _merge(base: dict, over: dict) -> dict:
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def _override(data: dict, path: str, setting: str) -> None:
    """``table.key=value`` (a TOML value) over the file's data."""
    dotted, _, value = setting.partition("=")
    keys = dotted.strip().split(".")
    if not value or len(keys) < 2:
        raise ScenarioError("%s: --set %r: use TABLE.KEY=VALUE" % (path, setting))
    try:
        parsed = tomllib.loads("v = %s" % value.strip())["v"]
    except tomllib.TOMLDecodeError:
        parsed = value.strip()  # a bare word is a string
    target = data
    for key in keys[:-1]:
        target = target.setdefault(key, {})
    target[keys[-1]] = parsed


def load_scenario(path: str | Path, quick: bool = False,
                  overrides: list[str] | None = None, long: bool = False) -> Scenario:
    """Read and check a scenario; ``quick`` (``long``) merges its ``[quick]`` (``[long]``)
    tables over the rest, then each ``table.key=value`` of ``overrides`` is applied."""
    path = str(path)
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise ScenarioError("%s: %s" % (path, exc.strerror)) from None
    if tomllib is None:
        raise ScenarioError("%s: reading TOML needs Python 3.11 or the tomli package" % path)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ScenarioError("%s: %s" % (path, exc)) from None
    check = _Checker(path, text)
    for table in data:
        if table not in TABLES:
            raise check.fail("", table, "unknown table (known: %s)" % ", ".join(TABLES))
    for form in FORMS:
        for table in data.get(form, {}):
            if table not in TABLES or table in FORMS:
                raise check.fail(form, table, "unknown table (known: %s)"
                                 % ", ".join(t for t in TABLES if t not in FORMS))
    if quick and long:
        raise ScenarioError("%s: --quick and --long exclude each other" % path)
    for form, wanted in (("quick", quick), ("long", long)):
        if not wanted:
            continue
        for table, values in data.get(form, {}).items():
            data[table] = _merge(data.get(table, {}), values) if isinstance(values, dict) \
                else values
    for setting in overrides or []:
        _override(data, path, setting)
    settings = check.dataclass_from("scenario", Settings, data.get("scenario", {}))
    bounds = check.dataclass_from("scenario.bounds", Bounds,
                                  data.get("scenario", {}).get("bounds", {}))
    for key in data.get("scenario", {}):
        if isinstance(data["scenario"][key], dict) and key not in ("bounds",
                                                                    "reference_points"):
            raise check.fail("scenario", key, "unknown table")
    topology = check.dataclass_from("topology", Topology, data.get("topology", {}))
    if settings.mode not in MODES:
        raise check.fail("scenario", "mode", "%r is not one of %s"
                         % (settings.mode, ", ".join(MODES)))
    for subject in settings.subjects:
        if subject not in SUBJECTS:
            raise check.fail("scenario", "subjects", "%r is not one of %s"
                             % (subject, ", ".join(SUBJECTS)))
    check.reference = "reference" in settings.subjects
    if settings.repeats < 1:
        raise check.fail("scenario", "repeats", "must be at least 1 (1: noise not measured)")
    if settings.interval <= 0:
        raise check.fail("scenario", "interval", "must be more than 0")
    if topology.caches < 1:
        raise check.fail("topology", "caches", "must be at least 1")
    if topology.caches > 1 and not topology.relay:
        raise check.fail("topology", "caches", "more than one cache needs relay = true")
    load_values = dict(data.get("load", {}))
    for key in ("host", "port"):
        if key in load_values:
            raise check.fail("load", key, "set by the playground")
    try:
        load = profile_from(load_values)
    except ValueError as exc:
        key = str(exc).split(":", 1)[0]
        raise check.fail("load", key, str(exc).split(": ", 1)[-1]) from None
    if not load.rate and not load.points:
        raise check.fail("load", "rate", "a scenario needs a rate or a points count")
    carbon = {key: check.carbon_value("carbon", key, value)
              for key, value in data.get("carbon", {}).items()}
    sweep: dict[str, list] = {}
    for key, values in data.get("sweep", {}).items():
        if not isinstance(values, list) or not values:
            raise check.fail("sweep", key, "must be a non-empty list")
        if key == "disk":
            for value in values:
                if value not in DISKS:
                    raise check.fail("sweep", key, "%r is not one of %s"
                                     % (value, ", ".join(DISKS)))
            sweep[key] = list(values)
            continue
        sweep[key] = [check.carbon_value("sweep", key, value) for value in values]
        if settings.mode == "hup" and key not in HUP_KEYS:
            raise check.fail("sweep", key, "mode = \"hup\" can only step %s"
                             % ", ".join(HUP_KEYS))
    only: dict[str, list] = {}
    for key, values in (settings.reference_points if check.reference else {}).items():
        if key not in sweep:
            raise check.fail("scenario.reference_points", key, "not a swept key (swept: %s)"
                             % ", ".join(sweep) if sweep else "nothing is swept")
        values = values if isinstance(values, list) else [values]
        known = [str(value) for value in sweep[key]]
        for value in values:
            if key != "disk":
                value = check.carbon_value("scenario.reference_points", key, value)
            if str(value) not in known:
                raise check.fail("scenario.reference_points", key, "%r is not swept (swept: %s)"
                                 % (value, ", ".join(known)))
        only[key] = [str(value) if key != "disk" else value for value in values]
    settings.reference_points = only
    if check.reference:
        key = "CACHE_WRITE_STRATEGY"
        table = "scenario.reference_points" if key in only else "sweep"
        for strategy in only.get(key, sweep.get(key, [])):
            check.reference_strategy(table, strategy)
    return Scenario(path, settings, bounds, topology, load, carbon, sweep, quick, long)
