"""A Debian docker.io engine started for one test, and everything it leaves cleaned up.

dockerd runs with its own socket, exec-root and pidfile (nothing of a system docker is
touched) and a data-root cached under ~/.cache/carbon-fast/container/docker, so the base
image, the build cache and the last image survive for the next run. Registries are not
reachable here: ``debian:bookworm-slim`` is made from Debian's packages with debootstrap
(tarball cached beside it) and ``docker import``.

The host's network is left as it was: dockerd runs without its iptables rules, without
touching ip_forward and without the docker0 bridge (``--iptables=false --ip-forward=false
--bridge=none``; otherwise it leaves nft tables and a FORWARD policy of DROP behind). So a
build's RUN steps use the host's network (``--network host``) to reach Debian's archive
and PyPI; containers talk over a user-defined bridge (names resolve through Docker's DNS)
and published ports on 127.0.0.1 go through docker-proxy.

On stop: every container, network and volume is removed, dockerd is ended by its PID (and
waited for), and what it could still leave is removed: the mounts under its exec-root (the
network namespaces), and the nft tables ``ip nat`` / ``ip filter`` and the docker0 link if
they appeared while it ran.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Optional, Sequence

from tests.deploy.debian import install_missing, mirror

CACHE = Path.home() / ".cache" / "carbon-fast" / "container"
DOCKER = "/usr/bin/docker"  # Debian's client, with BuildKit (/usr/local/bin/docker has no buildx)
BASE_TAG = "debian:bookworm-slim"
SUITE = "bookworm"
NFT_TABLES = (("ip", "nat"), ("ip", "filter"))


def ensure_tools() -> None:
    install_missing({"/usr/bin/docker": "docker.io", "/usr/bin/docker-compose": "docker-compose",
                     "/usr/sbin/debootstrap": "debootstrap", "/usr/sbin/nft": "nftables"})


def base_tarball() -> Path:
    """A debootstrap --variant=minbase tree of bookworm as a tarball, made once and cached.

    The apt caches are emptied, as in Debian's own slim image."""
    tarball = CACHE / ("%s-minbase.tar.gz" % SUITE)
    if tarball.exists():
        return tarball
    CACHE.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=CACHE, prefix="rootfs-") as tmp:
        root = Path(tmp) / "rootfs"
        log = Path(tmp) / "debootstrap.log"
        with open(log, "w") as out:
            done = subprocess.run(["debootstrap", "--variant=minbase", SUITE, str(root),
                                   mirror(SUITE)], stdout=out, stderr=subprocess.STDOUT,
                                  timeout=1200)
        if done.returncode != 0:
            raise RuntimeError("debootstrap failed: %s" % log.read_text()[-2000:])
        for folder in ("var/cache/apt/archives", "var/lib/apt/lists"):
            for entry in (root / folder).glob("*"):
                if entry.is_file():
                    entry.unlink()
        partial = tarball.with_suffix(".partial")
        subprocess.run(["tar", "-C", str(root), "--numeric-owner", "-czf", str(partial), "."],
                       check=True, timeout=600)
        partial.rename(tarball)
    return tarball


def _nft_tables() -> set[tuple[str, str]]:
    out = subprocess.run(["nft", "list", "tables"], capture_output=True, text=True)
    tables = set()
    for line in out.stdout.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0] == "table":
            tables.add((parts[1], parts[2]))
    return tables


def _link_exists(name: str) -> bool:
    return os.path.exists("/sys/class/net/%s" % name)


