"""The distribution layout and the steps that install carbon-fast as systemd services.

The layout is Debian's graphite-carbon/graphite-web one: carbon's config in /etc/carbon,
the render app's local_settings.py in /etc/graphite, whisper under
/var/lib/graphite/whisper, logs under /var/log/carbon, pid files in /run/carbon, and the
``_graphite`` system user. The daemons get there the way carbon reads paths: the units set
GRAPHITE_CONF_DIR (and GRAPHITE_STORAGE_DIR, for sections that set no STORAGE_DIR), and
the installed carbon.conf sets STORAGE_DIR, LOG_DIR and PID_DIR in each daemon's section
(LOCAL_DATA_DIR follows from STORAGE_DIR).

``plan(layout)`` lists the steps; each is idempotent (a file already as wanted is left
alone; an existing config file is never overwritten) and knows how to say what it would
do (``--dry-run``) and how to do it under ``layout.root`` (``--root``, for packaging and
tests: nothing outside it is touched and no running systemd is asked).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

UNIT_SOURCE = Path(__file__).resolve().parent / "systemd"
UNITS = ("carbon-cache@.service", "carbon-relay@.service", "carbon-aggregator@.service",
         "carbon-aggregator-cache@.service", "graphite-render.service", "carbon.target")
# What the shipped conf/ runs together (conf/carbon.conf: relay -> caches a and b, the
# render app reading both), enabled into carbon.target unless --enable says otherwise.
DEFAULT_ENABLED = ("carbon-cache@a.service", "carbon-cache@b.service",
                   "carbon-relay@a.service", "graphite-render.service")
CARBON_SECTIONS = ("cache", "relay", "aggregator", "aggregator-cache")
CONF_FILES = ("carbon.conf", "storage-schemas.conf", "storage-aggregation.conf",
              "relay-rules.conf", "aggregation-rules.conf", "rewrite-rules.conf",
              "whitelist.conf", "blacklist.conf")
NAME = "carbon-fast"
PLACEHOLDER = re.compile(r"@([A-Z_]+)@")


@dataclass
class Layout:
    root: str = "/"
    conf_dir: str = "/etc/carbon"
    render_settings: str = "/etc/graphite/local_settings.py"
    storage_dir: str = "/var/lib/graphite"
    log_dir: str = "/var/log/carbon"
    pid_dir: str = "/run/carbon"
    user: str = "_graphite"
    group: str = "_graphite"
    bindir: str = field(default_factory=lambda: sysconfig.get_path("scripts"))
    unit_dir: str = "/etc/systemd/system"
    enable: tuple[str, ...] = DEFAULT_ENABLED

    @property
    def whisper_dir(self) -> str:
        return os.path.join(self.storage_dir, "whisper")

    def host(self, path: str) -> Path:
        """Where ``path`` of the installed system is on this machine (under --root)."""
        return Path(self.root) / path.lstrip("/")

    def values(self) -> dict[str, str]:
        """The placeholders of the unit templates."""
        if os.path.dirname(self.pid_dir) != "/run":
            raise ValueError("the pid folder must be directly under /run (systemd's "
                             "RuntimeDirectory=): %s" % self.pid_dir)
        return {"USER": self.user, "GROUP": self.group, "BINDIR": self.bindir,
                "CONF_DIR": self.conf_dir, "RENDER_SETTINGS": self.render_settings,
                "STORAGE_DIR": self.storage_dir,
                "RUNTIME_DIRECTORY": os.path.basename(self.pid_dir),
                "WRITABLE": " ".join((self.storage_dir, self.log_dir))}


def fill(template: str, values: dict[str, str]) -> str:
    def one(match: re.Match) -> str:
        if match.group(1) not in values:
            raise KeyError("unknown placeholder @%s@" % match.group(1))
        return values[match.group(1)]
    return PLACEHOLDER.sub(one, template)


def unit_text(name: str, layout: Layout) -> str:
    """Unit ``name`` as installed for ``layout``."""
    values = layout.values()
    values["HARDENING"] = fill((UNIT_SOURCE / "hardening.conf").read_text(), values).rstrip()
    return fill((UNIT_SOURCE / name).read_text(), values)


def shipped_conf_dir() -> Path:
    """The shipped conf/: installed with the package (share/carbon-fast/conf), or the
    checkout's when run from one."""
    for candidate in (Path(sys.prefix) / "share" / NAME / "conf",
                      Path(__file__).resolve().parents[2] / "conf"):
        if (candidate / "carbon.conf").is_file():
            return candidate
    raise FileNotFoundError("the shipped conf/ was not found (looked in %s/share/%s/conf "
                            "and next to the package)" % (sys.prefix, NAME))


