"""The systemd units and the distribution layout, in a booted systemd.

A Debian 12 tree (debootstrap, cached: tests/deploy/nspawn.py) is booted with
systemd-nspawn; the package is installed in a venv inside it from wheels built here, and
``carbon-fast install-layout`` installs the user, folders, config and units. Then:
``systemd-analyze verify`` (and ``security --offline``) on the installed units,
``systemctl start carbon.target`` (relay -> caches a and b -> render app, on free ports
of the shared network), points sent through the relay and read back through the render
app, ``systemctl reload`` of a rate and the schemas (the new values at work), and
``systemctl stop carbon.target`` draining the caches: every point sent is in whisper.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import whisper

from tests.deploy.nspawn import Booted, bookworm_tree, ensure_host_tools
from tests.support import ROOT, free_port, read_whisper, wait_for

UNITS = ("carbon-cache@a.service", "carbon-cache@b.service", "carbon-relay@a.service",
         "graphite-render.service")
VERIFIED = UNITS + ("carbon-aggregator@a.service", "carbon-aggregator-cache@a.service",
                    "carbon.target")
FIRST_METRICS, FIRST_MINUTES = 200, 3      # read back through the render app
DRAIN_METRICS, DRAIN_MINUTES = 1500, 2     # sent just before the stop
SLOW_RATE = 20                             # MAX_UPDATES_PER_SECOND set by the reload
EXPOSURE_THRESHOLD = 20                    # systemd-analyze security: 2.0 ("OK")


def build_wheels(dest: Path) -> None:
    """This checkout as a wheel (C accelerators built for this Python, which is the
    tree's: bookworm's 3.11) plus its dependencies'."""
    env = dict(os.environ, CARBON_REQUIRE_NATIVE="1")
    pip = [sys.executable, "-m", "pip", "-q", "wheel", "--wheel-dir", str(dest)]
    subprocess.run(pip + ["--no-deps", str(ROOT)], check=True, env=env)
    wheel = next(dest.glob("carbon_fast-*.whl"))
    subprocess.run(pip + [str(wheel)], check=True, env=env)


def free_ports(count: int) -> list[int]:
    ports: set[int] = set()
    while len(ports) < count:
        ports.add(free_port())
    return sorted(ports)


def set_ports(conf: str, ports: dict[str, int]) -> str:
    """The installed carbon.conf with this test's ports (the network is the host's)."""
    a_ports = ("LINE_RECEIVER_PORT = %(a_line)d\nPICKLE_RECEIVER_PORT = %(a_pickle)d\n"
               "CACHE_QUERY_PORT = %(a_query)d\n" % ports)
    conf = conf.replace("[cache:b]\n", "[cache:a]\n%s\n[cache:b]\n" % a_ports, 1)
    for old, new in (("2103", "b_line"), ("2104", "b_pickle"), ("7102", "b_query"),
                     ("2013", "relay_line"), ("2014", "relay_pickle"),
                     ("2004:a", "a_pickle"), ("2104:b", "b_pickle")):
        suffix = old[4:]
        conf = re.sub(r"\b%s\b" % re.escape(old), "%d%s" % (ports[new], suffix), conf)
    # [cache]: writes slowed by the reload later; the drain at its own rate
    conf = conf.replace("[cache]\n", "[cache]\nMAX_UPDATES_PER_SECOND_ON_SHUTDOWN = 2000\n", 1)
    return conf


def send_lines(port: int, lines: list[str]) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall("".join(lines).encode())


def render_json(port: int, target: str) -> list[dict]:
    url = "http://127.0.0.1:%d/render?target=%s&from=-30min&format=json" % (port, target)
    with urllib.request.urlopen(url, timeout=20) as answer:
        return json.loads(answer.read())


def whisper_points(whisper: Path, names: list[str], start: int, end: int) -> dict:
    found = {}
    for name in names:
        path = whisper / (name.replace(".", "/") + ".wsp")
        if path.exists():
            for stamp, value in read_whisper(path, start, end).items():
                found[(name, stamp)] = value
    return found


def all_active(box: Booted) -> bool:
    """Every unit active (``systemctl is-active`` exits 0 when any one is)."""
    states = box.run(["systemctl", "is-active", *UNITS], check=False).stdout.split()
    return states == ["active"] * len(UNITS)


def log_lines(box: Booted, instance: str) -> str:
    """What a cache said: its console.log (files) or its journal (CARBON_LOG_TO=stdout)."""
    path = box.root / ("var/log/carbon/carbon-cache-%s/console.log" % instance)
    text = path.read_text() if path.exists() else ""
    return text + box.run(["journalctl", "-q", "-o", "cat", "-u",
                           "carbon-cache@%s.service" % instance]).stdout


