"""Fault: accept() out of descriptors (EMFILE). The connections that cannot be taken are
refused (closed at once, not left hanging), the process does not spin, one line per
interval counts it, and new connections are served once descriptors are free."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

from tests.faults.test_descriptor_limit import cache_cpu_seconds

SCRIPT = str(Path(__file__).with_name("acceptor.py"))


def greeted(sock: socket.socket) -> bool:
    sock.settimeout(3)
    try:
        return sock.recv(2) == b"ok"
    except OSError:
        return False


def test_accept_out_of_descriptors_refuses_and_recovers(tmp_path):
    out = open(tmp_path / "acceptor.log", "w+")
    proc = subprocess.Popen([sys.executable, SCRIPT], stdout=subprocess.PIPE, text=True)
    socks: list[socket.socket] = []
    try:
        line = proc.stdout.readline()
        assert line.startswith("PORT "), line
        port = int(line.split()[1])
        for _ in range(120):  # more than its 64 descriptors
            socks.append(socket.create_connection(("127.0.0.1", port), timeout=5))
        time.sleep(0.5)
        cpu = cache_cpu_seconds(proc.pid)
        time.sleep(2.0)
        assert cache_cpu_seconds(proc.pid) - cpu < 0.4  # not spinning
        served = sum(greeted(s) for s in socks)
        assert 0 < served < 64  # the others were closed, so their senders know
        for sock in socks:
            sock.close()
        socks.clear()
        time.sleep(0.5)
        # descriptors are free again: new connections are served
        for _ in range(20):
            socks.append(socket.create_connection(("127.0.0.1", port), timeout=5))
        assert sum(greeted(s) for s in socks) == 20
    finally:
        for sock in socks:
            sock.close()
        proc.kill()
        output = proc.stdout.read()
        proc.wait(10)
        out.close()
    lines = [line for line in output.splitlines() if "accept" in line]
    assert lines and "cannot accept (EMFILE)" in lines[0]
    assert len(lines) <= 4, lines  # one line per one-second interval, not per attempt
