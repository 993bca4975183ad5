"""Plugins installed through entry points: used by name, broken ones reported, not fatal."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path
from typing import IO

import pytest

from carbon.config.errors import ConfigError
from carbon.plugins import Registry
from tests.support import ROOT, CarbonInstance, port_open, read_whisper, send_tcp, wait_for

PLUGIN = '''
import os

from carbon.cache.strategies import Strategy


class Alphabetical(Strategy):
    """Writes metrics in name order and notes each pass in $STRATEGY_MARK."""

    def snapshot(self):
        names = sorted(self.cache.names(), reverse=True)
        with open(os.environ["STRATEGY_MARK"], "a") as handle:
            handle.write(",".join(reversed(names)) + "\\n")
        return names
'''


def install_dists(site: Path) -> Path:
    """Two tiny installed distributions on a path entry: a working write strategy and
    one whose entry point names a module that does not exist."""
    site.mkdir(parents=True)
    (site / "alpha_strategy.py").write_text(PLUGIN)
    for dist, entry in (("alpha_strategy-1.0", "alphabetical = alpha_strategy:Alphabetical"),
                        ("broken_strategy-1.0", "broken = no_such_module_here:Thing")):
        info = site / (dist + ".dist-info")
        info.mkdir(parents=True)
        name, version = dist.split("-")
        (info / "METADATA").write_text("Metadata-Version: 2.1\nName: %s\nVersion: %s\n"
                                       % (name, version))
        (info / "entry_points.txt").write_text("[carbon.write_strategies]\n%s\n" % entry)
    return site


@pytest.fixture
def site(tmp_path, monkeypatch):
    path = install_dists(tmp_path / "site")
    monkeypatch.syspath_prepend(str(path))
    return path


def test_broken_entry_point_does_not_hide_the_others(site):
    registry = Registry("write strategy", "carbon.write_strategies")
    assert registry.names() == ["alphabetical"]
    assert "no_such_module_here" in registry.broken["broken"]
    with pytest.raises(ConfigError) as err:
        registry.resolve("broken", "CACHE_WRITE_STRATEGY", "carbon.conf")
    text = str(err.value)
    assert "CACHE_WRITE_STRATEGY" in text and "ModuleNotFoundError" in text
    with pytest.raises(ConfigError) as err:
        registry.resolve("fastest", "CACHE_WRITE_STRATEGY")
    assert "unknown write strategy 'fastest' (known: alphabetical)" in str(err.value)



def _start_seeing(instance: CarbonInstance, site: Path, **env: str) -> IO[str]:
    """Start ``instance`` in the foreground seeing the distributions installed in
    ``site`` (through its PYTHONPATH) and wait until it listens; its stdout log."""
    environ = dict(os.environ, GRAPHITE_ROOT=str(instance.root),
                   PYTHONPATH=os.pathsep.join([str(ROOT), str(site)]), **env)
    log = open(instance.root / "stdout.log", "w")
    instance.proc = subprocess.Popen(instance.script + ["--nodaemon", "start"], env=environ,
                                     stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_for(lambda: instance.proc.poll() is not None or port_open(instance.line_port),
                 what="daemon to listen")
        assert instance.proc.poll() is None, instance.output()
    except BaseException:
        instance.kill()
        log.close()
        raise
    return log

def test_cache_uses_a_write_strategy_from_an_entry_point(tmp_path, site):
    mark = tmp_path / "passes.txt"
    instance = CarbonInstance(tmp_path / "root", CACHE_WRITE_STRATEGY="alphabetical")
    # the daemon sees the installed distributions through its PYTHONPATH
    log = _start_seeing(instance, site, STRATEGY_MARK=str(mark))
    try:
        now = int(time.time()) // 60 * 60
        send_tcp(instance.line_port, b"b.metric 2 %d\na.metric 1 %d\n" % (now, now))
        for name, value in (("a.metric", 1.0), ("b.metric", 2.0)):
            path = instance.whisper_path(name)
            wait_for(lambda p=path: read_whisper(p, now - 60, now + 60), 30,
                     what="%s written" % name)
            assert read_whisper(path, now - 60, now + 60) == {now: value}
        assert "Using alphabetical write strategy" in instance.output()
        assert "a.metric,b.metric" in mark.read_text().split("\n")
        assert instance.proc.poll() is None
    finally:
        instance.kill()
        log.close()


def test_unknown_rate_limiter_stops_start_up_naming_key_and_known_names(tmp_path):
    instance = CarbonInstance(tmp_path, RATE_LIMITER="leaky")
    result = instance.cli("start")
    assert result.returncode == 1
    assert "RATE_LIMITER" in result.stderr and "leaky" in result.stderr
    assert "token_bucket" in result.stderr and "unlimited" in result.stderr


def test_unknown_database_stops_start_up_naming_key_and_known_names(tmp_path):
    instance = CarbonInstance(tmp_path, DATABASE="ceres")
    result = instance.cli("start")
    assert result.returncode == 1
    assert "DATABASE" in result.stderr
    assert "'ceres' (known: emulated-disk, whisper)" in result.stderr


BACKEND = '''
import os


class TextBackend:
    """A storage backend as carbon 1.1.10's plugins are written: made with the whole
    settings, the base calls only; points go to LOCAL_DATA_DIR/points.txt."""

    def __init__(self, settings):
        self.path = os.path.join(settings["LOCAL_DATA_DIR"], "points.txt")
        self.known = set()
        with open(self.path, "a") as handle:
            handle.write("made with %s\\n" % type(settings).__name__)

    def exists(self, metric):
        return metric in self.known

    def create(self, metric, retentions, xfilesfactor, aggregation_method):
        self.known.add(metric)

    def write(self, metric, datapoints):
        with open(self.path, "a") as handle:
            for stamp, value in datapoints:
                handle.write("%s %d %g\\n" % (metric, stamp, value))

    def get_metadata(self, metric, key):
        return "average"

    def set_metadata(self, metric, key, value):
        return "average"
'''


def test_cache_stores_through_a_storage_backend_from_an_entry_point(tmp_path):
    """A duck-typed backend plugin (carbon 1.1.10's contract: called with the settings)
    installed as a distribution keeps working: the daemon calls it with its Settings,
    wraps it and writes every point through its ``write``."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "text_backend.py").write_text(BACKEND)
    info = site / "text_backend-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: text_backend\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        "[carbon.storage_backends]\ntextfile = text_backend:TextBackend\n")
    instance = CarbonInstance(tmp_path / "root", DATABASE="textfile")
    data = instance.storage / "whisper"
    data.mkdir(parents=True)
    log = _start_seeing(instance, site)
    try:
        now = int(time.time()) // 60 * 60
        send_tcp(instance.line_port, b"t.one 1 %d\nt.two 2 %d\n" % (now, now))
        points = data / "points.txt"
        wait_for(lambda: points.exists() and "t.two" in points.read_text()
                 and "t.one" in points.read_text(), 30, what="points through the plugin")
        lines = points.read_text().splitlines()
        assert lines[0] == "made with Settings"
        assert sorted(lines[1:]) == ["t.one %d 1" % now, "t.two %d 2" % now]
        assert not list(data.rglob("*.wsp"))
    finally:
        instance.kill()
        log.close()
