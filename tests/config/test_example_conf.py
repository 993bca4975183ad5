"""conf/ against carbon 1.1.10's example files and our code defaults."""

from __future__ import annotations

import configparser
import re
import sys
from pathlib import Path

import pytest

from carbon.config.defaults import DEFAULTS, PATH_KEYS
from carbon.config.loader import EXTRA_KNOWN_KEYS, load_settings
from carbon.config.settings import parse_value
from tests.support import CONF, ROOT

sys.path.insert(0, str(ROOT / "bench"))
from common import reference_venv  # noqa: E402

KEY_LINE = re.compile(r"^(#\s*)?([A-Z][A-Z0-9_]+)\s*=\s*(.*?)\s*$")
SECTION = re.compile(r"^\[([^\]]+)\]\s*$")
# Derived from another key when unset, so its example line shows the derived value.
DERIVED = {"MAX_UPDATES_PER_SECOND_ON_SHUTDOWN"}


def example_keys(path: Path) -> dict[str, dict[str, list[tuple[bool, str]]]]:
    """{section: {KEY: [(commented, value), ...]}}; commented keys count too."""
    sections: dict[str, dict[str, list[tuple[bool, str]]]] = {}
    current = None
    for raw in path.read_text().splitlines():
        line = raw.strip()
        match = SECTION.match(line)
        if match:
            current = sections.setdefault(match.group(1), {})
            continue
        match = KEY_LINE.match(line.replace("#   ", "# ").replace("#\t", "# "))
        if match and current is not None:
            value = match.group(3).rstrip(".").strip("'\"")
            current.setdefault(match.group(2), []).append((bool(match.group(1)), value))
    return sections


@pytest.fixture(scope="module")
def reference_conf() -> Path:
    return reference_venv() / "conf"


def test_every_reference_example_key_is_in_ours(reference_conf):
    reference = example_keys(reference_conf / "carbon.conf.example")
    ours = example_keys(CONF / "carbon.conf")
    assert set(reference) == {"cache", "relay", "aggregator"}
    missing = {section: sorted(set(keys) - set(ours[section]))
               for section, keys in reference.items()}
    assert missing == {"cache": [], "relay": [], "aggregator": []}


def test_reference_amqp_example_keys_are_known(reference_conf):
    known = set(DEFAULTS) | set(PATH_KEYS) | set(EXTRA_KNOWN_KEYS)
    reference = example_keys(reference_conf / "carbon.amqp.conf.example")
    # CACHE_SERVERS is a key of carbon 0.9 that carbon 1.1.10's code no longer reads.
    unknown = {k for keys in reference.values() for k in keys} - known - {"CACHE_SERVERS"}
    assert unknown == set()
    ours = example_keys(CONF / "carbon.amqp.conf")
    amqp_keys = {k for k in reference["cache"] if k.startswith("AMQP_") or k == "ENABLE_AMQP"}
    assert amqp_keys <= set(ours["cache"])


def test_commented_values_are_the_code_defaults():
    wrong = []
    for name in ("carbon.conf", "carbon.amqp.conf"):
        for section, keys in example_keys(CONF / name).items():
            for key, lines in keys.items():
                if key in PATH_KEYS or key in DERIVED or key not in DEFAULTS:
                    continue
                for commented, value in lines:
                    parsed = None if value == "None" else parse_value(key, value)
                    if commented and parsed != DEFAULTS[key]:
                        wrong.append("%s [%s] %s = %s (default %r)"
                                     % (name, section, key, value, DEFAULTS[key]))
    assert wrong == []


def test_every_key_of_the_code_is_documented():
    documented = set()
    for keys in example_keys(CONF / "carbon.conf").values():
        documented |= set(keys)
    assert sorted(set(DEFAULTS) - documented) == []
    docs = (ROOT / "docs" / "configuration.md").read_text()
    assert sorted(k for k in DEFAULTS if not re.search(r"\b%s\b" % k, docs)) == []


@pytest.mark.parametrize("program,instance,config", [
    ("carbon-cache", "a", "carbon.conf"), ("carbon-cache", "b", "carbon.conf"),
    ("carbon-relay", "a", "carbon.conf"), ("carbon-relay", "rules", "carbon.conf"),
    ("carbon-aggregator", "a", "carbon.conf"), ("carbon-aggregator-cache", "a", "carbon.conf"),
    ("carbon-cache", "a", "carbon.amqp.conf"),
])
def test_shipped_files_load_without_warnings(tmp_path, program, instance, config):
    settings = load_settings(program, instance, str(CONF / config), str(tmp_path), environ={})
    assert settings.config_warnings == []
    assert settings.LINE_RECEIVER_INTERFACE == "127.0.0.1"


def rule_sections(path: Path) -> dict:
    parser = configparser.RawConfigParser()
    parser.read(path)
    return {name: dict(parser.items(name)) for name in parser.sections()}


@pytest.mark.parametrize("name", ["storage-schemas.conf", "storage-aggregation.conf"])
def test_storage_rule_examples_match_carbon(reference_conf, name):
    assert rule_sections(CONF / name) == rule_sections(reference_conf / (name + ".example"))
