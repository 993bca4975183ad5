"""Faults on a running 3-host cluster under load, with counts.

Fault 5 lowers a running relay's open-file limit with prlimit (root or the relay's own
user). Bounded for CI; ``CLUSTER_FAULT_SECONDS`` (default 3) sets how long a fault lasts (the
issue's long form: 60) and ``CLUSTER_LOAD_METRICS`` (default 200) the metrics written
every half second. Fault 1 (a 4th host added under writes) is test_cluster.py.
"""

from __future__ import annotations

import os
import resource
import shutil
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

from carbon.cluster import control, netns
from carbon.carbonlink.client import cache_query_bulk
from carbon.cluster.rebalance import owners, ring
from carbon.cluster.spec import ClusterSpec, load_cluster
from tests.cluster.clusterutil import cli, cluster_file, render, send_lines

FAULT_SECONDS = float(os.environ.get("CLUSTER_FAULT_SECONDS", "3"))
METRICS = int(os.environ.get("CLUSTER_LOAD_METRICS", "200"))
STEP = 60


class Load:
    """Writers sending every metric once a round (a new minute each round) through the
    hosts' relays, at least once (a send is repeated until the relay has read it all)."""

    def __init__(self, spec: ClusterSpec, prefix: str, senders: int = 3) -> None:
        self.spec = spec
        self.names = ["%s.s%02d.m%04d" % (prefix, n % 10, n) for n in range(METRICS)]
        self.base = int(time.time()) // STEP * STEP - 1000 * STEP
        self.done = [0] * senders  # rounds each sender has delivered
        self.sent = 0
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._run, args=(k,)) for k in range(senders)]

    def lines(self, round_: int, part: int, parts: int) -> list[str]:
        ts = self.base + round_ * STEP
        return ["%s %d %d\n" % (n, round_, ts) for n in self.names[part::parts]]

    def _run(self, k: int) -> None:
        relays = list(self.spec.hosts)
        round_ = 0
        while not self.stop.is_set() and round_ < 900:
            relay = relays[(k + round_) % len(relays)]
            batch = self.lines(round_, k, len(self.threads))
            send_lines((relay.address, relay.relay_line_port), batch)
            self.sent += len(batch)
            round_ += 1
            self.done[k] = round_
            time.sleep(0.5)

    def __enter__(self) -> Load:
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join()

    def missing(self, timeout: float = 60) -> int:
        """Points sent but not readable through the render app of the first host."""
        expected: dict[str, set[int]] = {n: set() for n in self.names}
        for part, rounds in enumerate(self.done):
            for round_ in range(rounds):
                for line in self.lines(round_, part, len(self.threads)):
                    name, _, ts = line.split()
                    expected[name].add(int(ts))
        deadline = time.monotonic() + timeout
        prefix = self.names[0].split(".")[0]
        history: list[int] = []
        while True:
            got = render(self.spec.hosts[0].render_address, prefix + ".*.*")
            lost = sum(len(expected[n] - set(got.get(n, {}))) for n in self.names)
            history.append(lost)
            # done: nothing missing, or the count has not moved for 8 s (spools replayed)
            if lost == 0 or history[-9:] == [lost] * 9 or time.monotonic() > deadline:
                return lost
            time.sleep(1.0)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    folder = tmp_path_factory.mktemp("faults")
    path = cluster_file(folder, {"a": "127.0.0.6", "b": "127.0.0.7", "c": "127.0.0.8"},
                        extra="MAX_CACHE_SIZE = 200000\nCACHE_WRITE_STRATEGY = \"sorted\"")
    started = cli("start", path)
    assert started.returncode == 0, started.stdout + started.stderr
    try:
        yield load_cluster(str(path))
    finally:
        cli("stop", path)


