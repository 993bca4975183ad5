"""carbon-cache.py start|stop|status on a daemonized process, as the reference behaves."""

from __future__ import annotations

import os
import time

from tests.support import CarbonInstance, port_open, wait_for


def test_start_status_stop_cycle(tmp_path):
    instance = CarbonInstance(tmp_path)
    pidfile = instance.storage / "carbon-cache-a.pid"
    status = instance.cli("status")
    assert status.returncode == 1
    assert status.stdout.strip() == "carbon-cache (instance a) is not running"

    started = instance.cli("start")
    assert started.returncode == 0, started.stderr
    assert "Starting carbon-cache (instance a)" in started.stdout
    wait_for(pidfile.exists, what="pidfile")
    pid = int(pidfile.read_text())
    try:
        assert port_open(instance.line_port)
        status = instance.cli("status")
        assert status.returncode == 0
        assert status.stdout.strip() == "carbon-cache (instance a) is running with pid %d" % pid
        again = instance.cli("start")
        assert again.returncode == 1
        assert "carbon-cache (instance a) is already running with pid %d" % pid in again.stdout
        log_dir = instance.storage / "log" / "carbon-cache" / "carbon-cache-a"
        wait_for(lambda: (log_dir / "console.log").exists(), what="console.log")
        assert "Using sorted write strategy for cache" in (log_dir / "console.log").read_text()
    finally:
        stopped = instance.cli("stop")
    assert stopped.returncode == 0
    assert stopped.stdout.strip() == "Sending kill signal to pid %d" % pid
    wait_for(lambda: not os.path.exists("/proc/%d" % pid), what="daemon exit")
    assert not pidfile.exists()
    stop_again = instance.cli("stop")
    assert stop_again.returncode == 0
    assert stop_again.stdout.strip() == "Pidfile %s does not exist" % pidfile


def test_stale_and_corrupt_pidfiles(tmp_path):
    instance = CarbonInstance(tmp_path)
    pidfile = instance.storage / "carbon-cache-a.pid"
    pidfile.parent.mkdir(parents=True, exist_ok=True)
    pidfile.write_text("999999")
    status = instance.cli("status")
    assert status.returncode == 1 and "is not running" in status.stdout
    pidfile.write_text("garbage")
    status = instance.cli("status")
    assert status.returncode == 1
    assert "Failed to parse pid from pidfile %s" % pidfile in status.stdout
    assert not pidfile.exists()
    pidfile.write_text("999999")
    started = instance.cli("start")
    try:
        assert started.returncode == 0, started.stderr
        assert "Removing stale pidfile %s" % pidfile in started.stdout
        wait_for(lambda: pidfile.exists() and pidfile.read_text() != "999999", what="new pid")
    finally:
        instance.cli("stop")
        wait_for(lambda: not pidfile.exists(), what="pidfile removed")


def test_start_fails_visibly_when_port_taken(tmp_path):
    import socket
    instance = CarbonInstance(tmp_path)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", instance.line_port))
        taken.listen(1)
        result = instance.cli("start")
    assert result.returncode == 1
    assert "could not start" in result.stderr
    time.sleep(0.2)
    assert not (instance.storage / "carbon-cache-a.pid").exists()


def test_bad_config_and_missing_schemas(tmp_path):
    instance = CarbonInstance(tmp_path)
    instance.write_conf("CACHE_WRITE_STRATEGY = fastest\n")
    result = instance.cli("--debug", "start")
    assert result.returncode == 1
    assert "CACHE_WRITE_STRATEGY" in result.stderr and "carbon.conf" in result.stderr
    instance.write_conf("MAX_CACHE_SIZE = huge\n")
    result = instance.cli("start")
    assert result.returncode == 1
    assert "line" in result.stderr and "MAX_CACHE_SIZE" in result.stderr
    instance.write_conf()
    (instance.conf / "storage-schemas.conf").unlink()
    result = instance.cli("start")
    assert result.returncode == 1
    assert result.stdout.strip() == "Error: missing required config %s" % (
        instance.conf / "storage-schemas.conf")


def test_invalid_action_and_usage(tmp_path):
    instance = CarbonInstance(tmp_path)
    result = instance.cli("restartify")
    assert result.returncode == 1
    assert result.stdout.splitlines()[-2:] == ["Invalid action 'restartify'",
                                               "Valid actions: start stop status"]
    usage = instance.cli()
    assert "Usage:" in usage.stdout