@pytest.mark.system
@pytest.mark.timeout(900)
def test_units_run_the_stack_in_a_booted_systemd(tmp_path):
    ensure_host_tools()
    tree = bookworm_tree()
    wheels = tmp_path / "wheels"
    build_wheels(wheels)
    names = ["a_line", "a_pickle", "a_query", "b_line", "b_pickle", "b_query", "relay_line",
             "relay_pickle", "render"]
    ports = dict(zip(names, free_ports(len(names)), strict=True))

    with Booted(tree, tmp_path, {str(wheels): "/wheels"}) as box:
        box.sh("python3 -m venv /opt/carbon-fast && /opt/carbon-fast/bin/pip install -q "
               "--no-index --find-links /wheels carbon-fast")
        said = box.sh("/opt/carbon-fast/bin/carbon-fast install-layout")
        assert "write /etc/carbon/carbon.conf" in said, said
        again = box.sh("/opt/carbon-fast/bin/carbon-fast install-layout")
        assert "keep /etc/carbon/carbon.conf (exists; not overwritten)" in again, again
        assert "unchanged /etc/systemd/system/carbon-cache@.service" in again, again

        conf = box.root / "etc/carbon/carbon.conf"
        conf.write_text(set_ports(conf.read_text(), ports))
        settings = box.root / "etc/graphite/local_settings.py"
        settings.write_text(settings.read_text().replace(
            '"127.0.0.1:7002:a", "127.0.0.1:7102:b"',
            '"127.0.0.1:%(a_query)d:a", "127.0.0.1:%(b_query)d:b"' % ports))
        # the documented overrides: a drop-in for the render app's port, and cache b
        # logging to the journal instead of files
        drop = box.root / "etc/systemd/system/graphite-render.service.d"
        drop.mkdir()
        (drop / "port.conf").write_text("[Service]\nEnvironment=GRAPHITE_RENDER_PORT=%d\n"
                                        % ports["render"])
        drop = box.root / "etc/systemd/system/carbon-cache@b.service.d"
        drop.mkdir()
        (drop / "journal.conf").write_text("[Service]\nEnvironment=CARBON_LOG_TO=stdout\n")
        box.run(["systemctl", "daemon-reload"])

        verify = subprocess.run(["systemd-analyze", "verify", "--root=%s" % box.root,
                                 *VERIFIED], capture_output=True, text=True)
        assert (verify.returncode, verify.stdout + verify.stderr) == (0, ""), verify
        security = subprocess.run(
            ["systemd-analyze", "security", "--offline=yes", "--root=%s" % box.root,
             "--threshold=%d" % EXPOSURE_THRESHOLD, "--no-pager", *UNITS],
            capture_output=True, text=True)
        assert security.returncode == 0, security.stdout + security.stderr

        try:
            exercise(box, ports)
        except (AssertionError, OSError) as exc:
            raise AssertionError("%s\n--- inside the container:\n%s" % (exc, box.sh(
                "systemctl --no-pager status 'carbon*' graphite-render; "
                "journalctl --no-pager -n 60; tail -n 20 /var/log/carbon/*/console.log",
                check=False))) from exc


