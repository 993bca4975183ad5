"""carbon.conf loading, instance sections, schemas and pattern lists."""

from __future__ import annotations

import pytest

from carbon.config.errors import ConfigError
from carbon.config.loader import load_settings
from carbon.config.retention import parse_retention
from carbon.config.schemas import SchemaFiles, load_aggregation_schemas, load_storage_schemas
from carbon.config.patternlist import PatternList


def write(path, text):
    path.write_text(text)
    return str(path)


def test_defaults_types_and_instance_override(tmp_path):
    conf = write(tmp_path / "carbon.conf", """
[cache]
MAX_CACHE_SIZE = 5000
LINE_RECEIVER_PORT = 2003
ENABLE_UDP_LISTENER = true
DESTINATIONS = a:1, b:2
MAX_CREATES_PER_MINUTE = 50

[cache:b]
LINE_RECEIVER_PORT = 2103
""")
    a = load_settings("carbon-cache", "a", conf, str(tmp_path), environ={})
    b = load_settings("carbon-cache", "b", conf, str(tmp_path), environ={})
    assert a.MAX_CACHE_SIZE == 5000 and isinstance(a.MAX_CACHE_SIZE, int)
    assert a.ENABLE_UDP_LISTENER is True
    assert a.DESTINATIONS == ["a:1", "b:2"]
    assert a.LINE_RECEIVER_PORT == 2003 and b.LINE_RECEIVER_PORT == 2103
    assert b.MAX_CREATES_PER_MINUTE == 50
    assert a.MAX_UPDATES_PER_SECOND == 500  # code default
    assert a.pidfile == str(tmp_path / "storage" / "carbon-cache-a.pid")
    assert b.LOG_DIR == str(tmp_path / "storage" / "log" / "carbon-cache" / "carbon-cache-b")
    assert a.LOCAL_DATA_DIR == str(tmp_path / "storage" / "whisper")
    assert a.CACHE_SIZE_LOW_WATERMARK == 5000 * 0.95


def test_storage_dir_drives_derived_paths(tmp_path):
    conf = write(tmp_path / "carbon.conf", "[cache]\nSTORAGE_DIR = %s/s\n" % tmp_path)
    s = load_settings("carbon-cache", "a", conf, str(tmp_path), environ={})
    assert s.LOCAL_DATA_DIR == str(tmp_path / "s" / "whisper")
    assert s.PID_DIR == str(tmp_path / "s")


def test_misspelled_key_warns_with_nearest(tmp_path):
    conf = write(tmp_path / "carbon.conf", "[cache]\nMAX_CACHE_SIZ = 10\n")
    s = load_settings("carbon-cache", "a", conf, str(tmp_path), environ={})
    assert len(s.config_warnings) == 1
    warning = s.config_warnings[0]
    assert "MAX_CACHE_SIZ" in warning and "MAX_CACHE_SIZE" in warning and "line 2" in warning


def test_rebalance_state_is_a_known_relay_key(tmp_path):
    """carbon-cluster's relays route with cluster-rebalance, which needs REBALANCE_STATE:
    no 'unknown key' warning for it."""
    conf = write(tmp_path / "carbon.conf", "[relay]\nRELAY_METHOD = cluster-rebalance\n"
                 "REBALANCE_STATE = %s/state.json\n" % tmp_path)
    s = load_settings("carbon-relay", "a", conf, str(tmp_path), environ={})
    assert s.config_warnings == []
    assert s.REBALANCE_STATE == "%s/state.json" % tmp_path


def test_invalid_value_names_file_line_key(tmp_path):
    conf = write(tmp_path / "carbon.conf", "[cache]\n\nMAX_CACHE_SIZE = lots\n")
    with pytest.raises(ConfigError) as info:
        load_settings("carbon-cache", "a", conf, str(tmp_path), environ={})
    text = str(info.value)
    assert conf in text and "line 3" in text and "MAX_CACHE_SIZE" in text


