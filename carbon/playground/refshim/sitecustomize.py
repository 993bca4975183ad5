"""Loaded by carbon 1.1.10 (never by us) when the playground runs it with an emulated
disk: adds the ``emulated-disk`` database plugin to carbon 1.1.10's own registry, its
whisper writes and creates then wait on the same disk model as ours
(carbon/storage/disk_model.py, named by PLAYGROUND_DISK_MODEL)."""

import importlib.util
import os
import sys


def _install():
    spec = importlib.util.spec_from_file_location("playground_disk_model",
                                                  os.environ["PLAYGROUND_DISK_MODEL"])
    model = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = model
    spec.loader.exec_module(model)
    from carbon.database import WhisperDatabase

    class EmulatedDiskDatabase(WhisperDatabase):
        plugin_name = "emulated-disk"

        def __init__(self, settings):
            WhisperDatabase.__init__(self, settings)
            conf_dir = settings.get("CONF_DIR") or "."
            self.profile = model.load_profile(os.path.join(conf_dir, model.PROFILE_FILE))
            self.device = model.Device(self.profile)

        def write(self, metric, datapoints):
            WhisperDatabase.write(self, metric, datapoints)
            self.device.wait(self.profile.ios_per_update)

        def create(self, metric, retentions, xfilesfactor, aggregation_method):
            WhisperDatabase.create(self, metric, retentions, xfilesfactor, aggregation_method)
            self.device.wait(self.profile.ios_per_create)

    return EmulatedDiskDatabase


if os.environ.get("PLAYGROUND_DISK_MODEL"):
    _install()
