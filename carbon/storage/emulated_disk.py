"""Storage backend ``emulated-disk``: whisper files, with the I/O timing of a slower disk.

Select it with ``DATABASE = emulated-disk`` in carbon.conf; the disk is described in
``CONF_DIR/disk-profile.conf`` (carbon.conf keeps carbon 1.1.10's keys only)::

    [disk]
    profile = hdd          # none, nvme, ssd or hdd
    iops = 500             # random I/Os a second the device completes at most
    latency_ms = 2.0       # time one I/O takes
    ios_per_update = 2     # I/Os one file update costs (read + write of archive 0)
    ios_per_create = 4

The files are written by the real whisper backend; each update or create then waits
for its I/Os on a modelled device: one queue served at ``iops`` a second, each I/O
done ``latency_ms`` after it is served. The waiting thread sleeps (time blocked on I/O,
not CPU), the GIL released, exactly where a real disk would block it.
"""

from __future__ import annotations

import configparser
import os
import threading
import time
from array import array
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from carbon.config.errors import ConfigError
from carbon.plugins import STORAGE_BACKENDS
from carbon.storage.whisper_backend import WhisperDatabase

PROFILE_FILE = "disk-profile.conf"


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
    """The profile in ``path`` (a missing file means ``none``); ConfigError names file,
    line and key of a bad value."""
    if not os.path.exists(path):
        return PROFILES["none"]
    parser = configparser.ConfigParser(inline_comment_prefixes=("#", ";"))
    try:
        parser.read(path)
    except configparser.Error as exc:
        raise ConfigError("cannot parse %s: %s" % (path, exc)) from None
    section = parser["disk"] if parser.has_section("disk") else {}
    lines = _key_lines(path)
    name = section.get("profile", "none").strip()
    if name not in PROFILES:
        raise ConfigError("%r is not one of %s" % (name, ", ".join(PROFILES)),
                          path, lines.get("profile"), key="profile")
    values: dict[str, Any] = {}
    for key, kind in _FIELDS.items():
        if key in section:
            try:
                values[key] = kind(section[key])
            except ValueError:
                raise ConfigError("%r is not a number" % section[key],
                                  path, lines.get(key), key=key) from None
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


@STORAGE_BACKENDS.register("emulated-disk")
class EmulatedDiskDatabase(WhisperDatabase):
    """WhisperDatabase whose updates and creates wait as on the profile's device."""

    plugin_name = "emulated-disk"

    def __init__(self, settings: Any) -> None:
        super().__init__(settings)
        conf_dir = settings.get("CONF_DIR", ".")
        self.profile = load_profile(os.path.join(conf_dir, PROFILE_FILE))
        self.device = Device(self.profile)

    def write_batch(self, items: Sequence[tuple[str, array]],
                    now: int | None = None) -> list[float | None]:
        taken = super().write_batch(items, now)
        done = [index for index, seconds in enumerate(taken) if seconds is not None]
        if done:
            delay = self.device.wait(len(done) * self.profile.ios_per_update)
            share = delay / len(done)
            for index in done:
                taken[index] = (taken[index] or 0.0) + share
        return taken

    def write(self, metric: str, datapoints: Iterable[tuple[float, float]],
              now: int | None = None) -> int:
        dropped = super().write(metric, datapoints, now)
        self.device.wait(self.profile.ios_per_update)
        return dropped

    def create_many(self, requests: Sequence[tuple[str, Sequence[tuple[int, int]],
                                                  float | None, str | None]]
                    ) -> list[Exception | None]:
        errors = super().create_many(requests)
        made = sum(1 for error in errors if error is None)
        self.device.wait(made * self.profile.ios_per_create)
        return errors