def _held_in_cache(spec: ClusterSpec, host_name: str, names: list[str]) -> int:
    host = spec.host(host_name)
    router = ring(spec)
    mine = [n for n in names if owners(router, spec, n) == [host_name]]
    cache = host.caches[0]
    reply = cache_query_bulk((host.address, cache.query_port), mine)
    return sum(len(v) for v in reply.values())


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "sigkill"])
def test_cache_host_killed_then_restarted(cluster: ClusterSpec, sig: int, capsys) -> None:
    """Fault 2: a cache dies for FAULT_SECONDS; relays spool and replay after restart.
    SIGKILL: lost at most what the cache held in memory, plus what sat unread in its
    socket. SIGTERM drains the cache, but points the relay had already written into the
    cache's socket are lost when it exits (measured: up to one round; the relay's resend
    window is the fix), so both are bounded by one round here and the count printed."""
    victim = cluster.host("b")
    process = control.host_processes(cluster, victim)[0]
    with Load(cluster, "kill%s" % sig.name.lower()) as load:
        time.sleep(2.0)
        held = _held_in_cache(cluster, "b", load.names)
        os.kill(control.running_pid(process), sig)
        time.sleep(FAULT_SECONDS)
        restarted = cli("start", cluster.path, "--host", "b")
        assert restarted.returncode == 0, restarted.stdout + restarted.stderr
        time.sleep(2.0)
    lost = load.missing()
    with capsys.disabled():
        print("\nfault 2 (%s for %.0f s): %d points sent, %d lost, %d held in the cache's "
              "memory just before" % (sig.name, FAULT_SECONDS, load.sent, lost, held))
    assert min(load.done) >= 4
    assert 0 <= lost <= held + METRICS  # + one round in the socket at the stop