class DockerEngine:
    """dockerd for one test: ``with DockerEngine() as engine: engine.docker("ps")``."""

    def __init__(self, data_root: Path = CACHE / "docker") -> None:
        self.data_root = data_root
        self.run_dir = Path(tempfile.mkdtemp(prefix="cf-docker-", dir="/run"))
        self.socket = self.run_dir / "docker.sock"
        self.exec_root = self.run_dir / "exec"
        self.log_path = self.run_dir / "dockerd.log"
        self.proc: Optional[subprocess.Popen] = None
        self.env = dict(os.environ, DOCKER_HOST="unix://%s" % self.socket, DOCKER_BUILDKIT="1")
        self.env.pop("DOCKER_CONTEXT", None)
        self.tables_before: set[tuple[str, str]] = set()
        self.docker0_before = True

    # --- lifecycle ------------------------------------------------------------------------
    def __enter__(self) -> DockerEngine:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        ensure_tools()
        self.tables_before = _nft_tables()
        self.docker0_before = _link_exists("docker0")
        self.data_root.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            ["dockerd", "--data-root", str(self.data_root), "--exec-root", str(self.exec_root),
             "--host", "unix://%s" % self.socket, "--pidfile", str(self.run_dir / "dockerd.pid"),
             "--iptables=false", "--ip-forward=false", "--bridge=none"],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("dockerd exited: %s" % self.log_path.read_text()[-3000:])
            if self.socket.exists() and self.docker("version", check=False).returncode == 0:
                return
            time.sleep(0.3)
        raise RuntimeError("dockerd not ready in 60 s: %s" % self.log_path.read_text()[-3000:])

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            # the data-root is this test's own: every container, network and volume in it
            # is one a test made (compose's too), and none is kept for the next run
            ids = self.text("ps", "-aq", check=False).split()
            if ids:
                self.docker("rm", "-f", "-v", *ids, check=False)
            self.docker("network", "prune", "-f", check=False)
            self.docker("volume", "prune", "-f", check=False)
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=30)
        for family, table in NFT_TABLES:
            if (family, table) not in self.tables_before and (family, table) in _nft_tables():
                subprocess.run(["nft", "delete", "table", family, table], check=False)
        if not self.docker0_before and _link_exists("docker0"):
            subprocess.run(["ip", "link", "delete", "docker0"], check=False)
        self._unmount_under(self.exec_root)
        shutil.rmtree(self.run_dir, ignore_errors=True)

    @staticmethod
    def _unmount_under(root: Path) -> None:
        prefix = str(root) + "/"
        with open("/proc/self/mounts") as mounts:
            points = [line.split()[1] for line in mounts]
        for point in sorted((p for p in points if p.startswith(prefix) or p == str(root)),
                            key=len, reverse=True):
            subprocess.run(["umount", "-l", point], check=False)

    # --- docker ---------------------------------------------------------------------------
    def docker(self, *args: str, check: bool = True, timeout: float = 120,
               input: Optional[bytes] = None) -> subprocess.CompletedProcess:
        done = subprocess.run([DOCKER, *args], env=self.env, capture_output=True,
                              timeout=timeout, input=input)
        if check and done.returncode != 0:
            raise AssertionError("docker %s failed (%d): %s" % (
                " ".join(args), done.returncode,
                (done.stderr or done.stdout).decode("utf-8", "replace")[-3000:]))
        return done

    def text(self, *args: str, **kwargs: object) -> str:
        return self.docker(*args, **kwargs).stdout.decode("utf-8", "replace").strip()

    def compose(self, project: str, *args: str, env: Optional[dict] = None,
                timeout: float = 300) -> subprocess.CompletedProcess:
        """Debian's docker-compose (1.29) on this engine, for project ``project``."""
        done = subprocess.run(["docker-compose", "-p", project, *args],
                              env=dict(self.env, **(env or {})), capture_output=True,
                              timeout=timeout)
        if done.returncode != 0:
            raise AssertionError("docker-compose %s failed (%d): %s" % (
                " ".join(args), done.returncode,
                (done.stderr + done.stdout).decode("utf-8", "replace")[-3000:]))
        return done

    def ensure_base_image(self) -> None:
        if self.docker("image", "inspect", BASE_TAG, check=False).returncode == 0:
            return
        with open(base_tarball(), "rb") as tar:
            done = subprocess.run([DOCKER, "import", "-", BASE_TAG], env=self.env, stdin=tar,
                                  capture_output=True, timeout=600)
        if done.returncode != 0:
            raise AssertionError("docker import failed: %s" % done.stderr.decode()[-2000:])

    def build(self, context: Path, tag: str, ca_bundle: str, timeout: float = 1500) -> str:
        """Build ``context``'s Dockerfile with BuildKit; the build's output (plain)."""
        args = ["build", "--progress=plain", "--network", "host", "-t", tag]
        if os.path.exists(ca_bundle):
            args += ["--secret", "id=ca,src=%s" % ca_bundle]
        done = self.docker(*args, str(context), timeout=timeout)
        # keep the cached data-root bounded: old images of this tag, old build cache
        self.docker("image", "prune", "-f", check=False)
        self.docker("builder", "prune", "-f", "--keep-storage", "3gb", check=False)
        return (done.stderr + done.stdout).decode("utf-8", "replace")

    def network(self, name: str) -> str:
        self.docker("network", "rm", name, check=False)  # left by a killed run
        self.docker("network", "create", name)
        return name

    def run(self, name: str, *args: str) -> str:
        """``docker run -d --name NAME ARGS``; the container is removed on stop."""
        self.docker("rm", "-f", "-v", name, check=False)
        return self.text("run", "-d", "--name", name, *args)

    def inspect(self, name: str, template: str) -> str:
        return self.text("inspect", "-f", template, name)

    def logs(self, name: str) -> str:
        done = self.docker("logs", name, check=False)
        return (done.stdout + done.stderr).decode("utf-8", "replace")

    def run_output(self, args: Sequence[str], timeout: float = 120) -> str:
        return self.text("run", "--rm", *args, timeout=timeout)
