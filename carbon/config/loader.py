"""Load carbon.conf for one program and instance, the way carbon 1.1.10 does.

``[cache]`` (or ``[relay]``, ``[aggregator]``) holds the program's settings and
``[cache:b]`` overrides them key by key for instance ``b``. Paths derive from
GRAPHITE_ROOT / STORAGE_DIR exactly as the reference derives them.
"""

from __future__ import annotations

import os
from os.path import dirname, exists, join, normpath

from carbon.config.defaults import DEFAULTS, PATH_KEYS
from carbon.config.errors import ConfigError
from carbon.config.inifile import Section, read_ini
from carbon.config.settings import Settings, nearest_key

# Keys the reference example file documents that have no code default (REBALANCE_STATE,
# the cluster-rebalance router's state file, has its default in DEFAULTS).
EXTRA_KNOWN_KEYS = ("PROTOBUF_RECEIVER_INTERFACE", "PROTOBUF_RECEIVER_PORT",
                    "DESTINATIONS_POOL_REPLICAS", "GRAPHITE_ROOT")

# carbon 1.1.10 keys accepted but not implemented here -> what they would enable. A value
# other than the default gets a start-up warning naming file, line and key.
NOT_IMPLEMENTED = {
    "CERES_MAX_SLICE_GAP": "ceres storage", "CERES_NODE_CACHING_BEHAVIOR": "ceres storage",
    "CERES_SLICE_CACHING_BEHAVIOR": "ceres storage", "CERES_LOCK_WRITES": "ceres storage",
    "PROTOBUF_RECEIVER_INTERFACE": "the protobuf receiver",
    "PROTOBUF_RECEIVER_PORT": "the protobuf receiver",
    "DESTINATION_POOL_REPLICAS": "pooled replicas",
    "DESTINATIONS_POOL_REPLICAS": "pooled replicas",
    "USE_RATIO_RESET": "ratio-based connection resets",
    "MIN_RESET_STAT_FLOW": "ratio-based connection resets",
    "MIN_RESET_RATIO": "ratio-based connection resets",
    "MIN_RESET_INTERVAL": "ratio-based connection resets",
    "CACHE_METRIC_NAMES_MAX": "the aggregator's metric-name cache",
    "CACHE_METRIC_NAMES_TTL": "the aggregator's metric-name cache",
    "RAVEN_DSN": "Sentry error reporting",
}


def section_for(program: str) -> str:
    """carbon-cache -> cache, carbon-aggregator-cache -> aggregator-cache."""
    return program[len("carbon-"):] if program.startswith("carbon-") else program


def _apply_section(settings: Settings, section: Section, path: str,
                   warnings: list[str]) -> None:
    known = list(DEFAULTS) + list(PATH_KEYS) + list(EXTRA_KNOWN_KEYS)
    for entry in section.entries:
        key = entry.key.upper()
        if key not in known:
            hint = nearest_key(key, known)
            warnings.append("%s line %d: unknown key %s in [%s]%s" % (
                path, entry.line, key, section.name,
                " (did you mean %s?)" % hint if hint else ""))
        if key in PATH_KEYS:
            settings[key] = entry.value
        else:
            settings.set_from_text(key, entry.value, path, entry.line)
        if key in NOT_IMPLEMENTED and (key not in DEFAULTS or settings[key] != DEFAULTS[key]):
            warnings.append("%s line %d: %s is not implemented by this carbon (%s); the "
                            "setting has no effect" % (path, entry.line, key,
                                                       NOT_IMPLEMENTED[key]))


def load_settings(program: str, instance: str | None = "a", config: str | None = None,
                  graphite_root: str | None = None, pidfile: str | None = None,
                  logdir: str | None = None, environ: dict | None = None) -> Settings:
    """Build the Settings of ``program`` (e.g. ``carbon-cache``) for ``instance``.

    Raises ConfigError naming file, line and key for invalid values. Unknown keys
    are kept and reported in ``settings.config_warnings``.
    """
    env = os.environ if environ is None else environ
    settings = Settings()
    root = graphite_root or env.get("GRAPHITE_ROOT")
    if root is None:
        raise ConfigError("Either ROOT_DIR or GRAPHITE_ROOT needs to be provided.")
    if config is None:
        conf_dir = env.get("GRAPHITE_CONF_DIR", join(root, "conf"))
        config = join(conf_dir, "carbon.conf")
    else:
        conf_dir = dirname(normpath(config))
    settings["CONF_DIR"] = conf_dir
    settings["GRAPHITE_ROOT"] = root
    if not exists(config):
        raise ConfigError("Error: missing required config %r" % config)

    sections = read_ini(config)
    by_name = {s.name: s for s in sections}
    warnings: list[str] = []
    provided: set[str] = set()
    name = section_for(program)

    def apply(section_name: str) -> None:
        section = by_name.get(section_name)
        if section is not None:
            _apply_section(settings, section, config, warnings)
            provided.update(e.key.upper() for e in section.entries)

    apply(name)
    if "STORAGE_DIR" not in provided:
        settings["STORAGE_DIR"] = env.get("GRAPHITE_STORAGE_DIR", join(root, "storage"))

    def derive() -> None:
        storage = settings["STORAGE_DIR"]
        derived = {"PID_DIR": storage, "LOG_DIR": join(storage, "log", program),
                   "LOCAL_DATA_DIR": join(storage, "whisper"),
                   "WHITELISTS_DIR": join(storage, "lists")}
        for key, value in derived.items():
            if key not in provided and key not in settings:
                settings[key] = value

    derive()
    settings["instance"] = instance
    settings["program"] = program
    if instance:
        apply("%s:%s" % (name, instance))
        settings["pidfile"] = pidfile or join(settings["PID_DIR"],
                                              "%s-%s.pid" % (program, instance))
        settings["LOG_DIR"] = logdir or join(settings["LOG_DIR"], "%s-%s" % (program, instance))
    else:
        settings["pidfile"] = pidfile or join(settings["PID_DIR"], "%s.pid" % program)
        settings["LOG_DIR"] = logdir or settings["LOG_DIR"]
    derive()
    for key in ("STORAGE_DIR", "LOCAL_DATA_DIR", "WHITELISTS_DIR", "PID_DIR", "LOG_DIR",
                "pidfile"):
        settings[key] = normpath(os.path.expanduser(settings[key]))
    if settings.MAX_UPDATES_PER_SECOND_ON_SHUTDOWN is None:
        settings["MAX_UPDATES_PER_SECOND_ON_SHUTDOWN"] = settings.MAX_UPDATES_PER_SECOND
    settings["CACHE_SIZE_LOW_WATERMARK"] = settings.MAX_CACHE_SIZE * 0.95
    if program == "carbon-aggregator" and settings.RELAY_METHOD != "consistent-hashing" \
            and "RELAY_METHOD" in provided:
        warnings.append("%s: RELAY_METHOD = %s has no effect on carbon-aggregator, which always "
                        "uses consistent-hashing (as carbon 1.1.10)" % (config,
                                                                        settings.RELAY_METHOD))
    settings["config_file"] = config
    settings["config_warnings"] = warnings
    return settings
