"""What the units rely on, with the daemons as processes: ``--nodaemon --log-to=files``
writes carbon's log files (carbon 1.1.10's --nodaemon logs to stdout only, still our
default), and a daemon run by systemd (NOTIFY_SOCKET set) says READY=1 once it listens
and STOPPING=1 on SIGTERM (the units are ``Type=notify``)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import CONF, ROOT, CarbonInstance, free_port, port_open, wait_for


@pytest.fixture
def notify_socket(tmp_path, monkeypatch):
    path = str(tmp_path / "notify")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(path)
    sock.settimeout(30)
    monkeypatch.setenv("NOTIFY_SOCKET", path)
    yield sock
    sock.close()


def test_nodaemon_log_to_files_and_readiness(tmp_path, notify_socket):
    cache = CarbonInstance(tmp_path)
    try:
        cache.start_foreground("--log-to=files")
        assert notify_socket.recv(256) == b"READY=1"
        console = cache.storage / "log/carbon-cache/carbon-cache-a/console.log"
        wait_for(lambda: console.exists() and "carbon-cache (instance a) started"
                 in console.read_text(), what="console.log's start line")
        assert cache.terminate() == 0
        assert notify_socket.recv(256) == b"STOPPING=1"
    finally:
        cache.kill()
    assert "[console]" not in cache.output()
    assert "Draining 0 datapoints" in console.read_text()


def test_nodaemon_logs_to_stdout_by_default(tmp_path):
    cache = CarbonInstance(tmp_path)
    try:
        cache.start_foreground()
        wait_for(lambda: "[console] carbon-cache (instance a) started" in cache.output(),
                 what="the start line on stdout")
        assert cache.terminate() == 0
    finally:
        cache.kill()
    assert not (cache.storage / "log").exists()


def test_render_app_says_ready(tmp_path, notify_socket):
    port = free_port()
    env = dict(os.environ, GRAPHITE_ROOT=str(tmp_path), PYTHONPATH=str(ROOT))
    with open(tmp_path / "render.out", "w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "webapp.server", "--config",
                                 str(CONF / "local_settings.py"), "--port", str(port)],
                                env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        assert notify_socket.recv(256) == b"READY=1"
        assert port_open(port)
    finally:
        proc.terminate()
        proc.wait(30)
    assert "listening on" in Path(tmp_path / "render.out").read_text()
