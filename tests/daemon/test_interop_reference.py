"""Reference carbon-relay.py 1.1.10 (its own venv) sends pickle to our cache."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support import (CarbonInstance, free_port, port_open, read_whisper, send_tcp,
                           wait_for)

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from common import reference_venv  # noqa: E402

pytestmark = pytest.mark.skipif(os.environ.get("SKIP_REFERENCE") == "1",
                                reason="SKIP_REFERENCE=1")


def test_reference_relay_pickles_land_in_our_cache(tmp_path):
    cache = CarbonInstance(tmp_path / "ours")
    cache.start_foreground()
    relay_root = tmp_path / "ref"
    (relay_root / "conf").mkdir(parents=True)
    (relay_root / "conf" / "storage-schemas.conf").write_text(
        "[all]\npattern = .*\nretentions = 60:1d\n")
    relay_port = free_port()
    (relay_root / "conf" / "carbon.conf").write_text("\n".join([
        "[relay]", "LINE_RECEIVER_INTERFACE = 127.0.0.1",
        "LINE_RECEIVER_PORT = %d" % relay_port, "PICKLE_RECEIVER_PORT = 0",
        "RELAY_METHOD = consistent-hashing", "DESTINATION_PROTOCOL = pickle",
        "DESTINATIONS = 127.0.0.1:%d:a" % cache.pickle_port, "CARBON_METRIC_INTERVAL = 0",
        "MAX_QUEUE_SIZE = 100000", "USER = ", ""]))
    venv = reference_venv()
    env = {"GRAPHITE_ROOT": str(relay_root), "PATH": "/usr/bin:/bin"}
    relay = subprocess.Popen([str(venv / "bin" / "python"), str(venv / "bin" / "carbon-relay.py"),
                              "--config", str(relay_root / "conf" / "carbon.conf"), "--nodaemon",
                              "start"], env=env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: port_open(relay_port), what="reference relay")
        now = int(time.time()) // 60 * 60
        metrics, per = 200, 5
        lines = b"".join(b"interop.m%d %d %d\n" % (i, k, now - 60 * k)
                         for i in range(metrics) for k in range(1, per + 1))
        send_tcp(relay_port, lines)

        def landed() -> int:
            total = 0
            for i in range(metrics):
                path = cache.whisper_path("interop.m%d" % i)
                total += len(read_whisper(path, now - 60 * (per + 1), now))
            return total == metrics * per

        wait_for(landed, timeout=60, interval=0.5, what="every relayed point")
    finally:
        relay.kill()
        relay.wait(10)
        cache.kill()
