"""``carbon-fast install-layout --root DIR``: what it writes, that it is idempotent and
never overwrites a config, and that the installed carbon.conf puts every path where
carbon 1.1.10 itself would (its own read_config, from the reference venv)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from carbon.config.loader import load_settings
from carbon.deploy.cli import main
from carbon.deploy.layout import UNITS
from carbon.playground.reference_peer import reference_venv
from tests.support import CONF, ROOT

BINDIR = "/opt/carbon-fast/bin"
PATHS = ("STORAGE_DIR", "LOCAL_DATA_DIR", "WHITELISTS_DIR", "PID_DIR", "LOG_DIR", "CONF_DIR",
         "pidfile")
CASES = [("carbon-cache", "a"), ("carbon-cache", "b"), ("carbon-relay", "a"),
         ("carbon-relay", "rules"), ("carbon-aggregator", "a"),
         ("carbon-aggregator-cache", "a"), ("carbon-cache", "")]


def install(root: Path, *extra: str) -> str:
    out = subprocess.run([sys.executable, "-m", "carbon.deploy.cli", "install-layout",
                          "--root", str(root), "--bindir", BINDIR, *extra],
                         capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    return out.stdout


def tree(root: Path) -> dict[str, str]:
    """Every file and link under root: its text, or where the link points."""
    found = {}
    for path in sorted(root.rglob("*")):
        key = "/" + str(path.relative_to(root))
        if path.is_symlink():
            found[key] = "-> " + os.readlink(path)
        elif path.is_file():
            found[key] = path.read_text(errors="replace")
    return found


def test_install_layout_writes_user_folders_config_and_units(tmp_path):
    said = install(tmp_path)
    assert "write /etc/carbon/carbon.conf" in said
    assert "_graphite:" in (tmp_path / "etc/passwd").read_text()
    uid = int((tmp_path / "etc/passwd").read_text().split("_graphite:x:")[1].split(":")[0])
    for folder in ("var/lib/graphite", "var/lib/graphite/whisper", "var/log/carbon"):
        assert (tmp_path / folder).stat().st_uid == uid, folder
    assert (tmp_path / "etc/carbon").stat().st_uid == 0   # the config stays root's
    for name in ("carbon.conf", "storage-schemas.conf", "storage-aggregation.conf",
                 "relay-rules.conf", "aggregation-rules.conf", "rewrite-rules.conf"):
        assert (tmp_path / "etc/carbon" / name).exists(), name
    assert (tmp_path / "etc/carbon/storage-schemas.conf").read_text() == \
        (CONF / "storage-schemas.conf").read_text()

    units = tmp_path / "etc/systemd/system"
    for name in UNITS:
        text = (units / name).read_text()
        assert not re.search(r"@[A-Z_]+@", text), name
        if name.endswith(".service"):
            assert "User=_graphite" in text and "ProtectSystem=strict" in text, name
            assert "ReadWritePaths=/var/lib/graphite /var/log/carbon" in text, name
            start = re.search(r"(?m)^ExecStart=(\S+) (.*)$", text)
            assert start.group(1).startswith(BINDIR + "/"), name
    cache = (units / "carbon-cache@.service").read_text()
    assert "ExecStart=%s/carbon-cache.py --instance=%%i --nodaemon --log-to=${CARBON_LOG_TO}" \
        " start" % BINDIR in cache
    assert "Environment=GRAPHITE_CONF_DIR=/etc/carbon GRAPHITE_STORAGE_DIR=/var/lib/graphite" \
        in cache
    assert "ExecReload=/bin/kill -HUP $MAINPID" in cache
    assert "RuntimeDirectory=carbon" in cache
    render = (units / "graphite-render.service").read_text()
    assert "--config=/etc/graphite/local_settings.py" in render
    wants = sorted(p.name for p in (units / "carbon.target.wants").iterdir())
    assert wants == ["carbon-cache@a.service", "carbon-cache@b.service",
                     "carbon-relay@a.service", "graphite-render.service"]
    assert os.readlink(units / "carbon.target.wants/carbon-cache@b.service") == \
        "/etc/systemd/system/carbon-cache@.service"

    settings = (tmp_path / "etc/graphite/local_settings.py").read_text()
    namespace: dict = {"__file__": "/etc/graphite/local_settings.py"}
    exec(compile(settings, "local_settings.py", "exec"), namespace)
    assert (namespace["STORAGE_DIR"], namespace["WHISPER_DIR"]) == \
        ("/var/lib/graphite", "/var/lib/graphite/whisper")


def test_install_layout_again_changes_nothing_and_keeps_an_edited_config(tmp_path):
    install(tmp_path)
    conf = tmp_path / "etc/carbon/carbon.conf"
    conf.write_text("[cache]\nMAX_CACHE_SIZE = 5\n")      # the operator's edit
    unit = tmp_path / "etc/systemd/system/carbon-relay@.service"
    unit.write_text("stale\n")                             # an older package's unit
    before = tree(tmp_path)
    said = install(tmp_path)
    assert "keep /etc/carbon/carbon.conf (exists; not overwritten)" in said
    assert "update /etc/systemd/system/carbon-relay@.service" in said
    assert "unchanged /etc/systemd/system/carbon-cache@.service" in said
    assert "enabled carbon-cache@a.service" in said
    after = tree(tmp_path)
    assert after.pop("/etc/systemd/system/carbon-relay@.service") != "stale\n"
    before.pop("/etc/systemd/system/carbon-relay@.service")
    assert after == before
    assert conf.read_text() == "[cache]\nMAX_CACHE_SIZE = 5\n"


@pytest.mark.parametrize("unit", ["carbon-cache@.service", "carbon-cashe@a", "carbon.target"])
def test_enabling_an_unknown_unit_is_refused_before_anything_is_written(tmp_path, unit):
    with pytest.raises(SystemExit, match="cannot enable"):
        main(["install-layout", "--root", str(tmp_path), "--bindir", BINDIR, "--enable", unit])
    assert list(tmp_path.iterdir()) == []


def test_dry_run_says_everything_and_writes_nothing(tmp_path, capsys):
    assert main(["install-layout", "--root", str(tmp_path), "--bindir", BINDIR,
                 "--dry-run", "--enable", "carbon-cache@c"]) == 0
    said = capsys.readouterr().out.splitlines()
    assert all(line.startswith("would: ") for line in said), said
    assert "would: write /etc/systemd/system/carbon-cache@.service" in said
    assert any(line.startswith("would: enable carbon-cache@c.service") for line in said)
    assert any("systemd-sysusers --root=%s" % tmp_path in line for line in said)
    assert list(tmp_path.iterdir()) == []


# The path keys of Debian's graphite-carbon carbon.conf (in [cache] only; its PID_DIR
# changed to the units' /run/carbon, as docs/deploying.md says), and a relay section
# that sets none.
DEBIAN_STYLE = """[cache]
STORAGE_DIR    = /var/lib/graphite/
LOCAL_DATA_DIR = /var/lib/graphite/whisper/
CONF_DIR       = /etc/carbon/
LOG_DIR        = /var/log/carbon/
PID_DIR        = /run/carbon
USER = _graphite

