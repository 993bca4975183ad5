"""The disk model of the emulated-disk backend: profiles and one I/O queue.

Standard library only: carbon 1.1.10 loads this file too when the playground runs it
with an emulated disk (carbon/playground/refshim).
"""

from __future__ import annotations

import configparser
import os
import threading
import time
from dataclasses import dataclass
from typing import Any

PROFILE_FILE = "disk-profile.conf"


class ProfileError(ValueError):
    """A bad disk-profile.conf: ``path``, ``line`` and ``key`` say where."""

    def __init__(self, reason: str, path: str, line: int | None = None,
                 key: str | None = None) -> None:
        self.reason, self.path, self.line, self.key = reason, path, line, key
        super().__init__(reason)


@dataclass(frozen=True)
class DiskProfile:
    """A modelled device: ``iops`` 0 means the real disk alone (no added time)."""

    name: str
    iops: float
    latency_ms: float
    ios_per_update: int = 2
    ios_per_create: int = 4

    @property
    def emulated(self) -> bool:
        return self.iops > 0


# Random-I/O figures of the devices in the 2016 study (10k-rpm SAS RAID1 ~500 IOPS,
# laptop SSD ~6000) and of a current NVMe drive.
PROFILES = {
    "none": DiskProfile("none", 0, 0.0),
    "nvme": DiskProfile("nvme", 100_000, 0.02),
    "ssd": DiskProfile("ssd", 6_000, 0.1),
    "hdd": DiskProfile("hdd", 500, 2.0),
}
_FIELDS = {"iops": float, "latency_ms": float, "ios_per_update": int, "ios_per_create": int}


def load_profile(path: str) -> DiskProfile:
    """The profile in ``path`` (a missing file means ``none``); ProfileError names file,
    line and key of a bad value."""
    if not os.path.exists(path):
        return PROFILES["none"]
    parser = configparser.ConfigParser(inline_comment_prefixes=("#", ";"))
    try:
        parser.read(path)
    except configparser.Error as exc:
        raise ProfileError("cannot parse: %s" % exc, path) from None
    section = parser["disk"] if parser.has_section("disk") else {}
    lines = _key_lines(path)
    name = section.get("profile", "none").strip()
    if name not in PROFILES:
        raise ProfileError("%r is not one of %s" % (name, ", ".join(PROFILES)),
                           path, lines.get("profile"), "profile")
    values: dict[str, Any] = {}
    for key, kind in _FIELDS.items():
        if key in section:
            try:
                values[key] = kind(section[key])
            except ValueError:
                raise ProfileError("%r is not a number" % section[key],
                                   path, lines.get(key), key) from None
    base = PROFILES[name]
    return DiskProfile(name, values.get("iops", base.iops),
                       values.get("latency_ms", base.latency_ms),
                       values.get("ios_per_update", base.ios_per_update),
                       values.get("ios_per_create", base.ios_per_create))


def _key_lines(path: str) -> dict[str, int]:
    lines: dict[str, int] = {}
    with open(path) as handle:
        for number, line in enumerate(handle, 1):
            key = line.split("=", 1)[0].strip().lower()
            if "=" in line and key:
                lines.setdefault(key, number)
    return lines


class Device:
    """One I/O queue: ``wait(n)`` blocks the caller until its ``n`` I/Os are done."""

    def __init__(self, profile: DiskProfile) -> None:
        self.service = 1.0 / profile.iops if profile.iops > 0 else 0.0
        self.latency = profile.latency_ms / 1000.0
        self.lock = threading.Lock()
        self.free_at = 0.0
        self.blocked = 0.0  # seconds callers spent waiting, in total

    def wait(self, ios: int) -> float:
        """Reserve ``ios`` I/Os on the queue and sleep until the last is done."""
        if ios <= 0 or (not self.service and not self.latency):
            return 0.0
        with self.lock:
            now = time.monotonic()
            start = max(now, self.free_at)
            self.free_at = start + ios * self.service
            done = self.free_at + self.latency
        delay = done - now
        time.sleep(delay)
        with self.lock:
            self.blocked += delay
        return delay