def exercise(box: Booted, ports: dict[str, int]) -> None:
    """start, send and read back, reload, stop and count (the units are installed)."""
    conf = box.root / "etc/carbon/carbon.conf"
    started = time.monotonic()
    box.run(["systemctl", "start", "carbon.target"])
    wait_for(lambda: all_active(box), 60, what="every unit active")
    start_seconds = time.monotonic() - started
    for unit in UNITS:
        shown = box.run(["systemctl", "show", unit, "-p", "User", "-p", "Type"]).stdout
        assert "User=_graphite" in shown and "Type=notify" in shown, shown

    # points through the relay, read back through the render app
    now = int(time.time()) // 60 * 60
    first = ["deploy.first.m%03d" % i for i in range(FIRST_METRICS)]
    stamps = [now - 60 * k for k in range(FIRST_MINUTES)]
    send_lines(ports["relay_line"], ["%s %d %d\n" % (name, i + k, stamp)
                                     for k, stamp in enumerate(stamps)
                                     for i, name in enumerate(first)])

    def rendered() -> int:
        series = render_json(ports["render"], "deploy.first.*")
        return sum(value is not None for one in series for value, _t in one["datapoints"])
    wait_for(lambda: rendered() == FIRST_METRICS * FIRST_MINUTES, 60,
             what="the render app to answer every point sent")
    series = {one["target"]: one for one in render_json(ports["render"], "deploy.first.m007")}
    answer = {t: v for v, t in series["deploy.first.m007"]["datapoints"] if v is not None}
    assert answer == {stamp: 7 + k for k, stamp in enumerate(stamps)}

    # systemctl reload: a slower write rate and a new schema, both at work
    conf.write_text(conf.read_text().replace(
        "[cache]\n", "[cache]\nMAX_UPDATES_PER_SECOND = %d\n" % SLOW_RATE, 1))
    schemas = box.root / "etc/carbon/storage-schemas.conf"
    schemas.write_text("[deploy_reload]\npattern = ^deploy\\.reload\\.\n"
                       "retentions = 10s:1h\n\n" + schemas.read_text())
    box.run(["systemctl", "reload", *UNITS])
    changed = "SIGHUP: MAX_UPDATES_PER_SECOND changed from 500 to %d" % SLOW_RATE
    for instance in ("a", "b"):
        wait_for(lambda instance=instance: changed in log_lines(box, instance), 30,
                 what="cache %s to log the new rate" % instance)
    send_lines(ports["relay_line"], ["deploy.reload.x 1 %d\n" % now])
    created = box.root / "var/lib/graphite/whisper/deploy/reload/x.wsp"
    wait_for(created.exists, 60, what="deploy.reload.x to be created")
    wait_for(lambda: read_whisper(created, now - 60, now + 60), 30,
             what="deploy.reload.x's point")
    archives = whisper.info(str(created))["archives"]
    assert [(a["secondsPerPoint"], a["points"]) for a in archives] == [(10, 360)]
    assert all_active(box)

    # stop right after a burst the slowed writers cannot have written: the relay
    # stops first and hands everything to the caches, which drain it to whisper
    drain = ["deploy.drain.m%04d" % i for i in range(DRAIN_METRICS)]
    drain_stamps = [now - 60 * k for k in range(DRAIN_MINUTES)]
    send_lines(ports["relay_line"], ["%s %d %d\n" % (name, i, stamp)
                                     for stamp in drain_stamps
                                     for i, name in enumerate(drain)])

    def drain_rendered() -> int:   # through carbonlink: the caches have them all
        series = render_json(ports["render"], "deploy.drain.*")
        return sum(value is not None for one in series for value, _t in one["datapoints"])
    wait_for(lambda: drain_rendered() == DRAIN_METRICS * DRAIN_MINUTES, 60,
             what="the caches to hold the burst")
    started = time.monotonic()
    box.run(["systemctl", "stop", "carbon.target"], timeout=600)
    # the target's stop returns once the relay and the render app have stopped (they are
    # ordered after it); the caches (ordered before it) drain after that
    wait_for(lambda: box.run(["systemctl", "is-active", *UNITS], check=False).stdout.split()
             == ["inactive"] * len(UNITS), 600, interval=0.2, what="every unit stopped")
    stop_seconds = time.monotonic() - started
    drained = [int(m.group(1)) for instance in ("a", "b") for m in re.finditer(
        r"Draining (\d+) datapoints", log_lines(box, instance))]
    assert sum(drained) > 0, drained   # the stop wrote points, not the writer

    whisper_dir = box.root / "var/lib/graphite/whisper"
    sent = {(name, stamp): i + k for k, stamp in enumerate(stamps)
            for i, name in enumerate(first)}
    sent.update({(name, stamp): i for stamp in drain_stamps
                 for i, name in enumerate(drain)})
    stored = whisper_points(whisper_dir, first + drain, now - 3600, now + 60)
    lost = {key for key in sent if stored.get(key) != sent[key]}
    print("systemd: start %.1f s, stop %.1f s, drained %s points, sent %d, stored %d, "
          "lost %d" % (start_seconds, stop_seconds, drained, len(sent),
                       sum(key in stored for key in sent), len(lost)))
    assert not lost, sorted(lost)[:10]
    # the layout: files owned by the service user, logs in /var/log/carbon
    owner = box.run(["stat", "-c", "%U", "/var/lib/graphite/whisper/deploy",
                     "/var/log/carbon/carbon-cache-a/console.log"]).stdout.split()
    assert owner == ["_graphite", "_graphite"]
    assert not (box.root / "var/log/carbon/carbon-cache-b").exists()

    # ExecStartPre's check: a key given twice keeps the unit from starting, and the
    # journal names the file and both lines
    good = conf.read_text()
    conf.write_text(good.replace("[cache]\n", "[cache]\nMAX_CACHE_SIZE = 1000\n"
                                 "MAX_CACHE_SIZE = 2000\n", 1))
    refused = box.run(["systemctl", "start", "carbon-cache@a"], check=False)
    assert refused.returncode != 0
    journal = box.run(["journalctl", "--no-pager", "-u", "carbon-cache@a"]).stdout
    assert "carbon.conf" in journal and "MAX_CACHE_SIZE" in journal, journal[-2000:]
    assert box.run(["systemctl", "is-active", "carbon-cache@a"],
                   check=False).stdout.split() != ["active"]
    conf.write_text(good)