def carbon_conf_text(shipped: str, layout: Layout) -> str:
    """The shipped carbon.conf with the layout's paths set in each daemon's section."""
    keys = ["# the distribution layout (carbon-fast install-layout)",
            "STORAGE_DIR = %s" % layout.storage_dir,
            "LOG_DIR = %s" % layout.log_dir,
            "PID_DIR = %s" % layout.pid_dir]
    out = []
    for line in shipped.splitlines():
        out.append(line)
        match = re.match(r"^\[([^\]:]+)\]\s*$", line)
        if match and match.group(1) in CARBON_SECTIONS:
            out.extend(keys)
    return "\n".join(out) + "\n"


def render_settings_text(shipped: str, layout: Layout) -> str:
    """The shipped local_settings.py reading the layout's storage."""
    return shipped.rstrip("\n") + "\n\n# the distribution layout (carbon-fast install-layout)\n" \
        "STORAGE_DIR = %r\nWHISPER_DIR = %r\n" % (layout.storage_dir, layout.whisper_dir)


def sysusers_text(layout: Layout) -> str:
    group = "" if layout.group == layout.user else "g %s -\n" % layout.group
    member = "" if layout.group == layout.user else "m %s %s\n" % (layout.user, layout.group)
    return ("# carbon-fast's system user (written by carbon-fast install-layout)\n%s"
            "u %s - \"Graphite (carbon-fast)\" %s /usr/sbin/nologin\n%s"
            % (group, layout.user, layout.storage_dir, member))


def tmpfiles_text(layout: Layout) -> str:
    lines = ["# carbon-fast's folders (written by carbon-fast install-layout)"]
    for path in (layout.storage_dir, layout.whisper_dir, layout.log_dir):
        lines.append("d %s 0755 %s %s -" % (path, layout.user, layout.group))
    return "\n".join(lines) + "\n"


@dataclass
class Step:
    """One idempotent action: ``describe()`` says what it would do, ``run()`` does it and
    says what it did."""
    describe: Callable[[], str]
    run: Callable[[], str]


def write_step(layout: Layout, path: str, text: Callable[[], str], replace: bool,
               mode: int = 0o644) -> Step:
    """Write ``path``; an existing file is rewritten only with ``replace`` (files the
    package owns: units) and only when its text differs. Config files are kept."""
    target = layout.host(path)

    def state() -> str:
        if not target.exists():
            return "write"
        if not replace:
            return "keep"
        return "same" if target.read_text() == text() else "update"

    def describe() -> str:
        return {"write": "write %s", "update": "update %s",
                "same": "unchanged %s", "keep": "keep %s (exists; not overwritten)"}[
            state()] % path

    def run() -> str:
        said = describe()
        if state() in ("write", "update"):
            target.parent.mkdir(parents=True, exist_ok=True)
            staging = target.with_name(".%s.%d.tmp" % (target.name, os.getpid()))
            staging.write_text(text())
            staging.chmod(mode)
            os.replace(staging, target)
        return said
    return Step(describe, run)


