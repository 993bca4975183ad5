"""ENABLE_MANHOLE: an SSH Python shell inside a running carbon-cache, reached with ssh."""

from __future__ import annotations

import os
import shutil
import subprocess
import time

import pytest

from tests.support import CarbonInstance, free_port, port_open, send_tcp, wait_for


def keygen(path) -> None:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "", "-f", str(path)],
                   check=True, stdin=subprocess.DEVNULL)


@pytest.fixture
def ssh() -> str:
    found = shutil.which("ssh")
    if found is None or shutil.which("ssh-keygen") is None:
        pytest.fail("ssh and ssh-keygen are needed (tools/system-deps.sh installs "
                    "openssh-client)")
    return found


def shell(ssh: str, port: int, key, lines: list[bytes], expect: bytes,
          timeout: float = 30) -> bytes:
    """Log in, type ``lines``, return the output once ``expect`` is in it."""
    proc = subprocess.Popen(
        [ssh, "-tt", "-p", str(port), "-i", str(key), "-o", "StrictHostKeyChecking=no",
         "-o", "UserKnownHostsFile=/dev/null", "-o", "BatchMode=yes", "-o",
         "IdentitiesOnly=yes", "-o", "LogLevel=ERROR", "admin@127.0.0.1"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    os.set_blocking(proc.stdout.fileno(), False)
    out = b""
    try:
        time.sleep(0.5)
        try:
            for line in lines:
                proc.stdin.write(line + b"\r")
                proc.stdin.flush()
        except BrokenPipeError:  # ssh gave up (refused): its output says why
            pass
        deadline = time.monotonic() + timeout
        while expect not in out and time.monotonic() < deadline and proc.poll() is None:
            chunk = proc.stdout.read(65536)
            out += chunk or b""
            time.sleep(0.05)
        return out + (proc.stdout.read(65536) or b"")
    finally:
        proc.kill()
        proc.wait(10)


def test_manhole_shell_sees_the_running_daemon(tmp_path, ssh):
    keys = tmp_path / "keys"
    keys.mkdir()
    keygen(keys / "ssh_host_ed25519_key")
    keygen(tmp_path / "client")
    manhole_port = free_port()
    instance = CarbonInstance(tmp_path / "root", ENABLE_MANHOLE=True, MANHOLE_USER="admin",
                              MANHOLE_PORT=manhole_port, MANHOLE_HOST_KEY_DIR=str(keys),
                              MANHOLE_PUBLIC_KEY=(tmp_path / "client.pub").read_text().strip())
    instance.start_foreground()
    try:
        wait_for(lambda: port_open(manhole_port), what="the manhole to listen")
        send_tcp(instance.line_port, b"manhole.check 7 %d\n" % int(time.time()))
        out = shell(ssh, manhole_port, tmp_path / "client",
                    [b"print('port', settings.MANHOLE_PORT, 'x', 6 * 7)"],
                    b"x 42")
        assert ("port %d x 42" % manhole_port).encode() in out, out
        # input that ends (a script piped to ssh) closes the session without a traceback
        subprocess.run([ssh, "-tt", "-p", str(manhole_port), "-i", str(tmp_path / "client"),
                        "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
                        "-o", "BatchMode=yes", "-o", "LogLevel=ERROR", "admin@127.0.0.1"],
                       input=b"1 + 1\r", capture_output=True, timeout=30)
        time.sleep(0.5)
        assert "WARNING" not in instance.output() and "Traceback" not in instance.output()
        # a key the manhole does not know is refused
        keygen(tmp_path / "stranger")
        refused = shell(ssh, manhole_port, tmp_path / "stranger", [b"print(6 * 7)"], b"42", 10)
        assert b"42" not in refused and b"ermission denied" in refused, refused
    finally:
        instance.terminate()


def test_manhole_without_host_keys_stops_start_up_naming_the_key(tmp_path):
    instance = CarbonInstance(tmp_path, ENABLE_MANHOLE=True, MANHOLE_USER="admin",
                              MANHOLE_PORT=free_port(), MANHOLE_HOST_KEY_DIR=str(tmp_path),
                              MANHOLE_PUBLIC_KEY="None")
    result = instance.cli("start")
    assert result.returncode == 1
    assert "MANHOLE_HOST_KEY_DIR" in result.stderr and "ssh_host_" in result.stderr
