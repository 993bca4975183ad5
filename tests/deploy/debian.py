"""Debian's archive and packages for the deploy tests: the mirror this machine's apt uses
(read at run time, never written down) and package installs that start no service."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Mapping


def mirror(suite: str = "bookworm") -> str:
    """The archive URI the host's apt uses for ``suite`` (deb822 or one-line sources)."""
    sources = Path("/etc/apt/sources.list.d/debian.sources")
    if sources.exists():
        for stanza in sources.read_text().split("\n\n"):
            fields = {}
            for line in stanza.splitlines():
                if ":" in line and not line.startswith("#"):
                    key, _, value = line.partition(":")
                    fields[key.strip().lower()] = value.strip()
            if suite in fields.get("suites", "").split() and fields.get("uris"):
                return fields["uris"].split()[0]
    listing = Path("/etc/apt/sources.list")
    if listing.exists():
        for line in listing.read_text().splitlines():
            parts = [part for part in line.split() if not part.startswith("[")]
            if len(parts) >= 3 and parts[0] == "deb" and parts[2] == suite:
                return parts[1]
    raise RuntimeError("no Debian %s mirror in the host's apt sources" % suite)


def apt_install(*packages: str) -> None:
    """Install Debian packages (as root), not letting their scripts start services."""
    policy = Path("/usr/sbin/policy-rc.d")
    created = not policy.exists()
    if created:
        policy.write_text("#!/bin/sh\nexit 101\n")
        policy.chmod(0o755)
    try:
        lock = ["-o", "DPkg::Lock::Timeout=900"]
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        subprocess.run(["apt-get", *lock, "update", "-qq"], check=True, env=env,
                       stdout=subprocess.DEVNULL, timeout=900)
        subprocess.run(["apt-get", *lock, "install", "-y", "-qq", "--no-install-recommends",
                        *packages], check=True, env=env, stdout=subprocess.DEVNULL,
                       timeout=900)
    finally:
        if created:
            policy.unlink()


def install_missing(tools: Mapping[str, str]) -> None:
    """``tools`` maps a command (a name on PATH or an absolute path) to the package that
    brings it; the packages of the missing ones are installed."""
    missing = sorted({package for tool, package in tools.items()
                      if not (os.path.exists(tool) if os.sep in tool else shutil.which(tool))})
    if missing:
        apt_install(*missing)