def _rss_kb(pid: int) -> int:
    with open("/proc/%d/status" % pid) as handle:
        for line in handle:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def test_relay_restart_under_reconnect_storm(cluster: ClusterSpec, tmp_path: Path,
                                             capsys) -> None:
    """Fault 4: the front-door relay restarts while 20 senders write; they all reconnect
    at once with a backlog. Nothing lost, the relay keeps running, memory stays bounded."""
    relay_host = cluster.host("a")
    relay = [p for p in control.host_processes(cluster, relay_host) if p.label == "relay"][0]
    address = (relay_host.address, relay_host.relay_line_port)
    senders, backlog = 20, 2000
    base = int(time.time()) // STEP * STEP - 500 * STEP
    names = ["storm.s%02d.m%03d" % (k, n) for k in range(senders) for n in range(50)]
    batches = [["storm.s%02d.m%03d %d %d\n" % (k, i % 50, i, base + (i // 50) * STEP)
                for i in range(backlog)] for k in range(senders)]
    stopped = control.stop_process(relay_host, relay)
    assert "stopped" in stopped
    attempts = 200 + int(FAULT_SECONDS * 20)  # a refused attempt takes ~0.1 s
    threads = [threading.Thread(target=send_lines, args=(address, batch, attempts))
               for batch in batches]
    for thread in threads:
        thread.start()  # every sender retries against the stopped relay
    time.sleep(FAULT_SECONDS)
    control.start_process(cluster, relay_host, relay)
    pid = control.running_pid(relay)
    peak = 0
    while any(t.is_alive() for t in threads):
        peak = max(peak, _rss_kb(pid))
        time.sleep(0.05)
    for thread in threads:
        thread.join()
    assert control.running_pid(relay) == pid  # absorbed, no restart needed
    expected = senders * backlog
    deadline = time.monotonic() + 60
    while True:
        got = render(relay_host.render_address, "storm.*.*")
        count = sum(len(v) for v in got.values())
        if count >= expected or time.monotonic() > deadline:
            break
        time.sleep(1.0)
    with capsys.disabled():
        print("\nfault 4: %d senders x %d lines after a %.0f s relay outage: %d of %d points "
              "stored, relay peak RSS %d MB" % (senders, backlog, FAULT_SECONDS, count,
                                                 expected, peak // 1024))
    assert count == expected and set(got) == set(names)
    assert peak < 400 * 1024


def _namespaces_work() -> bool:
    if not netns.available():
        return False
    probe = "carbon-probe-%d" % os.getpid()
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True).returncode == 0
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return made


def test_host_partitioned_then_healed(tmp_path: Path, capsys) -> None:
    """Fault 3: host b cut off (its veth down) for FAULT_SECONDS under load: 0 lost.
    Needs root and ``ip`` (iproute2, which tools/system-deps.sh installs: missing under
    CI is a failure); skipped only where this root cannot make namespaces (a container
    without CAP_SYS_ADMIN: a privilege, not a package)."""
    if os.environ.get("CI") == "true" and os.geteuid() == 0:
        assert shutil.which("ip"), "ip (iproute2) is missing: tools/system-deps.sh installs it"
    if not _namespaces_work():
        pytest.skip("network namespaces cannot be made here (need root, ip, CAP_SYS_ADMIN)")
    net = "10.%d.%d" % (100 + os.getpid() % 100, os.getpid() // 100 % 250)
    path = cluster_file(tmp_path, {"a": net + ".1", "b": net + ".2", "c": net + ".3"})
    text = path.read_text().replace('[cluster]\nroot = "data"',
                        '[cluster]\nroot = "data"\nnetns_prefix = "cf%d-"' % (os.getpid() % 1000))
    text = text.replace('address = "%s.' % net, 'netns = true\naddress = "%s.' % net)
    path.write_text(text)
    spec = load_cluster(str(path))
    assert all(h.netns for h in spec.hosts)
    started = cli("start", path)
    assert started.returncode == 0, started.stdout + started.stderr
    try:
        with Load(spec, "partition") as load:
            time.sleep(2.0)
            netns.cut(spec, spec.host("b"))
            time.sleep(FAULT_SECONDS)
            netns.heal(spec, spec.host("b"))
            time.sleep(2.0)
        lost = load.missing(timeout=90)
    finally:
        cli("stop", path)
    with capsys.disabled():
        print("\nfault 3 (host b partitioned %.0f s): %d points sent, %d lost"
              % (FAULT_SECONDS, load.sent, lost))
    assert min(load.done) >= 4 and lost == 0


def _cpu_seconds(pid: int) -> float:
    with open("/proc/%d/stat" % pid) as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _log_lines(spec: ClusterSpec, host_name: str, words: tuple[str, ...]) -> list[str]:
    folder = Path(spec.host_dir(host_name)) / "storage" / "log"
    out = []
    for path in folder.rglob("*.log"):
        if "relay" in str(path):
            out += [line for line in path.read_text(errors="replace").splitlines()
                    if any(word in line for word in words)]
    return out


def test_relay_at_its_descriptor_limit_under_load(cluster: ClusterSpec, capsys) -> None:
    """Fault 5: host a's relay runs out of descriptors (its soft limit lowered to what it
    has open plus 16, then 300 connections) for FAULT_SECONDS under load. It keeps
    serving a connection it had, logs the condition a few times (not a line per
    attempt), spends no CPU looping, and once the flood closes the senders' retries get
    through: 0 lost."""
    host = cluster.host("a")
    relay = [p for p in control.host_processes(cluster, host) if p.label == "relay"][0]
    pid = control.running_pid(relay)
    address = (host.address, host.relay_line_port)
    words = ("EMFILE", "cannot accept", "connections refused", "Too many open files")
    logged_before = len(_log_lines(cluster, "a", words))
    limits = resource.prlimit(pid, resource.RLIMIT_NOFILE)
    kept = socket.create_connection(address, timeout=10)
    flood: list[socket.socket] = []
    base = int(time.time()) // STEP * STEP - 300 * STEP
    try:
        with Load(cluster, "emfile") as load:
            time.sleep(2.0)
            opened = len(os.listdir("/proc/%d/fd" % pid))
            resource.prlimit(pid, resource.RLIMIT_NOFILE, (opened + 16, limits[1]))
            cpu = _cpu_seconds(pid)
            for _ in range(300):
                try:
                    flood.append(socket.create_connection(address, timeout=2))
                except OSError:
                    break
            kept.sendall("".join("emfile.kept.m%d %d %d\n" % (n, n, base)
                                 for n in range(50)).encode())
            time.sleep(FAULT_SECONDS)
            flooded_cpu = _cpu_seconds(pid) - cpu
            for sock in flood:
                sock.close()
            resource.prlimit(pid, resource.RLIMIT_NOFILE, limits)
            time.sleep(2.0)
        kept.shutdown(socket.SHUT_WR)
        kept.recv(1)
    finally:
        kept.close()
        for sock in flood:
            sock.close()
        resource.prlimit(pid, resource.RLIMIT_NOFILE, limits)
    lost = load.missing()
    got = render(host.render_address, "emfile.kept.*")
    logged = _log_lines(cluster, "a", words)[logged_before:]
    with capsys.disabled():
        print("\nfault 5 (relay at its descriptor limit %.0f s, %d flood connections made): "
              "%d points sent, %d lost; the kept connection's 50 points: %d stored; relay "
              "CPU %.2f s while flooded; %d log lines: %s" % (
                  FAULT_SECONDS, len(flood), load.sent, lost, len(got), flooded_cpu,
                  len(logged), logged[0][-150:] if logged else "-"))
    assert control.running_pid(relay) == pid  # no restart needed
    assert min(load.done) >= 4 and lost == 0
    assert len(got) == 50
    assert 1 <= len(logged) <= 2 + FAULT_SECONDS  # once, then at most once an interval
    assert flooded_cpu < 0.5 * FAULT_SECONDS  # no busy loop on accept()
