"""carbon 1.1.10's carbon-relay.py (its own venv) sends pickle to our carbon-cache."""

from __future__ import annotations

import time
from pathlib import Path

from tests.interop.reference import ReferenceCarbon
from tests.support import CarbonInstance, read_whisper, send_tcp, wait_for


def test_reference_relay_pickles_land_in_our_cache(tmp_path: Path) -> None:
    cache = CarbonInstance(tmp_path / "ours")
    cache.start_foreground()
    try:
        relay = ReferenceCarbon(tmp_path / "ref", "carbon-relay.py", "relay",
                                RELAY_METHOD="consistent-hashing",
                                DESTINATION_PROTOCOL="pickle",
                                DESTINATIONS="127.0.0.1:%d:a" % cache.pickle_port,
                                MAX_QUEUE_SIZE=100000)
        try:
            now = int(time.time()) // 60 * 60
            metrics, per = 200, 5
            send_tcp(relay.ports["LINE_RECEIVER_PORT"], b"".join(
                b"interop.m%d %d %d\n" % (i, k, now - 60 * k)
                for i in range(metrics) for k in range(1, per + 1)))

            def landed() -> bool:
                total = 0
                for i in range(metrics):
                    path = cache.whisper_path("interop.m%d" % i)
                    total += len(read_whisper(path, now - 60 * (per + 1), now))
                return total == metrics * per

            wait_for(landed, timeout=60, interval=0.5, what="every relayed point")
        finally:
            relay.stop()
    finally:
        cache.kill()
