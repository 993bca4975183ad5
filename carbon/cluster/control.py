"""Start, stop and report the processes of a cluster's hosts.

Per host, in start order: each carbon-cache instance, the relay (the front door), the
render app and the transfer agent. The carbon daemons daemonize themselves (pidfiles in
the host's storage folder, as carbon does); the render app and the agent are started in
their own session with a pidfile written here. Stop goes in reverse order (the relay
first, so it flushes to caches still running) and waits for each process to exit.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from carbon.cluster import netns
from carbon.cluster.generate import conf_dir, storage_dir
from carbon.cluster.spec import ClusterSpec, HostSpec


@dataclass(frozen=True)
class Process:
    """One process of a host: how to start it and where its pid is kept."""

    label: str  # e.g. cache:a, relay, render, agent
    pidfile: str
    port: tuple[str, int]  # a port it listens on once started
    carbon: tuple[str, str] | None = None  # (program, instance) of a carbon daemon
    command: tuple[str, ...] = ()  # for the others: the foreground command line


def host_processes(spec: ClusterSpec, host: HostSpec) -> list[Process]:
    """The processes of ``host`` in start order."""
    storage = storage_dir(spec, host)
    conf = conf_dir(spec, host)
    out = [Process("cache:%s" % c.instance, os.path.join(storage, "carbon-cache-%s.pid"
                                                         % c.instance),
                   (host.address, c.pickle_port), carbon=("carbon-cache", c.instance))
           for c in host.caches]
    out.append(Process("relay", os.path.join(storage, "carbon-relay-a.pid"),
                       (host.address, host.relay_pickle_port), carbon=("carbon-relay", "a")))
    settings = os.path.join(conf, "local_settings.py")
    out.append(Process("render", os.path.join(storage, "graphite-render.pid"),
                       (host.address, host.render_port), command=(
                           _script("graphite-render"), "--config", settings,
                           "--bind", host.address, "--port", str(host.render_port))))
    caches = []
    for cache in host.caches:
        caches += ["--carbonlink", "%s:%d:%s" % (host.address, cache.query_port, cache.instance)]
    out.append(Process("agent", os.path.join(storage, "carbon-cluster-agent.pid"),
                       (host.address, host.agent_port), command=(
                           sys.executable, "-m", "carbon.cluster.agent", "--storage-dir", storage,
                           "--conf-dir", conf, *caches, "--bind", host.address,
                           "--port", str(host.agent_port))))
    return out


def _script(name: str) -> str:
    """A console script installed next to this interpreter (else found on PATH)."""
    beside = os.path.join(os.path.dirname(sys.executable), name)
    return beside if os.path.exists(beside) else name


def _env(spec: ClusterSpec, host: HostSpec) -> dict[str, str]:
    env = dict(os.environ)
    env["GRAPHITE_ROOT"] = spec.host_dir(host)
    env["GRAPHITE_CONF_DIR"] = conf_dir(spec, host)
    env.pop("GRAPHITE_STORAGE_DIR", None)
    return env


def process_alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie, exited but not yet reaped by its parent, does
    not count: the render app and agent are children of whoever started them)."""
    try:
        with open("/proc/%d/stat" % pid, "rb") as handle:
            return handle.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except FileNotFoundError:
        return False
    except OSError:
        try:
            os.kill(pid, 0)
        except OSError:
            return False
        return True


def read_pid(pidfile: str) -> int | None:
    try:
        with open(pidfile) as handle:
            return int(handle.read().strip())
    except (OSError, ValueError):
        return None


def running_pid(process: Process) -> int | None:
    pid = read_pid(process.pidfile)
    return pid if pid is not None and process_alive(pid) else None


def listening(address: tuple[str, int], timeout: float = 0.3) -> bool:
    try:
        with socket.create_connection(address, timeout=timeout):
            return True
    except OSError:
        return False


