"""Every README command block that starts a daemon, run as written on the shipped conf/.

Blocks are marked ``<!-- readme-test: NAME -->`` in README.md; each marked block runs in
bash (cwd and GRAPHITE_ROOT = a temporary copy of conf/, this venv's scripts first on
PATH), in README order, and CHECKS[NAME] verifies what the text around it says. A block
that starts a daemon without a marker fails the test. Deviations from the text, all
forced by the test machine: the AMQP block's broker is a private RabbitMQ on a free port
(AMQP_PORT and --port added), and the demo writes under a temporary CARBON_DEMO_DIR.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from tests.amqp.broker import Broker, find_server
from tests.daemon.shipped import (
    BIN, port_free, RELAY_AND_CACHES, require_free_ports, shipped_root,
)
from tests.support import ROOT, free_port, read_whisper, wait_for

MARK = re.compile(r"<!-- readme-test: ([a-z-]+) -->\s*```sh\n(.*?)```", re.S)
ANY_BLOCK = re.compile(r"```sh\n(.*?)```", re.S)
STARTS_DAEMON = re.compile(
    r"(?m)^\s*(\S*carbon-[a-z-]+\.py\b[^\n#]*\bstart\b|graphite-render\b|\S*demo\.sh)")
README_PORTS = {"render app": 8080, "amqp cache line": 2203, "amqp cache pickle": 2204,
                "amqp cache carbonlink": 7202}


def readme_blocks() -> list[tuple[str, str]]:
    text = (ROOT / "README.md").read_text()
    marked = MARK.findall(text)
    unmarked = [b for b in ANY_BLOCK.findall(text) if STARTS_DAEMON.search(b)
                and b not in {block for _name, block in marked}]
    assert unmarked == [], "README blocks that start a daemon need a readme-test marker"
    return marked


def run_block(root: Path, block: str, timeout: float = 120) -> str:
    env = dict(os.environ, GRAPHITE_ROOT=str(root), PATH=str(BIN) + os.pathsep +
               os.environ.get("PATH", ""), PYTHONPATH=str(ROOT))
    env.pop("GRAPHITE_STORAGE_DIR", None)
    env.pop("GRAPHITE_CONF_DIR", None)
    # files, not pipes: a daemon the block leaves in the background keeps them open
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        code = subprocess.run(["bash", "-euo", "pipefail", "-c", block], cwd=root, env=env,
                              stdout=out, stderr=err, timeout=timeout,
                              stdin=subprocess.DEVNULL).returncode
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    assert code == 0, "block failed:\n%s\n%s%s" % (block, stdout, stderr)
    return stdout


def created_by(root: Path, name: str) -> list[str]:
    owners = []
    for instance in ("a", "b"):
        log = root / "storage" / "log" / "carbon-cache" / ("carbon-cache-" + instance) / \
            "creates.log"
        if log.exists() and ("creating database metric %s " % name) in log.read_text():
            owners.append(instance)
    return owners


def stored(root: Path, name: str) -> list[float]:
    path = root / "storage" / "whisper" / (name.replace(".", "/") + ".wsp")
    now = time.time()
    return sorted(read_whisper(path, int(now) - 900, int(now) + 60).values())


def wait_value(root: Path, name: str, value: float, timeout: float = 45) -> None:
    wait_for(lambda: value in stored(root, name), timeout,
             what="%s = %s (have %s)" % (name, value, stored(root, name)))


def check_cache(root: Path, out: str) -> None:
    assert "running" in out.lower()
    wait_value(root, "test.direct.value", 42.0)


def check_relay(root: Path, out: str) -> None:
    names = ["servers.%s.load" % h for h in ("web01", "web02", "db01", "db02")]
    wait_for(lambda: all(created_by(root, n) for n in names), 45, what="relay placement")
    owners = {n: created_by(root, n) for n in names}
    # as the README says: each name on exactly one instance, web01 on b, the others on a
    assert owners == {"servers.web01.load": ["b"], "servers.db02.load": ["a"],
                      "servers.web02.load": ["a"], "servers.db01.load": ["a"]}


def check_rules(root: Path, out: str) -> None:
    wait_for(lambda: created_by(root, "servers.web07.mem") and
             created_by(root, "servers.db07.mem"), 45, what="rules placement")
    assert created_by(root, "servers.web07.mem") == ["b"]
    assert created_by(root, "servers.db07.mem") == ["a"]
    wait_value(root, "servers.web07.mem", 3.0)


def check_aggregator(root: Path, out: str) -> None:
    wait_value(root, "prod.applications.shop.all.requests", 12.0)
    wait_value(root, "prod.applications.shop.host1.requests", 5.0)  # FORWARD_ALL


def check_aggregator_cache(root: Path, out: str) -> None:
    wait_value(root, "prod.applications.blog.all.requests", 5.0)
    assert stored(root, "prod.applications.blog.host2.requests") == [3.0]


def check_render(root: Path, out: str) -> None:
    series = json.loads(out)
    values = {s["target"]: [v for v, _t in s["datapoints"] if v is not None] for s in series}
    assert values == {"servers.%s.load" % h: [1.5] for h in ("db01", "db02", "web01",
                                                              "web02")}


def check_amqp(root: Path, out: str) -> None:
    wait_value(root, "amqp.example.value", 7.0)


def check_stop(root: Path, out: str) -> None:
    assert "carbon-cache-a.pid" in out and "carbon-relay-a.pid" in out
    assert "creates.log" in out and "console.log" in out
    assert re.search(r"-a\n", out) and re.search(r"-b\n", out), out  # self-metric folders
    wait_for(lambda: not list((root / "storage").glob("*.pid")), 60,
             what="every daemon to exit and remove its pidfile")


CHECKS = {"cache": check_cache, "relay": check_relay, "rules": check_rules,
          "aggregator": check_aggregator, "aggregator-cache": check_aggregator_cache,
          "render": check_render, "amqp": check_amqp, "stop": check_stop}


def self_metric_folders(root: Path) -> int:
    return len(list((root / "storage" / "whisper" / "carbon" / "agents").glob("*")))


def pids_of(root: Path) -> list[int]:
    pids = []
    for path in list((root / "storage").glob("*.pid")):
        try:
            pids.append(int(path.read_text().strip()))
        except ValueError:
            pass
    return pids


def end_demo(proc: subprocess.Popen, run: Path) -> None:
    """Kill a demo still running, and every daemon it left with a pid file in ``run``."""
    if proc.poll() is None:
        proc.kill()
        proc.wait(10)
    for pid in pids_of(run):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def test_readme_daemon_blocks_do_what_the_text_says(tmp_path):
    blocks = dict(readme_blocks())
    assert set(blocks) == set(CHECKS) | {"demo"}
    server = find_server()
    if server is None and os.environ.get("CI"):
        pytest.fail("rabbitmq-server is not installed (tools/system-deps.sh installs it)")
    require_free_ports()
    taken = [p for p in README_PORTS.values() if not port_free(p)]
    assert not taken, "the README examples need these ports of 127.0.0.1 free: %s" % taken
    root = shipped_root(tmp_path / "root")
    broker = None
    try:
        for name, block in readme_blocks():
            if name == "demo":
                continue
            if name == "amqp":
                if server is None:
                    pytest.fail("rabbitmq-server not found: the README's AMQP block needs it")
                broker = Broker(tmp_path / "broker", server)
                broker.start()
                conf = root / "conf" / "carbon.amqp.conf"
                conf.write_text(conf.read_text().replace(
                    "\nENABLE_AMQP = True\n", "\nENABLE_AMQP = True\nAMQP_PORT = %d\n"
                    % broker.port))
                block = block.replace("--host 127.0.0.1", "--host 127.0.0.1 --port %d"
                                      % broker.port)
            if name == "stop":  # the text: self-metrics every CARBON_METRIC_INTERVAL (10 s)
                wait_for(lambda: self_metric_folders(root) >= 2, 30, what="self-metrics")
            CHECKS[name](root, run_block(root, block))
    finally:
        for pid in pids_of(root):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if broker is not None:
            broker.close()


def test_readme_first_command_runs_the_demo_and_stops_on_ctrl_c(tmp_path):
    block = dict(readme_blocks())["demo"]
    assert block.startswith("./tools/demo.sh ")
    require_free_ports(RELAY_AND_CACHES)
    assert port_free(8080), "the demo needs port 8080 of 127.0.0.1 free"
    run = tmp_path / "demo-run"
    env = dict(os.environ, CARBON_DEMO_DIR=str(run), VENV=str(BIN.parent))
    proc = subprocess.Popen([str(ROOT / "tools" / "demo.sh"), "--seconds", "2"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []
    try:
        deadline = time.monotonic() + 240
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("Running. Ctrl-C") or time.monotonic() > deadline:
                break
        assert lines and lines[-1].startswith("Running. Ctrl-C"), "".join(lines)
        proc.send_signal(signal.SIGINT)
        rest, _ = proc.communicate(timeout=120)
    finally:
        end_demo(proc, run)
    out = "".join(lines) + rest
    assert proc.returncode == 0, out
    assert "WARNING" not in out and "pip" not in out.lower(), out
    cache_lines = dict(re.findall(r"^  cache (a|b): (.*)$", out, re.M))
    landed = [n for names in cache_lines.values() for n in names.split(", ")]
    assert sorted(landed) == ["servers.%s.cpu" % h for h in
                              ("db01", "db02", "web01", "web02", "web03")], out
    assert cache_lines["a"] != "(none yet)" and cache_lines["b"] != "(none yet)"
    assert '"target": "sumSeries(servers.*.cpu)"' in out
    png = Path(re.search(r"^PNG of servers\.\*\.cpu: (.*)$", out, re.M).group(1))
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "http://127.0.0.1:8080/render?target=servers.*.cpu" in out
    assert "stopped graphite-render" in out and "carbon-cache.py --instance=a stop" in out
    wait_for(lambda: not pids_of(run), 60, what="the demo's daemons to exit")


def test_demo_no_wait_stops_within_seconds(tmp_path):
    """``tools/demo.sh --no-wait``: after its last line of results it stops the render app
    and the daemons at once (it used to wait 10 s on the render app it had not reaped)."""
    require_free_ports(RELAY_AND_CACHES)
    run = tmp_path / "demo-run"
    env = dict(os.environ, CARBON_DEMO_DIR=str(run), VENV=str(BIN.parent))
    proc = subprocess.Popen([str(ROOT / "tools" / "demo.sh"), "--seconds", "1", "--no-wait",
                             "--port", str(free_port())], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []
    shown = None
    try:
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("Self-metrics:"):   # the last line before stopping
                shown = time.monotonic()
        proc.wait(60)
        stopped = time.monotonic()
    finally:
        end_demo(proc, run)
    out = "".join(lines)
    assert proc.returncode == 0 and shown is not None, out
    assert "stopped graphite-render" in out and "carbon-cache.py --instance=a stop" in out, out
    assert stopped - shown < 5, "stopping took %.1f s:\n%s" % (stopped - shown, out)
    wait_for(lambda: not pids_of(run), 60, what="the demo's daemons to exit")


def readme_section(title: str) -> str:
    return (ROOT / "README.md").read_text().split("### " + title, 1)[1].split("\n### ", 1)[0]


def test_readme_says_what_the_manhole_and_amqp_need():
    manhole = readme_section("The manhole")
    assert "MANHOLE_HOST_KEY_DIR" in manhole and "ssh-keygen" in manhole
    assert re.search(r"`ssh -t -p 7222 \w+@127\.0\.0\.1`", manhole)
    amqp = readme_section("AMQP")
    assert "apt-get install rabbitmq-server" in amqp and "NODE_IP_ADDRESS=127.0.0.1" in amqp
    assert "inet_dist_use_interface {127,0,0,1}" in amqp
