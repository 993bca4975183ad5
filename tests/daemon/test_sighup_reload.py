"""SIGHUP on a real carbon-cache: each tunable and the schema files are re-read, one log
line per changed value, and the running writer and cache use the new values."""

from __future__ import annotations

import time
from pathlib import Path

import whisper

from tests.support import CarbonInstance, send_tcp, wait_for

SCHEMAS_AFTER = """[after]
pattern = ^schema\\.
retentions = 10s:1h

[default]
pattern = .*
retentions = 60s:1d
"""


def hup_lines(instance: CarbonInstance) -> list[str]:
    return [line.split("SIGHUP: ", 1)[1] for line in instance.output().splitlines()
            if "SIGHUP: " in line]


def hup(instance: CarbonInstance, expected: int, **changes: object) -> list[str]:
    """Rewrite carbon.conf with ``changes``, SIGHUP, wait for ``expected`` new lines."""
    before = len(hup_lines(instance))
    instance.settings.update(changes)
    instance.write_conf()
    assert instance.proc is not None
    instance.proc.send_signal(1)
    if expected:
        wait_for(lambda: len(hup_lines(instance)) >= before + expected, timeout=15,
                 what="%d SIGHUP log lines" % expected)
    else:
        time.sleep(0.5)
    return hup_lines(instance)[before:]


def written(instance: CarbonInstance, names: list[str]) -> int:
    count = 0
    for name in names:
        try:
            values = whisper.fetch(str(instance.whisper_path(name)), int(time.time()) - 600)[1]
        except (OSError, whisper.WhisperException):
            continue
        count += any(value is not None for value in values)
    return count


def test_sighup_reloads_each_tunable_and_the_schemas(tmp_path: Path) -> None:
    instance = CarbonInstance(tmp_path, MAX_UPDATES_PER_SECOND=1, MAX_CREATES_PER_MINUTE="inf",
                              CACHE_WRITE_STRATEGY="sorted", MAX_CACHE_SIZE="inf",
                              USE_FLOW_CONTROL=False)
    instance.start_foreground()
    try:
        now = int(time.time())
        slow = ["ups.m%d" % index for index in range(30)]
        send_tcp(instance.line_port, "".join("%s 1 %d\n" % (name, now) for name in slow).encode())
        time.sleep(1.0)
        assert written(instance, slow) < 30  # one update a second

        lines = hup(instance, 2, MAX_UPDATES_PER_SECOND="inf", MAX_CREATES_PER_MINUTE=1)
        assert lines == ["MAX_UPDATES_PER_SECOND changed from 1 to inf",
                         "MAX_CREATES_PER_MINUTE changed from inf to 1"]
        wait_for(lambda: written(instance, slow) == 30, timeout=15, what="unthrottled writes")

        fresh = ["creates.m%d" % index for index in range(10)]
        send_tcp(instance.line_port, "".join("%s 1 %d\n" % (name, now) for name in fresh).encode())
        time.sleep(1.0)
        assert sum(instance.whisper_path(name).exists() for name in fresh) <= 2

        (instance.conf / "storage-schemas.conf").write_text(SCHEMAS_AFTER)
        lines = hup(instance, 3, MAX_CREATES_PER_MINUTE="inf", CACHE_WRITE_STRATEGY="naive")
        assert lines == ["MAX_CREATES_PER_MINUTE changed from 1 to inf",
                         "CACHE_WRITE_STRATEGY changed from sorted to naive",
                         "reloaded storage schemas (3) and aggregation schemas (5)"]
        wait_for(lambda: all(instance.whisper_path(name).exists() for name in fresh),
                 timeout=15, what="creates after MAX_CREATES_PER_MINUTE = inf")
        send_tcp(instance.line_port, b"schema.after 1 %d\n" % now)
        path = instance.whisper_path("schema.after")
        wait_for(path.exists, timeout=15, what="schema.after created")
        assert whisper.info(str(path))["archives"][0]["secondsPerPoint"] == 10

        lines = hup(instance, 2, MAX_CACHE_SIZE=5, MAX_UPDATES_PER_SECOND=1)
        assert lines == ["MAX_UPDATES_PER_SECOND changed from inf to 1",
                         "MAX_CACHE_SIZE changed from inf to 5"]
        full = "".join("full.m%d 1 %d\n" % (index, now) for index in range(50)).encode()
        send_tcp(instance.line_port, full)
        wait_for(lambda: "MetricCache is full" in instance.output(), timeout=15,
                 what="the new MAX_CACHE_SIZE to be reached")

        assert hup(instance, 0) == []  # nothing changed: nothing logged
        lines = hup(instance, 2, CACHE_WRITE_STRATEGY="fastest", MAX_UPDATES_PER_SECOND="inf")
        assert lines[0] == "MAX_UPDATES_PER_SECOND changed from 1 to inf"
        assert lines[1].startswith("kept CACHE_WRITE_STRATEGY = naive: unknown write strategy")
        assert instance.proc is not None and instance.proc.poll() is None
        assert "Traceback" not in instance.output()
    finally:
        instance.terminate()
