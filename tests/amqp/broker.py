"""A private RabbitMQ broker for tests: loopback only, free ports, its own epmd and files."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

from tests.support import free_port

CANDIDATES = ("/usr/lib/rabbitmq/bin/rabbitmq-server",
              "/usr/lib/rabbitmq/sbin/rabbitmq-server")


def find_server() -> str | None:
    """The rabbitmq-server start script that runs the node in the foreground.

    Debian's /usr/sbin/rabbitmq-server wrapper switches to the rabbitmq user and
    system directories, so the script it wraps is preferred. RABBITMQ_SERVER overrides.
    """
    override = os.environ.get("RABBITMQ_SERVER")
    if override:
        return override
    for path in CANDIDATES:
        if os.access(path, os.X_OK):
            return path
    found = shutil.which("rabbitmq-server")
    return found if found and not found.startswith("/usr/sbin/") else None


def amqp_ready(port: int) -> bool:
    """True when the broker answers the AMQP protocol header with connection.start."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
            sock.sendall(b"AMQP\x00\x00\x09\x01")
            sock.settimeout(2)
            return sock.recv(7)[:3] == b"\x01\x00\x00"
    except OSError:
        return False


# The protocol header txamqp sends with carbon 1.1.10's amqp0-8.xml spec: AMQP 1 1 8 0.
AMQP_0_8_HEADER = b"AMQP\x01\x01\x08\x00"


def speaks_amqp_0_8(port: int) -> bool:
    """Whether the broker takes carbon 1.1.10's AMQP 0-8 (RabbitMQ 3.x does; 4.0, Debian
    13's, answers the 0-8 header with its own 0-9-1 header and closes: ``bad_version``)."""
    with socket.create_connection(("127.0.0.1", port), timeout=2) as sock:
        sock.sendall(AMQP_0_8_HEADER)
        sock.settimeout(5)
        answer = b""
        while len(answer) < 8:
            chunk = sock.recv(8 - len(answer))
            if not chunk:
                break
            answer += chunk
    if answer.startswith(b"AMQP"):
        return False
    if answer[:3] == b"\x01\x00\x00":  # connection.start on channel 0
        return True
    raise RuntimeError("unexpected answer to the AMQP 0-8 header: %r" % answer)


def _stop_group(proc: subprocess.Popen, timeout: float) -> None:
    """SIGTERM ``proc``, wait, then SIGKILL its process group (its own session)."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # leftovers: beam, erl_child_setup, inet_gethost
    except ProcessLookupError:
        pass
    if proc.poll() is None:
        proc.wait(10)


class Broker:
    """rabbitmq-server as rabbit_test_<pid>@localhost with state under ``base``."""

    def __init__(self, base: Path, server: str) -> None:
        self.base = base
        self.server = server
        self.port = free_port()
        self.dist_port = free_port()
        self.epmd_port = free_port()
        self.node = "rabbit_test_%d@localhost" % os.getpid()
        self.proc: subprocess.Popen | None = None
        self.epmd: subprocess.Popen | None = None
        for name in ("home", "mnesia", "log"):
            (base / name).mkdir(parents=True, exist_ok=True)
        (base / "enabled_plugins").write_text("[].\n")
        (base / "rabbitmq-env.conf").write_text("")
        self.env = dict(
            os.environ, HOME=str(base / "home"), RABBITMQ_NODENAME=self.node,
            RABBITMQ_NODE_IP_ADDRESS="127.0.0.1", RABBITMQ_NODE_PORT=str(self.port),
            RABBITMQ_DIST_PORT=str(self.dist_port), ERL_EPMD_PORT=str(self.epmd_port),
            ERL_EPMD_ADDRESS="127.0.0.1", RABBITMQ_MNESIA_BASE=str(base / "mnesia"),
            RABBITMQ_LOG_BASE=str(base / "log"),
            RABBITMQ_CONF_ENV_FILE=str(base / "rabbitmq-env.conf"),
            RABBITMQ_CONFIG_FILE=str(base / "rabbitmq"),
            RABBITMQ_ADVANCED_CONFIG_FILE=str(base / "advanced.config"),
            RABBITMQ_ENABLED_PLUGINS_FILE=str(base / "enabled_plugins"),
            RABBITMQ_PLUGINS_EXPAND_DIR=str(base / "plugins-expand"),
            RABBITMQ_PID_FILE=str(base / "rabbit.pid"),
            RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS=(
                "-start_epmd false -kernel inet_dist_use_interface {127,0,0,1}"))

    def log(self) -> str:
        path = self.base / "stdout.log"
        return path.read_text(errors="replace")[-3000:] if path.exists() else ""

    def start(self, timeout: float = 60.0) -> None:
        """Start epmd (once) and the node; return when it accepts AMQP."""
        if self.epmd is None:
            epmd = shutil.which("epmd") or "epmd"
            self.epmd = subprocess.Popen([epmd, "-port", str(self.epmd_port)], env=self.env,
                                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                         start_new_session=True)
        out = open(self.base / "stdout.log", "a")
        self.proc = subprocess.Popen([self.server], env=self.env, cwd=self.base, stdout=out,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     start_new_session=True)
        out.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("rabbitmq-server exited with %s:\n%s" % (
                    self.proc.returncode, self.log()))
            if amqp_ready(self.port):
                return
            time.sleep(0.2)
        raise RuntimeError("rabbitmq-server did not accept AMQP within %.0fs:\n%s" % (
            timeout, self.log()))

    def stop(self) -> None:
        """Stop the node (graceful SIGTERM, then SIGKILL of its process group)."""
        if self.proc is not None:
            _stop_group(self.proc, 30)
            self.proc = None

    def restart(self) -> None:
        self.stop()
        self.start()

    def close(self) -> None:
        """Stop the node and the epmd this broker started."""
        self.stop()
        if self.epmd is not None:
            _stop_group(self.epmd, 5)
            self.epmd = None
