"""Whether a real disk throttle (the cgroup v2 io controller's ``io.max``) is usable here.

The emulated disk profiles always work; a real throttle needs root, a mounted cgroup v2
hierarchy whose ``cgroup.controllers`` lists ``io``, and a data folder on a block device.
``io_throttle_status`` checks each and says plainly which one is missing; the playground
prints it with ``--check`` and in the report's disk note. It never changes anything.
"""

from __future__ import annotations

import os
from pathlib import Path


def cgroup2_mounts(mountinfo: str = "/proc/self/mountinfo") -> list[str]:
    """Mount points of cgroup v2 hierarchies (fstype ``cgroup2``)."""
    out = []
    try:
        lines = Path(mountinfo).read_text().splitlines()
    except OSError:
        return out
    for line in lines:
        head, _, tail = line.partition(" - ")
        fields = head.split()
        if tail.split()[:1] == ["cgroup2"] and len(fields) > 4:
            out.append(fields[4])
    return out


def block_device(path: str | Path) -> str | None:
    """``major:minor`` of the block device holding ``path``, or None (overlay, tmpfs)."""
    dev = os.stat(path).st_dev
    number = "%d:%d" % (os.major(dev), os.minor(dev))
    return number if os.path.exists("/sys/dev/block/%s" % number) else None


def io_throttle_status(data_dir: str | Path = ".", mountinfo: str = "/proc/self/mountinfo"
                       ) -> tuple[bool, str]:
    """(usable, why): whether io.max could throttle whisper I/O below ``data_dir``."""
    if os.geteuid() != 0:
        return False, "not root"
    mounts = cgroup2_mounts(mountinfo)
    if not mounts:
        return False, "no cgroup v2 hierarchy is mounted"
    with_io = []
    for mount in mounts:
        try:
            controllers = Path(mount, "cgroup.controllers").read_text().split()
        except OSError:
            continue
        if "io" in controllers:
            with_io.append(mount)
    if not with_io:
        return False, ("the cgroup v2 hierarchy at %s has no io controller (its "
                       "cgroup.controllers does not list io: the block I/O controller is "
                       "bound to a cgroup v1 hierarchy here)" % ", ".join(mounts))
    device = block_device(data_dir)
    if device is None:
        return False, "%s is not on a block device" % data_dir
    return True, "io.max under %s on block device %s" % (with_io[0], device)