def enable_step(layout: Layout, unit: str) -> Step:
    """carbon.target.wants/UNIT -> its template, as ``systemctl enable`` makes it."""
    wants = "%s/carbon.target.wants/%s" % (layout.unit_dir, unit)
    template = re.sub(r"@[^.]+\.", "@.", unit)
    if template not in UNITS or template == "carbon.target" or template.endswith("@.service") \
            and template == unit:
        raise SystemExit("install-layout: cannot enable %s: not one of %s (templates need "
                         "an instance: carbon-cache@a)" % (unit, ", ".join(UNITS[:-1])))
    target = "%s/%s" % (layout.unit_dir, template)
    link = layout.host(wants)

    def describe() -> str:
        if link.is_symlink() and os.readlink(link) == target:
            return "enabled %s" % unit
        return "enable %s (%s -> %s)" % (unit, wants, target)

    def run() -> str:
        said = describe()
        if not (link.is_symlink() and os.readlink(link) == target):
            link.parent.mkdir(parents=True, exist_ok=True)
            if link.is_symlink() or link.exists():
                link.unlink()
            link.symlink_to(target)
        return said
    return Step(describe, run)


def command_step(argv: list[str], why: str) -> Step:
    def describe() -> str:
        return "run %s (%s)" % (" ".join(argv), why)

    def run() -> str:
        if shutil.which(argv[0]) is None:
            raise SystemExit("install-layout: %s is needed (%s) and was not found; is this "
                             "a systemd system?" % (argv[0], why))
        result = subprocess.run(argv, capture_output=True, text=True)
        if result.returncode != 0:
            raise SystemExit("install-layout: %s exited %d: %s" % (
                " ".join(argv), result.returncode, (result.stderr or result.stdout).strip()))
        return describe()
    return Step(describe, run)


def plan(layout: Layout, shipped: Path | None = None) -> list[Step]:
    """Every step of the install, in order."""
    shipped = shipped or shipped_conf_dir()
    for script in ("carbon-cache.py", "graphite-render"):
        # under --root (packaging) the scripts may be installed after the units
        if layout.root == "/" and not os.path.exists(os.path.join(layout.bindir, script)):
            raise SystemExit("install-layout: %s is not in %s (give the folder of the "
                             "installed scripts with --bindir)" % (script, layout.bindir))
    root = [] if layout.root == "/" else ["--root=%s" % layout.root]
    steps = [
        write_step(layout, "/etc/sysusers.d/%s.conf" % NAME, lambda: sysusers_text(layout),
                   replace=True),
        write_step(layout, "/etc/tmpfiles.d/%s.conf" % NAME, lambda: tmpfiles_text(layout),
                   replace=True),
        command_step(["systemd-sysusers", *root, "%s.conf" % NAME],
                     "creates the user %s" % layout.user),
        command_step(["systemd-tmpfiles", "--create", *root, "%s.conf" % NAME],
                     "creates storage and log folders owned by %s" % layout.user),
    ]
    for name in CONF_FILES:
        source = shipped / name
        if name == "carbon.conf":
            def text(source: Path = source) -> str:
                return carbon_conf_text(source.read_text(), layout)
        else:
            def text(source: Path = source) -> str:
                return source.read_text()
        steps.append(write_step(layout, os.path.join(layout.conf_dir, name), text,
                                replace=False))
    steps.append(write_step(
        layout, layout.render_settings,
        lambda: render_settings_text((shipped / "local_settings.py").read_text(), layout),
        replace=False))
    for unit in UNITS:
        def unit_file(unit: str = unit) -> str:
            return unit_text(unit, layout)
        steps.append(write_step(layout, "%s/%s" % (layout.unit_dir, unit), unit_file,
                                replace=True))
    steps.extend(enable_step(layout, unit) for unit in layout.enable)
    if layout.root == "/" and os.path.isdir("/run/systemd/system"):
        steps.append(command_step(["systemctl", "daemon-reload"], "reads the new units"))
    return steps
