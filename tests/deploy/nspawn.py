"""A booted systemd in a container made from Debian's packages, for the deploy tests.

``bookworm_tree()`` debootstraps Debian 12 with systemd and Python once and keeps it under
~/.cache/carbon-fast/nspawn-bookworm (built in a sibling folder and renamed into place, so
an interrupted build leaves nothing that looks finished). ``Booted`` boots a throwaway copy
with ``systemd-nspawn -b`` (sharing the host network) and runs commands inside with
``nsenter`` into the container's systemd (machinectl cannot connect on these machines).
The mirror is read from the host's apt sources at run time.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from tests.deploy.debian import install_missing, mirror

CACHE = Path.home() / ".cache" / "carbon-fast"
TREE = CACHE / "nspawn-bookworm"
# procps: /bin/kill for ExecReload; python3-venv: a venv with pip for the package
PACKAGES = ("systemd", "systemd-sysv", "dbus", "python3", "python3-venv", "procps")
MARKER = ".carbon-fast-tree"
HOST_TOOLS = {"systemd-nspawn": "systemd-container", "debootstrap": "debootstrap",
              "nsenter": "util-linux", "systemd-analyze": "systemd"}


def ensure_host_tools() -> None:
    """Install systemd-nspawn and debootstrap from Debian's packages when missing (root)."""
    install_missing(HOST_TOOLS)


def bookworm_tree() -> Path:
    """The cached Debian 12 tree with systemd and python3 (built on first use, ~2 min)."""
    wanted = " ".join(PACKAGES)
    marker = TREE / MARKER
    if marker.exists() and marker.read_text().strip() == wanted:
        return TREE
    ensure_host_tools()
    CACHE.mkdir(parents=True, exist_ok=True)
    building = Path(tempfile.mkdtemp(prefix="nspawn-bookworm.building-", dir=CACHE))
    building.chmod(0o755)   # the container's / (mkdtemp makes it 0700)
    try:
        subprocess.run(["debootstrap", "--variant=minbase", "--include=" + ",".join(PACKAGES),
                        "bookworm", str(building), mirror("bookworm")], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        # the container's own name resolution and a root without a password prompt
        (building / "etc" / "hostname").write_text("carbon-fast-test\n")
        (building / MARKER).write_text(wanted + "\n")
        if TREE.exists():
            old = Path(tempfile.mkdtemp(prefix="nspawn-bookworm.old-", dir=CACHE))
            TREE.rename(old / "tree")
            shutil.rmtree(old)
        building.rename(TREE)
    except BaseException:
        shutil.rmtree(building, ignore_errors=True)
        raise
    return TREE


def _children(pid: int) -> list[int]:
    try:
        text = Path("/proc/%d/task/%d/children" % (pid, pid)).read_text()
    except OSError:
        return []
    return [int(p) for p in text.split()]


class Booted:
    """A throwaway copy of ``tree`` booted with systemd-nspawn; ``run`` executes inside."""

    def __init__(self, tree: Path, workdir: Path, binds_ro: dict[str, str] | None = None):
        self.tree = tree
        self.root = workdir / "root"
        self.binds_ro = binds_ro or {}
        self.log_path = workdir / "nspawn.log"
        self.proc: subprocess.Popen | None = None
        self.systemd_pid = 0

    def __enter__(self) -> Booted:
        subprocess.run(["cp", "-a", "--reflink=auto", str(self.tree), str(self.root)],
                       check=True)
        args = ["systemd-nspawn", "-D", str(self.root), "-b", "--register=no", "--keep-unit",
                "--console=passive", "--quiet"]
        for source, target in self.binds_ro.items():
            args.append("--bind-ro=%s:%s" % (source, target))
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            self._wait_booted()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def _wait_booted(self, timeout: float = 90) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise AssertionError("systemd-nspawn exited %s:\n%s" % (
                    self.proc.returncode, self.log_path.read_text(errors="replace")))
            for child in _children(self.proc.pid):
                try:
                    comm = Path("/proc/%d/comm" % child).read_text().strip()
                except OSError:
                    continue
                if comm == "systemd":
                    self.systemd_pid = child
            if self.systemd_pid:
                state = self.run(["systemctl", "is-system-running"], check=False).stdout
                if state.strip() in ("running", "degraded"):
                    return
            time.sleep(0.5)
        raise AssertionError("the container did not finish booting in %ds:\n%s" % (
            timeout, self.log_path.read_text(errors="replace")))

    def run(self, argv: list[str], check: bool = True, timeout: float = 300,
            input: str | None = None) -> subprocess.CompletedProcess:
        """Run ``argv`` inside the container (its mount, pid, net ... namespaces)."""
        assert self.systemd_pid, "not booted"
        command = ["nsenter", "-t", str(self.systemd_pid), "-m", "-u", "-i", "-p", "-n", "-C",
                   "--", *argv]
        result = subprocess.run(command, capture_output=True, text=True, timeout=timeout,
                                input=input, stdin=None if input is not None
                                else subprocess.DEVNULL,
                                env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"})
        if check and result.returncode != 0:
            raise AssertionError("%s exited %d:\n%s%s" % (" ".join(argv), result.returncode,
                                                          result.stdout, result.stderr))
        return result

    def sh(self, script: str, check: bool = True, timeout: float = 300) -> str:
        return self.run(["sh", "-euc", script], check=check, timeout=timeout).stdout

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None and self.proc.poll() is None:
            if self.systemd_pid:
                self.run(["systemctl", "poweroff"], check=False, timeout=30)
            else:   # nspawn asks the container's init to power off
                os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=30)
        shutil.rmtree(self.root, ignore_errors=True)


if __name__ == "__main__":  # build the cached tree: python -m tests.deploy.nspawn
    print(bookworm_tree())