def start_process(spec: ClusterSpec, host: HostSpec, process: Process,
                  timeout: float = 60.0) -> str:
    """Start ``process`` unless it runs; returns a one-line report. RuntimeError on failure."""
    pid = running_pid(process)
    if pid is not None:
        return "%s/%s already running (pid %d)" % (host.name, process.label, pid)
    prefix = netns.exec_prefix(spec, host)
    env = _env(spec, host)
    log_dir = os.path.join(storage_dir(spec, host), "log")
    os.makedirs(log_dir, exist_ok=True)
    if process.carbon is not None:
        program, instance = process.carbon
        command = [*prefix, sys.executable, "-m", "carbon.daemon", program, "--config",
                   os.path.join(conf_dir(spec, host), "carbon.conf"), "--instance", instance,
                   "start"]
        done = subprocess.run(command, env=env, capture_output=True, text=True,
                              timeout=timeout)
        if done.returncode != 0:
            raise RuntimeError("%s/%s did not start: %s" % (
                host.name, process.label, (done.stdout + done.stderr).strip()))
    else:
        out = open(os.path.join(log_dir, "%s.log" % process.label), "ab")
        proc = subprocess.Popen([*prefix, *process.command], env=env, stdout=out,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
        out.close()
        with open(process.pidfile + ".tmp", "w") as handle:
            handle.write("%d" % proc.pid)
        os.replace(process.pidfile + ".tmp", process.pidfile)
    deadline = time.monotonic() + timeout
    while not listening(process.port):
        pid = running_pid(process)
        if pid is None and process.carbon is None:
            raise RuntimeError("%s/%s exited at start; see %s" % (
                host.name, process.label, os.path.join(log_dir, process.label + ".log")))
        if time.monotonic() > deadline:
            raise RuntimeError("%s/%s is not listening on %s:%d after %.0f s" % (
                host.name, process.label, *process.port, timeout))
        time.sleep(0.05)
    return "%s/%s started (pid %s)" % (host.name, process.label, running_pid(process))


def stop_process(host: HostSpec, process: Process, timeout: float = 120.0) -> str:
    """SIGTERM ``process`` (by its pidfile) and wait for it to exit."""
    pid = running_pid(process)
    if pid is None:
        return "%s/%s not running" % (host.name, process.label)
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while process_alive(pid):
        _reap(pid)
        if time.monotonic() > deadline:
            raise RuntimeError("%s/%s (pid %d) still running %.0f s after SIGTERM" % (
                host.name, process.label, pid, timeout))
        time.sleep(0.05)
    if process.carbon is None:
        try:
            os.unlink(process.pidfile)
        except OSError:
            pass
    return "%s/%s stopped (pid %d)" % (host.name, process.label, pid)


def reload_render(spec: ClusterSpec, host_name: str) -> str:
    """SIGHUP the host's running render app so it re-reads CLUSTER_SERVERS without closing
    its port; starts it when it is not running. Returns a one-line report."""
    host = spec.host(host_name)
    process = next(p for p in host_processes(spec, host) if p.label == "render")
    pid = running_pid(process)
    if pid is None:
        return start_process(spec, host, process)
    os.kill(pid, signal.SIGHUP)
    return "%s/render reloaded (SIGHUP to pid %d)" % (host.name, pid)


def _reap(pid: int) -> None:
    """Collect a child we started ourselves (render app, agent) once it exits."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def select(spec: ClusterSpec, host_name: str | None) -> list[HostSpec]:
    return [spec.host(host_name)] if host_name else list(spec.hosts)


def start(spec: ClusterSpec, host_name: str | None = None, only: str | None = None,
          parallel: bool = False) -> list[str]:
    """Start every process of the chosen hosts (caches of all hosts first, then relays...);
    ``parallel``: all at once (a relay reconnects to a cache that listens later)."""
    hosts = select(spec, host_name)
    for host in hosts:
        netns.up(spec, host)
    if parallel:
        chosen = [(host, process) for host in hosts for process in host_processes(spec, host)
                  if only is None or process.label.split(":")[0] == only]
        with ThreadPoolExecutor(max(1, len(chosen))) as pool:
            return list(pool.map(lambda item: start_process(spec, *item), chosen))
    report = []
    for kind in ("cache", "relay", "render", "agent"):
        for host in hosts:
            for process in host_processes(spec, host):
                if process.label.split(":")[0] == kind and (only is None or only == kind):
                    report.append(start_process(spec, host, process))
    return report


def stop(spec: ClusterSpec, host_name: str | None = None, only: str | None = None) -> list[str]:
    """Stop the chosen hosts' processes: relays, then caches, render apps, agents."""
    hosts = select(spec, host_name)
    report = []
    for kind in ("relay", "cache", "render", "agent"):
        for host in hosts:
            for process in host_processes(spec, host):
                if process.label.split(":")[0] == kind and (only is None or only == kind):
                    report.append(stop_process(host, process))
    if only is None:
        for host in hosts:
            netns.down(spec, host)
    return report


def status(spec: ClusterSpec, host_name: str | None = None) -> tuple[list[str], bool]:
    """One line per process and whether all of them run and listen."""
    lines, healthy = [], True
    for host in select(spec, host_name):
        for process in host_processes(spec, host):
            pid = running_pid(process)
            up = pid is not None and listening(process.port)
            healthy = healthy and up
            lines.append("%-10s %-10s %-22s %s" % (
                host.name, process.label, "%s:%d" % process.port,
                "running (pid %d)" % pid if up else
                ("not listening (pid %d)" % pid if pid else "stopped")))
    return lines, healthy
