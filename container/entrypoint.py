#!/opt/carbon/bin/python
"""carbon-container: the entrypoint of the carbon-fast image (see docs/container.md).

    carbon-container cache [--instance a] [carbon-cache.py options]
    carbon-container relay [options]          # carbon-relay.py
    carbon-container aggregator [options]     # carbon-aggregator.py
    carbon-container aggregator-cache [options]
    carbon-container render [graphite-render options]
    carbon-container healthcheck              # what the image's HEALTHCHECK runs
    carbon-container COMMAND [ARGS]           # anything else runs as given (sh, python...)

A daemon runs in the foreground (``--nodaemon ... start``) in place of this script, so the
SIGTERM of ``docker stop`` reaches it (through tini, PID 1) and a cache writes what it holds
before it exits. Before that the script records which daemon it started and where it
answers, for ``healthcheck``, which then asks that daemon itself: a carbonlink query to a
cache, a connection to the line receiver of a relay or aggregator, GET /version to the
render app.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import sys
import urllib.request
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional, Sequence

DAEMONS = {
    "cache": "carbon-cache",
    "relay": "carbon-relay",
    "aggregator": "carbon-aggregator",
    "aggregator-cache": "carbon-aggregator-cache",
}
ACTIONS = ("start", "stop", "status")
STATE_FILE = "/run/carbon/container.json"  # or $CARBON_CONTAINER_STATE
USAGE = ("usage: carbon-container cache|relay|aggregator|aggregator-cache [options] | "
         "render [options] | healthcheck | COMMAND [ARGS]")


class UsageError(Exception):
    """A command line the entrypoint refuses, with the reason."""


@dataclass
class Plan:
    """What to exec, and what ``healthcheck`` should ask later (None: nothing to record)."""

    argv: list[str]
    health: Optional[dict[str, Any]] = None
    remove: list[str] = field(default_factory=list)  # stale pidfiles to delete first


def conf_dir(env: Mapping[str, str]) -> str:
    return env.get("GRAPHITE_CONF_DIR") or "/etc/carbon"


def graphite_root(program_script: str, env: Mapping[str, str]) -> str:
    """GRAPHITE_ROOT as carbon-*.py derives it: the variable, else the folder above bin/."""
    found = shutil.which(program_script, path=env.get("PATH")) or program_script
    return env.get("GRAPHITE_ROOT") or os.path.dirname(os.path.dirname(os.path.abspath(found)))


def plan_daemon(role: str, args: Sequence[str], env: Mapping[str, str]) -> Plan:
    from carbon.daemon.cli import make_parser

    program = DAEMONS[role]
    script = program + ".py"
    parser = make_parser(program)
    options, positional = parser.parse_args(list(args))
    if positional:
        if positional[0] in ACTIONS:
            raise UsageError("%s: leave out %r: the container runs %s in the foreground "
                             "(docker stop stops it)" % (role, positional[0], script))
        raise UsageError("%s: unexpected argument %r" % (role, positional[0]))
    health: dict[str, Any] = {"role": role, "program": program, "instance": options.instance}
    remove = []
    try:
        settings = load_settings(program, options.instance, options.config,
                                 graphite_root(script, env), environ=env)
    except Exception:  # noqa: BLE001 - the daemon itself reports a bad config, and exits
        settings = None
    if settings is not None:
        if role in ("cache", "aggregator-cache"):
            health["carbonlink"] = [local_address(str(settings.CACHE_QUERY_INTERFACE)),
                                    int(settings.CACHE_QUERY_PORT)]
        else:
            health["line"] = [local_address(str(settings.LINE_RECEIVER_INTERFACE)),
                              int(settings.LINE_RECEIVER_PORT)]
        # left by this container's previous run (docker restart): that daemon is gone
        remove.append(options.pidfile or str(settings.pidfile))
    elif options.pidfile:
        remove.append(options.pidfile)
    return Plan([script, "--nodaemon", *args, "start"], health, remove)


def plan_render(args: Sequence[str], env: Mapping[str, str]) -> Plan:
    from webapp.server import build_parser

    defaults = ["--config", os.path.join(conf_dir(env), "local_settings.py"),
                "--bind", "0.0.0.0"]
    argv = [*defaults, *args]  # the caller's options come last and win
    parsed = build_parser().parse_args(argv)
    health = {"role": "render", "bind": parsed.bind, "port": parsed.port}
    return Plan(["graphite-render", *argv], health)


def plan(argv: Sequence[str], env: Mapping[str, str]) -> Plan:
    """The command ``carbon-container ARGV`` runs."""
    if not argv:
        raise UsageError(USAGE)
    role, args = argv[0], argv[1:]
    if role in DAEMONS:
        return plan_daemon(role, args, env)
    if role == "render":
        return plan_render(args, env)
    if role in ("-h", "--help", "help"):
        raise UsageError(USAGE)
    return Plan(list(argv))


def load_settings(*args: Any, **kwargs: Any) -> Any:
    from carbon.config.loader import load_settings as load

    return load(*args, **kwargs)


def local_address(interface: str) -> str:
    """Where to reach a listener bound to ``interface`` from inside the container."""
    return "127.0.0.1" if interface in ("", "0.0.0.0", "::") else interface


def check(health: Mapping[str, Any], timeout: float = 3.0) -> str:
    """Ask the recorded daemon whether it answers; returns what answered, raises if not.

    Light on purpose (no settings to load, no thread pools): it runs every interval."""
    role = health["role"]
    if role == "render":
        url = "http://%s:%d/version" % (local_address(health["bind"]), int(health["port"]))
        with urllib.request.urlopen(url, timeout=timeout) as answer:
            body = answer.read().decode("utf-8", "replace").strip()
        return "render app %s answers version %s" % (url, body)
    if "carbonlink" in health:
        host, port = health["carbonlink"]
        answer = carbonlink_query(host, port, "carbon.container.healthcheck", timeout)
        if not isinstance(answer, dict) or "datapoints" not in answer:
            raise RuntimeError("carbonlink %s:%d answered %r" % (host, port, answer))
        return "%s carbonlink %s:%d answers" % (health["program"], host, port)
    if "line" in health:
        host, port = health["line"]
        with socket.create_connection((host, port), timeout=timeout):
            pass
        return "%s line receiver %s:%d accepts" % (health["program"], host, port)
    raise RuntimeError("%s did not load its configuration: see docker logs" % role)


def carbonlink_query(host: str, port: int, metric: str, timeout: float) -> Any:
    """One carbonlink ``cache-query``, framed and read as the render app does."""
    import pickle
    import time

    from carbon.formats.pickled import frame, frame_length, recv_exactly
    from carbon.formats.unpickler import safe_loads

    deadline = time.monotonic() + timeout
    request = pickle.dumps({"type": "cache-query", "metric": metric}, protocol=2)
    with socket.create_connection((host, port), timeout=timeout) as conn:
        conn.sendall(frame(request))
        size = frame_length(recv_exactly(conn, 4, deadline))
        return safe_loads(recv_exactly(conn, size, deadline))


def state_file_of(env: Mapping[str, str]) -> str:
    return env.get("CARBON_CONTAINER_STATE") or STATE_FILE


def healthcheck(env: Mapping[str, str]) -> int:
    state_file = state_file_of(env)
    try:
        with open(state_file) as handle:
            health = json.load(handle)
    except (OSError, ValueError) as err:
        print("unhealthy: no daemon recorded in %s (%s)" % (state_file, err))
        return 1
    try:
        print(check(health))
    except Exception as err:  # noqa: BLE001 - any failure is the answer
        print("unhealthy: %s: %s" % (health.get("role"), err))
        return 1
    return 0


def record(health: Optional[Mapping[str, Any]], env: Mapping[str, str]) -> None:
    if health is None:
        return
    state_file = state_file_of(env)
    try:
        os.makedirs(os.path.dirname(state_file), exist_ok=True)
        with open(state_file, "w") as handle:
            json.dump(health, handle)
    except OSError as err:
        print("carbon-container: cannot record the daemon for healthcheck in %s: %s"
              % (state_file, err), file=sys.stderr)


def main(argv: Optional[Sequence[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    env = os.environ
    if argv[:1] == ["healthcheck"]:
        return healthcheck(env)
    try:
        chosen = plan(argv, env)
    except UsageError as err:
        print("carbon-container: %s" % err, file=sys.stderr)
        return 2
    for path in chosen.remove:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
    record(chosen.health, env)
    sys.stdout.flush()
    try:
        os.execvp(chosen.argv[0], chosen.argv)
    except OSError as err:
        print("carbon-container: cannot run %s: %s" % (chosen.argv[0], err), file=sys.stderr)
        return 127
    return 0  # pragma: no cover - execvp does not return


if __name__ == "__main__":
    sys.exit(main())
