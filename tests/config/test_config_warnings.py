"""carbon.conf keys carbon documents but we do not implement say so at start-up."""

from __future__ import annotations

from carbon.config.loader import load_settings
from tests.support import CarbonInstance


def write(tmp_path, text: str) -> str:
    path = tmp_path / "carbon.conf"
    path.write_text(text)
    return str(path)


def test_unimplemented_keys_are_named_with_file_and_line(tmp_path):
    conf = write(tmp_path, "[cache]\nCERES_LOCK_WRITES = True\nCERES_MAX_SLICE_GAP = 80\n"
                 "PROTOBUF_RECEIVER_PORT = 2005\nRAVEN_DSN = https://x@sentry/1\n"
                 "[relay]\nUSE_RATIO_RESET = True\nDESTINATIONS_POOL_REPLICAS = True\n"
                 "[aggregator]\nCACHE_METRIC_NAMES_MAX = 1000\nRELAY_METHOD = rules\n")
    cache = load_settings("carbon-cache", "a", conf, str(tmp_path), environ={})
    warned = cache.config_warnings
    # a key left at its default changes nothing, so it is not reported
    assert len(warned) == 3, warned
    for line, key in ((2, "CERES_LOCK_WRITES"), (4, "PROTOBUF_RECEIVER_PORT"), (5, "RAVEN_DSN")):
        assert any(w.startswith("%s line %d: %s is not implemented" % (conf, line, key))
                   for w in warned), warned
    relay = load_settings("carbon-relay", "a", conf, str(tmp_path), environ={})
    assert [w.split(": ")[1].split()[0] for w in relay.config_warnings] == [
        "USE_RATIO_RESET", "DESTINATIONS_POOL_REPLICAS"]
    aggregator = load_settings("carbon-aggregator", "a", conf, str(tmp_path), environ={})
    text = "\n".join(aggregator.config_warnings)
    assert "CACHE_METRIC_NAMES_MAX is not implemented" in text
    assert "RELAY_METHOD = rules has no effect on carbon-aggregator" in text


def test_daemon_logs_the_warning_at_start_up(tmp_path):
    instance = CarbonInstance(tmp_path, RAVEN_DSN="https://key@sentry.example/1")
    instance.start_foreground()
    try:
        assert "WARNING:" in instance.output()
        assert "RAVEN_DSN is not implemented" in instance.output()
    finally:
        instance.terminate()
