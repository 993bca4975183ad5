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

import os
from array import array
from typing import Iterable, Sequence

from carbon.config.errors import ConfigError
from carbon.config.settings import Settings
from carbon.plugins import STORAGE_BACKENDS
from carbon.storage import disk_model
from carbon.storage.backend import Capabilities, CreateRequest, CreateResult
from carbon.storage.disk_model import PROFILE_FILE, Device, DiskProfile
from carbon.storage.whisper_backend import WhisperConfig, WhisperDatabase


def load_profile(path: str) -> DiskProfile:
    """The profile in ``path`` (missing: ``none``); ConfigError names file, line and key."""
    try:
        return disk_model.load_profile(path)
    except disk_model.ProfileError as exc:
        raise ConfigError(exc.reason, exc.path, exc.line, key=exc.key) from None


@STORAGE_BACKENDS.register("emulated-disk")
class EmulatedDiskDatabase(WhisperDatabase):
    """WhisperDatabase whose updates and creates wait as on the profile's device."""

    plugin_name = "emulated-disk"
    # create_many below takes the points and pays their I/Os; not split over threads
    capabilities = Capabilities(writes_on_create=True, whisper_files=True)

    @classmethod
    def from_settings(cls, settings: Settings) -> EmulatedDiskDatabase:
        """Whisper's config, and the profile in CONF_DIR (a path key the loader sets;
        the current folder without it)."""
        conf_dir = settings.get("CONF_DIR") or "."
        return cls(WhisperConfig.from_settings(settings),
                   load_profile(os.path.join(conf_dir, PROFILE_FILE)))

    def __init__(self, config: WhisperConfig, profile: DiskProfile) -> None:
        super().__init__(config)
        self.profile = profile
        self.device = Device(self.profile)

    def write_batch(self, items: Sequence[tuple[str, array[float]]],
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

    def create_many(self, requests: Sequence[CreateRequest],
                    points: Sequence[array[float] | None] | None = None, now: int | None = None
                    ) -> list[CreateResult]:
        errors = super().create_many(requests, points, now)
        made = sum(1 for error in errors if error is None or type(error) is float)
        written = [(index, error) for index, error in enumerate(errors)
                   if isinstance(error, float)]
        delay = self.device.wait(made * self.profile.ios_per_create
                                 + len(written) * self.profile.ios_per_update)
        for index, seconds in written:
            errors[index] = seconds + delay / max(made, 1)
        return errors
