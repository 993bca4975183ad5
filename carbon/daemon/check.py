"""The ``check`` action: validate every config file a daemon would read, and nothing else.

``carbon-cache.py --config F [--instance=a] check`` (and the other three scripts), or
``carbon-config check [--config F] [--instance I] [--program P]``: carbon.conf, the
storage schemas and aggregation, the white/blacklists (with USE_WHITELIST), the relay's
rules or aggregation rules and destinations, the aggregators' aggregation and rewrite
rules, and the plugin names they give (DATABASE, CACHE_WRITE_STRATEGY, RATE_LIMITER,
RELAY_METHOD, ROUTER_HASH_TYPE). Errors and warnings go to stderr naming file, line and
key; one ``ok`` line goes to stdout when nothing is wrong. Nothing is written (no pidfile,
log, journal or folder), so it runs as any user with read access, e.g. in ExecStartPre.
Exit status: 0 valid (warnings included), 1 an error.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from typing import Any, Callable, Sequence

from carbon.config.defaults import DEFAULTS
from carbon.config.errors import ConfigError
from carbon.config.inifile import read_ini
from carbon.config.loader import load_settings, section_for
from carbon.config.patternlist import PatternList
from carbon.config.schemas import load_aggregation_schemas, load_storage_schemas
from carbon.config.settings import Settings
from carbon.plugins import RATE_LIMITERS, STORAGE_BACKENDS, WRITE_STRATEGIES

PROGRAMS = ("carbon-cache", "carbon-relay", "carbon-aggregator", "carbon-aggregator-cache")


def rule_paths(settings: Any, program: str, whitelist: str | None = None,
               blacklist: str | None = None, rules: str | None = None,
               rewrite_rules: str | None = None, aggregation_rules: str | None = None) -> None:
    """The rule files ``program`` reads (command line options first, else CONF_DIR's)."""
    conf_dir = settings.CONF_DIR
    settings["whitelist"] = whitelist or os.path.join(conf_dir, "whitelist.conf")
    settings["blacklist"] = blacklist or os.path.join(conf_dir, "blacklist.conf")
    if "carbon-aggregator" in program:
        settings["aggregation-rules"] = rules or os.path.join(conf_dir,
                                                              settings.AGGREGATION_RULES)
        settings["rewrite-rules"] = rewrite_rules or os.path.join(conf_dir,
                                                                  settings.REWRITE_RULES)
    elif program == "carbon-relay":
        settings["relay-rules"] = rules or os.path.join(conf_dir, settings.RELAY_RULES)
        settings["aggregation-rules"] = aggregation_rules or os.path.join(
            conf_dir, settings.AGGREGATION_RULES)
    settings["rewrite-rules"] = settings.get("rewrite-rules") or os.path.join(
        conf_dir, settings.REWRITE_RULES)


def _plugin(registry: Any, settings: Any, key: str) -> None:
    name = settings[key] or DEFAULTS[key]  # empty in carbon.conf: the default
    if name not in registry:
        raise ConfigError("%s is not a valid value (known: %s)" % (name, ", ".join(
            registry.names())), settings.get("config_file"), key=key)


def _schemas(settings: Any, warnings: list[str]) -> None:
    path = os.path.join(settings.CONF_DIR, "storage-schemas.conf")
    if not os.path.exists(path):
        raise ConfigError("missing required config", path)
    load_storage_schemas(path, warnings)
    load_aggregation_schemas(os.path.join(settings.CONF_DIR, "storage-aggregation.conf"),
                             warnings)


def _lists(settings: Any, warnings: list[str]) -> None:
    if settings.USE_WHITELIST:
        for key in ("whitelist", "blacklist"):
            PatternList(settings[key])


def _cache(settings: Any, warnings: list[str]) -> None:
    _plugin(STORAGE_BACKENDS, settings, "DATABASE")
    _plugin(WRITE_STRATEGIES, settings, "CACHE_WRITE_STRATEGY")
    _plugin(RATE_LIMITERS, settings, "RATE_LIMITER")


def _router(settings: Any, warnings: list[str]) -> None:
    from carbon.relay.routing import make_router
    router = make_router(settings)
    unknown = router.unknown_rule_destinations()
    if unknown:   # the relay logs the same at start
        warnings.append("%s: relay rules name destinations missing from DESTINATIONS, "
                        "which are never used: %s" % (settings["relay-rules"],
                                                      ", ".join(map(str, unknown))))


def _aggregator_output(settings: Any, warnings: list[str]) -> None:
    from carbon.relay.routing import make_router
    make_router(Settings(**dict(settings, RELAY_METHOD="consistent-hashing")))


def _aggregation(settings: Any, warnings: list[str]) -> None:
    from carbon.aggregator.rules import load_rules
    from carbon.rewrite import load_rewrite_rules
    path = settings["aggregation-rules"]
    if os.path.exists(path):
        load_rules(path, 0)
    path = settings["rewrite-rules"]
    if os.path.exists(path):
        rules = load_rewrite_rules(path)
        warnings.extend("%s: rewrite rule skipped: %s" % (path, error)
                        for error in rules.errors)


CHECKS: dict[str, tuple[Callable[[Any, list[str]], None], ...]] = {
    "carbon-cache": (_schemas, _lists, _cache),
    "carbon-relay": (_schemas, _lists, _router),
    "carbon-aggregator": (_schemas, _lists, _aggregation, _aggregator_output),
    "carbon-aggregator-cache": (_schemas, _lists, _aggregation, _cache),
}


def check(program: str, settings: Any) -> tuple[list[str], list[str]]:
    """(errors, warnings) of every file ``program`` reads with ``settings``."""
    errors: list[str] = []
    warnings = list(settings.get("config_warnings", []))
    for step in CHECKS[program]:
        try:
            step(settings, warnings)
        except ConfigError as exc:
            errors.append(str(exc))
        except OSError as exc:
            errors.append("%s: %s" % (getattr(exc, "filename", None) or "", exc.strerror))
    return errors, warnings


def report(what: str, errors: list[str], warnings: list[str]) -> int:
    """Print the outcome (problems on stderr, ``ok`` on stdout); the exit status."""
    for warning in warnings:
        print("WARNING: %s" % warning, file=sys.stderr)
    for error in errors:
        print("ERROR: %s" % error, file=sys.stderr)
    if errors:
        print("%s: %d error(s) in its configuration" % (what, len(errors)), file=sys.stderr)
        return 1
    print("ok: %s%s" % (what, " (%d warning(s) on stderr)" % len(warnings)
                        if warnings else ""))
    return 0


def check_action(program: str, settings: Any) -> int:
    """The scripts' ``check`` action for one program and instance."""
    errors, warnings = check(program, settings)
    return report("%s (instance %s), %s" % (program, settings.get("instance"),
                                            settings.get("config_file")), errors, warnings)


def _instances(config: str, program: str) -> list[str]:
    """Instances a carbon.conf configures for ``program``: ``a`` when it has its section,
    plus one per ``[section:NAME]``."""
    name = section_for(program)
    found: list[str] = []
    for section in read_ini(config):
        if section.name == name and "a" not in found:
            found.insert(0, "a")
        elif section.name.startswith(name + ":"):
            instance = section.name.split(":", 1)[1]
            if instance not in found:
                found.append(instance)
    return found


def render_check(path: str) -> int:
    """The render app's settings, checked by its own ``graphite-render --check`` (the
    daemons never import the render app)."""
    if not os.path.exists(path):
        return report(path, ["missing: the render app's settings file"], [])
    script = os.path.join(os.path.dirname(sys.executable), "graphite-render")
    if not os.path.exists(script):
        script = shutil.which("graphite-render") or ""
    if not script:
        return report(path, ["graphite-render is not installed (pip install "
                             "'carbon-fast[render]'), so its settings cannot be checked"], [])
    result = subprocess.run([script, "--config", path, "--check"], capture_output=True,
                            text=True, timeout=300, stdin=subprocess.DEVNULL)
    sys.stdout.write(result.stdout)
    sys.stderr.write(result.stderr)
    return 0 if result.returncode == 0 else 1


def main(argv: Sequence[str] | None = None) -> int:
    """``carbon-config check``: every program (or ``--program``) and instance of a
    carbon.conf (or ``--instance``)."""
    parser = argparse.ArgumentParser(prog="carbon-config", description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=["check"])
    parser.add_argument("--config", help="carbon.conf (default: $GRAPHITE_CONF_DIR or "
                        "$GRAPHITE_ROOT/conf, else ./conf)")
    parser.add_argument("--instance", help="only this instance (default: every instance "
                        "the file has a section for)")
    parser.add_argument("--program", action="append", choices=[p[len("carbon-"):]
                                                               for p in PROGRAMS] + ["render"],
                        help="only this program (repeatable; default: every program the "
                        "file has a section for, and render when CONF_DIR has a "
                        "local_settings.py)")
    args = parser.parse_args(argv)
    env = os.environ
    if args.config:
        config = os.path.abspath(args.config)
        root = env.get("GRAPHITE_ROOT") or os.path.dirname(os.path.dirname(config))
    else:
        root = env.get("GRAPHITE_ROOT") or os.getcwd()
        config = os.path.join(env.get("GRAPHITE_CONF_DIR") or os.path.join(root, "conf"),
                              "carbon.conf")
    programs = ["carbon-" + p for p in args.program] if args.program else list(PROGRAMS)
    status = 0
    checked = 0
    local_settings = os.path.join(os.path.dirname(config), "local_settings.py")
    if "carbon-render" in programs or not args.program and os.path.exists(local_settings):
        status = render_check(local_settings)
        checked += 1
    for program in (p for p in programs if p != "carbon-render"):
        try:
            instances = [args.instance] if args.instance else _instances(config, program)
        except ConfigError as exc:
            return report(config, [str(exc)], [])
        if args.program and not instances:
            instances = ["a"]
        for instance in instances:
            try:
                settings = load_settings(program, instance, config, root)
            except ConfigError as exc:
                status = max(status, report("%s (instance %s)" % (program, instance),
                                            [str(exc)], []))
                continue
            rule_paths(settings, program)
            status = max(status, check_action(program, settings))
            checked += 1
    if not checked and not status:
        return report(config, ["no [cache], [relay], [aggregator] or [aggregator-cache] "
                               "section"], [])
    return status


if __name__ == "__main__":
    sys.exit(main())