[relay]
LINE_RECEIVER_PORT = 2013
DESTINATIONS = 127.0.0.1:2004

[aggregator]
LINE_RECEIVER_PORT = 2023
"""


def test_a_debian_style_conf_with_the_units_environment(tmp_path):
    conf = tmp_path / "etc/carbon"
    conf.mkdir(parents=True)
    (conf / "carbon.conf").write_text(DEBIAN_STYLE)
    environ = {"GRAPHITE_CONF_DIR": str(conf), "GRAPHITE_STORAGE_DIR": "/var/lib/graphite"}
    cases = [("carbon-cache", "a"), ("carbon-relay", "a"), ("carbon-aggregator", "a")]
    ours = [installed_paths(tmp_path, program, instance, environ) for program, instance in cases]
    assert ours == reference_paths(tmp_path, cases, environ)
    assert ours[0]["pidfile"] == "/run/carbon/carbon-cache-a.pid"
    assert ours[0]["CONF_DIR"] == "/etc/carbon"
    assert ours[1]["LOG_DIR"] == "/var/lib/graphite/log/carbon-relay/carbon-relay-a"
    assert ours[1]["pidfile"] == "/var/lib/graphite/carbon-relay-a.pid"


def reference_paths(tmp_path: Path, cases: list, environ: dict) -> list:
    python = reference_venv() / "bin" / "python"
    theirs = subprocess.run([str(python), "-c", REFERENCE, json.dumps(cases)],
                            capture_output=True, text=True, cwd=tmp_path,
                            env=dict(environ, PATH="/usr/bin:/bin"))
    assert theirs.returncode == 0, theirs.stderr
    return json.loads(theirs.stdout)


def installed_paths(root: Path, program: str, instance: str, environ: dict) -> dict:
    settings = load_settings(program, instance, None, "/opt/carbon-fast", environ=environ)
    return {key: os.path.normpath(settings[key]) for key in PATHS}


REFERENCE = """
import json, os, sys
from carbon.conf import read_config
out = []
for program, instance in json.loads(sys.argv[1]):
    options = {"config": None, "instance": instance, "pidfile": None, "logdir": None}
    settings = read_config(program, options, ROOT_DIR="/opt/carbon-fast")
    out.append({key: os.path.normpath(settings[key]) for key in %r})
print(json.dumps(out))
""" % (PATHS,)


@pytest.mark.parametrize("storage_env", [None, "/var/lib/graphite", "/srv/elsewhere"])
def test_installed_conf_paths_are_carbons_own(tmp_path, storage_env):
    """Ours and carbon 1.1.10's read_config, with the units' GRAPHITE_CONF_DIR, with or
    without a GRAPHITE_STORAGE_DIR (the units set the layout's; the STORAGE_DIR of the
    installed conf's sections overrides any)."""
    install(tmp_path)
    environ = {"GRAPHITE_CONF_DIR": str(tmp_path / "etc/carbon")}
    if storage_env:
        environ["GRAPHITE_STORAGE_DIR"] = storage_env
    ours = [installed_paths(tmp_path, program, instance, environ)
            for program, instance in CASES]
    assert ours == reference_paths(tmp_path, CASES, environ)
    cache_a = dict(zip(PATHS, ours[0].values(), strict=True))
    assert cache_a["LOCAL_DATA_DIR"] == "/var/lib/graphite/whisper"
    assert cache_a["LOG_DIR"] == "/var/log/carbon/carbon-cache-a"
    assert cache_a["pidfile"] == "/run/carbon/carbon-cache-a.pid"
    assert ours[2]["LOG_DIR"] == "/var/log/carbon/carbon-relay-a"
