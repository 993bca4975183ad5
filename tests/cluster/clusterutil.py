"""Helpers for tests that run a whole cluster of hosts on 127.0.0.N addresses."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from tests.support import free_port

ROOT = Path(__file__).parents[2]
PORT_KEYS = ("relay_line", "relay_pickle", "cache_line", "cache_pickle", "cache_query",
             "render", "agent")


def host_table(name: str, address: str) -> str:
    ports = ", ".join("%s = %d" % (key, free_port()) for key in PORT_KEYS)
    return '[hosts.%s]\naddress = "%s"\nports = { %s }\n' % (name, address, ports)


def free_ports_option() -> list[str]:
    out = []
    for key in PORT_KEYS:
        out += ["--port", "%s=%d" % (key, free_port())]
    return out


def cluster_file(folder: Path, hosts: dict[str, str], name: str = "cluster.toml",
                 extra: str = "") -> Path:
    text = "\n".join([
        "[cluster]", 'root = "data"', "[ring]", "replication_factor = 1",
        "[carbon]", "MAX_UPDATES_PER_SECOND = 100000", "CARBON_METRIC_INTERVAL = 0",
        "LOG_UPDATES = false", "SHUTDOWN_FLUSH_TIMEOUT = 5", extra, ""])
    text += "\n".join(host_table(n, a) for n, a in hosts.items())
    path = folder / name
    path.write_text(text)
    return path


def cli(*args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "carbon.cluster.cli", *map(str, args)],
                          env=env, capture_output=True, text=True, timeout=timeout)


def send_lines(address: tuple[str, int], lines: list[str], attempts: int = 200) -> None:
    """Deliver ``lines`` to a relay at least once: send, half-close, wait for the relay to
    close after reading everything; on any error (a relay restarting) send again."""
    data = "".join(lines).encode()
    for _ in range(attempts):
        try:
            with socket.create_connection(address, timeout=10) as sock:
                sock.sendall(data)
                sock.shutdown(socket.SHUT_WR)
                if sock.recv(1) == b"":
                    return
        except OSError:
            pass
        time.sleep(0.1)
    raise AssertionError("could not deliver %d lines to %s:%d" % (len(lines), *address))


def render(address: str, target: str, since: str = "-1d") -> dict[str, dict[int, float]]:
    """{series name: {timestamp: value}} of a render app's JSON answer (nulls left out)."""
    url = "http://%s/render?target=%s&format=json&from=%s" % (address, target, since)
    with urllib.request.urlopen(url, timeout=30) as reply:
        failed = reply.headers.get("X-Graphite-Failed-Hosts")
        assert not failed, "render app %s: failed hosts %s" % (address, failed)
        data = json.load(reply)
    return {s["target"]: {t: v for v, t in s["datapoints"] if v is not None} for s in data}