def test_invalid_boolean(tmp_path):
    conf = write(tmp_path / "carbon.conf", "[cache]\nUSE_FLOW_CONTROL = maybe\n")
    with pytest.raises(ConfigError, match="USE_FLOW_CONTROL"):
        load_settings("carbon-cache", "a", conf, str(tmp_path), environ={})


def test_missing_config(tmp_path):
    with pytest.raises(ConfigError, match="missing required config"):
        load_settings("carbon-cache", "a", str(tmp_path / "nope.conf"), str(tmp_path), environ={})


@pytest.mark.parametrize("text,expected", [
    ("10s:1d", (10, 8640)), ("60:1440", (60, 1440)), ("1m:7d", (60, 10080)),
    ("1h:1y", (3600, 8760)), ("5min:1w", (300, 2016)),
])
def test_retentions(text, expected):
    assert parse_retention(text) == expected


@pytest.mark.parametrize("text", ["10x:1d", "abc", "10s:", ":5", "0:10"])
def test_bad_retentions(text):
    with pytest.raises(ValueError):
        parse_retention(text)


def test_schema_matching_and_errors(tmp_path):
    path = write(tmp_path / "storage-schemas.conf", """
[carbon]
pattern = ^carbon\\.
retentions = 60:90d

[fast]
pattern = ^fast\\.
retentions = 10s:6h,1m:7d
""")
    schemas = load_storage_schemas(path)
    assert [s.name for s in schemas] == ["carbon", "fast", "default"]
    assert schemas[1].value == [(10, 2160), (60, 10080)]
    bad = write(tmp_path / "bad.conf", "[x]\npattern = .*\n\nretentions = 10s:1h,15s:1d\n")
    with pytest.raises(ConfigError) as info:
        load_storage_schemas(bad)
    assert "line 4" in str(info.value) and "retentions" in str(info.value)
    bad_re = write(tmp_path / "badre.conf", "[x]\npattern = ([\nretentions = 60:10\n")
    with pytest.raises(ConfigError, match="line 2.*pattern"):
        load_storage_schemas(bad_re)


def test_aggregation_schemas(tmp_path):
    path = write(tmp_path / "agg.conf", "[sum]\npattern = count$\nxFilesFactor = 0\n"
                 "aggregationMethod = sum\n")
    schemas = load_aggregation_schemas(path)
    assert schemas[0].matches("a.count") and schemas[0].value == (0.0, "sum")
    assert schemas[-1].value == (None, None)
    bad = write(tmp_path / "bad.conf", "[x]\npattern = .*\naggregationMethod = median\n")
    with pytest.raises(ConfigError, match="line 3.*aggregationMethod"):
        load_aggregation_schemas(bad)


def test_schema_reload_keeps_old_rules_on_error(tmp_path):
    write(tmp_path / "storage-schemas.conf", "[a]\npattern = ^a\\.\nretentions = 10:10\n")
    files = SchemaFiles(str(tmp_path))
    assert files.for_metric("a.b")[0].value == [(10, 10)]
    path = tmp_path / "storage-schemas.conf"
    path.write_text("[a]\npattern = ^a\\.\nretentions = 10:bad\n")
    import os
    os.utime(path, (1, 1))
    assert "keeping previous schemas" in files.reload_if_changed()
    assert files.for_metric("a.b")[0].value == [(10, 10)]
    path.write_text("[a]\npattern = ^a\\.\nretentions = 20:10\n")
    os.utime(path, (2, 2))
    assert files.reload_if_changed() is None
    assert files.for_metric("a.b")[0].value == [(20, 10)]


def test_pattern_list(tmp_path):
    path = tmp_path / "list.conf"
    path.write_text("# comment\n^a\\.\n\nb$\n")
    patterns = PatternList(str(path))
    assert patterns.matches("a.x") and patterns.matches("x.b") and not patterns.matches("c")
    path.write_text("(\n")
    import os
    os.utime(path, (5, 5))
    with pytest.raises(ConfigError, match="line 1"):
        patterns.reload()
