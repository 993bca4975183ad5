"""The image's entrypoint (container/entrypoint.py), outside any container: which command
each role runs, what it refuses, what it records for the healthcheck and how that check
answers. tests/deploy/test_container.py runs it inside the image."""

from __future__ import annotations

import importlib.util
import json
import os
import pickle
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from carbon.formats.pickled import frame, frame_length, recv_exactly
from tests.support import ROOT, free_port

ENTRYPOINT = ROOT / "container" / "entrypoint.py"
IMAGE_CONF = ROOT / "container" / "conf"


def load_entrypoint():
    spec = importlib.util.spec_from_file_location("carbon_container_entrypoint", ENTRYPOINT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks its module up
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def ep():
    return load_entrypoint()


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {"GRAPHITE_CONF_DIR": str(IMAGE_CONF), "GRAPHITE_STORAGE_DIR": str(tmp_path),
            "GRAPHITE_ROOT": str(tmp_path), "PATH": os.environ.get("PATH", ""),
            "CARBON_CONTAINER_STATE": str(tmp_path / "state.json")}


def test_cache_runs_in_the_foreground_with_the_image_config(ep, env) -> None:
    plan = ep.plan(["cache", "--instance", "b"], env)
    assert plan.argv == ["carbon-cache.py", "--nodaemon", "--instance", "b", "start"]
    assert plan.health == {"role": "cache", "program": "carbon-cache", "instance": "b",
                           "carbonlink": ["127.0.0.1", 7002]}
    assert plan.remove == ["/run/carbon/carbon-cache-b.pid"]   # PID_DIR of the image config


def test_roles_and_their_defaults(ep, env) -> None:
    relay = ep.plan(["relay"], env)
    assert relay.argv == ["carbon-relay.py", "--nodaemon", "start"]
    assert relay.health["line"] == ["127.0.0.1", 2013]
    assert relay.health["instance"] == "a"
    aggregator = ep.plan(["aggregator", "--debug"], env)
    assert aggregator.argv == ["carbon-aggregator.py", "--nodaemon", "--debug", "start"]
    assert aggregator.health["line"] == ["127.0.0.1", 2023]
    assert ep.plan(["aggregator-cache"], env).health["carbonlink"] == ["127.0.0.1", 7032]


def test_options_pass_through_and_a_pidfile_option_is_the_one_cleared(ep, env) -> None:
    plan = ep.plan(["cache", "--pidfile", "/tmp/x.pid", "--logdir", "/l"], env)
    assert plan.argv == ["carbon-cache.py", "--nodaemon", "--pidfile", "/tmp/x.pid",
                         "--logdir", "/l", "start"]
    assert plan.remove == ["/tmp/x.pid"]


def test_a_bad_config_still_runs_the_daemon_which_names_it(ep, env, tmp_path) -> None:
    bad = tmp_path / "carbon.conf"
    bad.write_text("[cache]\nMAX_UPDATES_PER_SECOND = fast\n")
    plan = ep.plan(["cache", "--config", str(bad)], env)
    assert plan.argv[-3:] == ["--config", str(bad), "start"]
    assert "carbonlink" not in plan.health
    assert plan.remove == []


@pytest.mark.parametrize("action", ["start", "stop", "status"])
def test_an_action_is_refused(ep, env, action) -> None:
    with pytest.raises(ep.UsageError, match="leave out '%s'" % action):
        ep.plan(["cache", "--instance", "a", action], env)


def test_unknown_option_and_empty_command(ep, env, capsys) -> None:
    with pytest.raises(SystemExit) as exited:
        ep.plan(["relay", "--no-such-option"], env)
    assert exited.value.code == 2
    assert "no such option: --no-such-option" in capsys.readouterr().err
    with pytest.raises(ep.UsageError, match="usage: carbon-container"):
        ep.plan([], env)
    with pytest.raises(ep.UsageError, match="unexpected argument 'extra'"):
        ep.plan(["relay", "extra"], env)


def test_render_listens_on_all_addresses_unless_told(ep, env) -> None:
    plan = ep.plan(["render"], env)
    settings = str(IMAGE_CONF / "local_settings.py")
    assert plan.argv == ["graphite-render", "--config", settings, "--bind", "0.0.0.0"]
    assert plan.health == {"role": "render", "bind": "0.0.0.0", "port": 8080}
    told = ep.plan(["render", "--bind", "127.0.0.1", "--port", "9000", "--workers", "2"], env)
    assert told.argv[-6:] == ["--bind", "127.0.0.1", "--port", "9000", "--workers", "2"]
    assert told.health == {"role": "render", "bind": "127.0.0.1", "port": 9000}


def test_anything_else_runs_as_given(ep, env) -> None:
    plan = ep.plan(["sh", "-c", "echo hi"], env)
    assert plan.argv == ["sh", "-c", "echo hi"] and plan.health is None


def run_entrypoint(args, env):
    return subprocess.run([sys.executable, str(ENTRYPOINT), *args], capture_output=True,
                          text=True, env=env, timeout=60)


def test_main_execs_the_daemon_and_records_it(env, tmp_path) -> None:
    env = dict(env, PATH="%s:%s" % (Path(sys.executable).parent, env["PATH"]))
    missing = tmp_path / "nowhere" / "carbon.conf"
    done = run_entrypoint(["relay", "--config", str(missing)], env)
    # the daemon ran (and named its missing config): the entrypoint exec'd carbon-relay.py
    assert done.returncode == 1, done
    assert "missing required config" in done.stdout + done.stderr
    assert json.loads((tmp_path / "state.json").read_text())["program"] == "carbon-relay"
    refused = run_entrypoint(["cache", "stop"], env)
    assert refused.returncode == 2
    assert "leave out 'stop'" in refused.stderr


def test_healthcheck_without_a_recorded_daemon_is_unhealthy(env) -> None:
    done = run_entrypoint(["healthcheck"], env)
    assert done.returncode == 1
    assert "unhealthy: no daemon recorded" in done.stdout


def test_healthcheck_of_a_port_nobody_answers(ep, env, tmp_path, capsys) -> None:
    state = Path(env["CARBON_CONTAINER_STATE"])
    for health in ({"role": "relay", "program": "carbon-relay", "line": ["127.0.0.1",
                                                                          free_port()]},
                   {"role": "render", "bind": "0.0.0.0", "port": free_port()},
                   {"role": "cache", "program": "carbon-cache", "instance": "a"}):
        state.write_text(json.dumps(health))
        assert ep.healthcheck(env) == 1
        assert "unhealthy: %s" % health["role"] in capsys.readouterr().out


def test_healthcheck_asks_carbonlink(ep, env, capsys) -> None:
    """A listener answering one carbonlink request as a cache does; then one that answers
    something else is not a healthy cache."""
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    answers = [{"datapoints": []}, {"error": "nope"}]
    requests = []

    def serve():
        for answer in answers:
            conn, _ = server.accept()
            with conn:
                size = frame_length(recv_exactly(conn, 4))
                requests.append(pickle.loads(recv_exactly(conn, size)))
                conn.sendall(frame(pickle.dumps(answer, protocol=2)))

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    state = Path(env["CARBON_CONTAINER_STATE"])
    state.write_text(json.dumps({"role": "cache", "program": "carbon-cache", "instance": "a",
                                 "carbonlink": ["127.0.0.1", port]}))
    try:
        assert ep.healthcheck(env) == 0
        assert "carbon-cache carbonlink 127.0.0.1:%d answers" % port in capsys.readouterr().out
        assert requests[0] == {"type": "cache-query", "metric": "carbon.container.healthcheck"}
        assert ep.healthcheck(env) == 1
        assert "answered {'error': 'nope'}" in capsys.readouterr().out
    finally:
        thread.join(10)
        server.close()
