"""What the units rely on, with the daemons as processes: ``--nodaemon --log-to=files``
writes carbon's log files (carbon 1.1.10's --nodaemon logs to stdout only, still our
default), and a daemon run by systemd (NOTIFY_SOCKET set) says READY=1 once it listens
and STOPPING=1 on SIGTERM (the units are ``Type=notify``)."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support import (CONF, ROOT, CarbonInstance, free_port, port_open, read_whisper,
                           send_tcp, wait_for)


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


def test_a_long_drain_reports_and_extends_the_stop_timeout(tmp_path, notify_socket):
    """300 metrics cached at stop, drained at 25 updates a second (~12 s): systemd hears
    how much is left and is asked for more time while the drain progresses."""
    cache = CarbonInstance(tmp_path, MAX_UPDATES_PER_SECOND=1,
                           MAX_UPDATES_PER_SECOND_ON_SHUTDOWN=25)
    now = int(time.time())
    names = ["drain.m%03d" % i for i in range(300)]
    try:
        cache.start_foreground()
        assert notify_socket.recv(256) == b"READY=1"
        send_tcp(cache.line_port, "".join("%s %d %d\n" % (name, i, now)
                                          for i, name in enumerate(names)).encode())
        wait_for(lambda: cache.output().count("creating database metric") == len(names),
                 30, what="every metric created (its point cached)")
        cache.proc.send_signal(signal.SIGTERM)
        said = []
        notify_socket.settimeout(0.5)
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            try:
                said.append(notify_socket.recv(256))
            except TimeoutError:
                if cache.proc.poll() is not None:
                    break
        assert cache.proc.wait(60) == 0
    finally:
        cache.kill()
    assert said[0] == b"STOPPING=1", said
    left = [int(m.group(1)) for m in re.finditer(rb"STATUS=Draining (\d+) datapoints",
                                                 b" ".join(said))]
    assert left and left[0] > 0, said
    assert b"EXTEND_TIMEOUT_USEC=60000000" in said, said
    minute = now // 60 * 60
    assert [read_whisper(cache.whisper_path(name), now - 120, now + 60) for name in names] \
        == [{minute: float(i)} for i in range(len(names))]
