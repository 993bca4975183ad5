"""Config mistakes on the terminal: warnings on stderr at start, duplicate keys refused,
and the ``check`` action (the scripts' and ``carbon-config check``), which writes nothing."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from carbon.cluster.generate import carbon_conf, rebalance_relay
from carbon.cluster.spec import load_cluster
from carbon.config.errors import ConfigError
from carbon.config.loader import load_settings
from tests.cluster.clusterutil import cluster_file
from tests.daemon.shipped import BIN, shipped_root, stack_env
from tests.support import CONF, free_port, port_open, wait_for

SCRIPTS = ["carbon-cache.py", "carbon-relay.py", "carbon-aggregator.py",
           "carbon-aggregator-cache.py"]


def run(root: Path, argv: list[str], timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(argv, env=stack_env(root), cwd=root, capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


def files_under(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def with_line(conf: Path, after: str, line: str) -> None:
    text = conf.read_text()
    assert after in text
    conf.write_text(text.replace(after, after + line + "\n", 1))


@pytest.mark.parametrize("script", SCRIPTS)
def test_check_of_the_shipped_conf_is_one_ok_line_and_writes_nothing(tmp_path, script):
    root = shipped_root(tmp_path / "root")
    before = files_under(root)
    os.chmod(root, 0o555)   # nothing may be made (no storage/, pidfile or log)
    try:
        result = run(root, [str(BIN / script), "check"])
    finally:
        os.chmod(root, 0o755)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stderr == "" and len(result.stdout.splitlines()) == 1
    assert result.stdout.startswith("ok: carbon-"), result.stdout
    assert files_under(root) == before


@pytest.mark.parametrize("script,section,line,needle", [
    ("carbon-cache.py", "[cache]\n", "MAX_CACHE_SIZE = lots", "key MAX_CACHE_SIZE"),
    ("carbon-cache.py", "[cache]\n", "CACHE_WRITE_STRATEGY = fastest", "key CACHE_WRITE_STRATEGY"),
    ("carbon-relay.py", "[relay]\n", "DESTINATIONS = 127.0.0.1", "key DESTINATIONS"),
    ("carbon-aggregator.py", "[aggregator]\n", "FORWARD_ALL = perhaps", "key FORWARD_ALL"),
])
def test_check_names_file_line_and_key_of_a_bad_value(tmp_path, script, section, line, needle):
    root = shipped_root(tmp_path)
    conf = root / "conf" / "carbon.conf"
    with_line(conf, section, line)
    result = run(root, [str(BIN / script), "--config", str(conf), "check"])
    assert result.returncode == 1 and result.stdout == "", result.stdout + result.stderr
    assert str(conf) in result.stderr and needle in result.stderr, result.stderr
    number = conf.read_text().splitlines().index(line) + 1
    if "DESTINATIONS" not in line and "STRATEGY" not in line:
        assert "line %d" % number in result.stderr, result.stderr


@pytest.mark.parametrize("name,text,needle", [
    ("storage-schemas.conf", "[bad]\npattern = .*\nretentions = 60s:forever\n", "retentions"),
    ("storage-schemas.conf", "[bad]\npattern = ([\nretentions = 60s:1d\n", "pattern"),
    ("storage-aggregation.conf", "[bad]\npattern = .*\nxFilesFactor = 2\n", "xFilesFactor"),
    ("relay-rules.conf", "[default]\ndefault = true\ndestinations = nowhere\n", "destination"),
    ("aggregation-rules.conf", "a.<x> (10) = nosuchmethod a.<x>.*\n", "aggregation-rules.conf"),
])
def test_check_names_the_rule_file_at_fault(tmp_path, name, text, needle):
    root = shipped_root(tmp_path)
    path = root / "conf" / name
    path.write_text(text)
    script = {"relay-rules.conf": "carbon-relay.py",
              "aggregation-rules.conf": "carbon-aggregator.py"}.get(name, "carbon-cache.py")
    argv = [str(BIN / script)] + (["--instance=rules"] if name == "relay-rules.conf" else [])
    result = run(root, argv + ["check"])
    assert result.returncode == 1, result.stdout + result.stderr
    assert str(path) in result.stderr and needle in result.stderr, result.stderr


def test_check_names_a_bad_whitelist_regex(tmp_path):
    root = shipped_root(tmp_path)
    conf = root / "conf" / "carbon.conf"
    with_line(conf, "[cache]\n", "USE_WHITELIST = True")
    (root / "conf" / "whitelist.conf").write_text("^ok\\.\n^bad(\n")
    result = run(root, [str(BIN / "carbon-cache.py"), "check"])
    assert result.returncode == 1
    assert "%s, line 2" % (root / "conf" / "whitelist.conf") in result.stderr, result.stderr


def test_duplicate_key_stops_start_naming_both_lines(tmp_path):
    root = shipped_root(tmp_path)
    conf = root / "conf" / "carbon.conf"
    with_line(conf, "[cache]\n", "MAX_UPDATES_PER_SECOND = 100")
    with_line(conf, "[cache]\n", "max_updates_per_second = 200")
    lines = conf.read_text().splitlines()
    first, second = (i + 1 for i, text in enumerate(lines)
                     if text.lower().startswith("max_updates_per_second ="))
    with pytest.raises(ConfigError) as info:
        load_settings("carbon-cache", "a", str(conf), str(root), environ={})
    assert (info.value.path, info.value.line) == (str(conf), second)
    message = str(info.value)
    assert "line %d" % first in message and "line %d" % second in message
    for argv in (["--nodaemon", "start"], ["start"], ["check"]):
        result = run(root, [str(BIN / "carbon-cache.py")] + argv)
        assert result.returncode == 1, (argv, result.stdout + result.stderr)
        assert "line %d" % first in result.stderr and "line %d" % second in result.stderr
    assert not (root / "storage" / "carbon-cache-a.pid").exists()


def test_duplicate_section_is_refused_naming_both_lines(tmp_path):
    conf = tmp_path / "carbon.conf"
    conf.write_text("[cache]\nLOG_UPDATES = False\n\n[cache]\nLOG_CREATES = False\n")
    with pytest.raises(ConfigError, match="already defined on line 1, again on line 4"):
        load_settings("carbon-cache", "a", str(conf), str(tmp_path), environ={})


def test_unknown_key_is_warned_on_stderr_in_the_foreground_and_by_start(tmp_path):
    root = shipped_root(tmp_path)
    conf = root / "conf" / "carbon.conf"
    with_line(conf, "[cache]\n", "MAX_CACHE_SIZ = 1000")
    ports = [free_port() for _ in range(3)]
    with_line(conf, "[cache]\n", "LINE_RECEIVER_PORT = %d\nPICKLE_RECEIVER_PORT = %d\n"
              "CACHE_QUERY_PORT = %d" % tuple(ports))
    warning = "unknown key MAX_CACHE_SIZ in [cache] (did you mean MAX_CACHE_SIZE?)"
    check = run(root, [str(BIN / "carbon-cache.py"), "check"])
    assert check.returncode == 0 and warning in check.stderr, check.stdout + check.stderr
    assert check.stdout.startswith("ok: ") and "1 warning" in check.stdout
    # by the CLI: the launching process prints it before the daemon detaches
    started = run(root, [str(BIN / "carbon-cache.py"), "start"])
    try:
        assert started.returncode == 0, started.stdout + started.stderr
        assert "WARNING: " in started.stderr and warning in started.stderr, started.stderr
    finally:
        stop = run(root, [str(BIN / "carbon-cache.py"), "stop"])
        assert stop.returncode == 0
        wait_for(lambda: not (root / "storage" / "carbon-cache-a.pid").exists(), 60,
                 what="the daemon to exit")
    # in the foreground: on stderr, and in the log (stdout) as before
    proc = subprocess.Popen([str(BIN / "carbon-cache.py"), "--nodaemon", "start"],
                            env=stack_env(root), cwd=root, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stderr.readline()
        wait_for(lambda: port_open(ports[2]) or proc.poll() is not None, 60,
                 what="the foreground daemon to listen")
    finally:
        proc.terminate()
        out, err = proc.communicate(timeout=60)
    assert warning in line, line + err
    assert warning in out


def test_rebalancing_relay_conf_has_no_unknown_key(tmp_path):
    spec = load_cluster(str(cluster_file(tmp_path, {"a": "127.0.0.1", "b": "127.0.0.1"})))
    grown = load_cluster(str(cluster_file(tmp_path, {"a": "127.0.0.1", "b": "127.0.0.1",
                                                     "c": "127.0.0.1"}, name="grown.toml")))
    state = tmp_path / "state.json"
    state.write_text('{"old": [], "new": []}')
    conf = tmp_path / "carbon.conf"
    conf.write_text(carbon_conf(grown, grown.host("a"), rebalance_relay(spec, grown,
                                                                         str(state))))
    settings = load_settings("carbon-relay", "a", str(conf), str(tmp_path), environ={})
    assert settings.RELAY_METHOD == "cluster-rebalance"
    assert settings.REBALANCE_STATE == str(state)
    assert settings.config_warnings == []


def test_carbon_config_check_every_program_and_instance_of_the_shipped_conf(tmp_path):
    root = shipped_root(tmp_path / "root")
    script = shutil.which("carbon-config", path=str(BIN)) or str(BIN / "carbon-config")
    argv = [script] if os.path.exists(script) else [sys.executable, "-m",
                                                    "carbon.daemon.check"]
    result = run(root, argv + ["check", "--config", str(root / "conf" / "carbon.conf")])
    assert result.returncode == 0 and result.stderr == "", result.stdout + result.stderr
    checked = sorted(line.split(",")[0] for line in result.stdout.splitlines())
    assert checked == sorted([
        "ok: graphite-render", "ok: carbon-cache (instance a)", "ok: carbon-cache (instance b)",
        "ok: carbon-relay (instance a)", "ok: carbon-relay (instance rules)",
        "ok: carbon-aggregator (instance a)", "ok: carbon-aggregator-cache (instance a)"])
    (root / "conf" / "relay-rules.conf").write_text("[x]\npattern = ([\ndestinations = h:1\n")
    bad = run(root, argv + ["check", "--program", "relay", "--instance", "rules"])
    assert bad.returncode == 1 and "relay-rules.conf" in bad.stderr, bad.stderr
    assert str(CONF) not in bad.stderr   # the copy's files, found through GRAPHITE_ROOT


def test_carbon_config_check_names_the_render_settings_at_fault(tmp_path):
    root = shipped_root(tmp_path / "root")
    settings = root / "conf" / "local_settings.py"
    settings.write_text(settings.read_text() + '\nCARBONLINK_HOSTS = ["127.0.0.1:0:a"]\n')
    result = run(root, [str(BIN / "carbon-config"), "check", "--program", "render"])
    assert result.returncode == 1, result.stdout + result.stderr
    assert "%s, key CARBONLINK_HOSTS" % settings in result.stderr, result.stderr
    settings.write_text("X = (\n")
    result = run(root, [str(BIN / "graphite-render"), "--config", str(settings), "--check"])
    assert result.returncode == 2 and "%s, line 1" % settings in result.stderr


def test_check_warns_of_relay_rule_destinations_the_relay_never_uses(tmp_path):
    root = shipped_root(tmp_path)
    (root / "conf" / "relay-rules.conf").write_text(
        "[default]\ndefault = true\ndestinations = 127.0.0.1:9999:z\n")
    result = run(root, [str(BIN / "carbon-relay.py"), "--instance=rules", "check"])
    assert result.returncode == 0 and "1 warning" in result.stdout, result.stdout
    assert "missing from DESTINATIONS" in result.stderr and "127.0.0.1:9999:z" in result.stderr
