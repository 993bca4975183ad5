"""Real daemons stopped with SIGTERM leave nothing unclosed: Twisted's EMFILE reserve
(/dev/null, opened at the first listen and kept for the process's life) is released once
the ports are closed.

The daemons run with every ResourceWarning shown (PYTHONWARNINGS=always): what is left
open is found by the interpreter's final collection, where a warning turned into an error
could not stop anything (it is swallowed during finalization), so the test fails on any
ResourceWarning line in the daemon's output instead. No connection is made before the
stop: once one has been accepted the interpreter no longer reports the reserve at exit
(seen with Twisted 26.10 on 3.11), although it is just as open."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from tests.support import ROOT, CarbonInstance, wait_for


@pytest.mark.parametrize('program,section', [
    ('carbon-aggregator', 'aggregator'),
    ('carbon-relay', 'relay'),
    ('carbon-cache', 'cache'),
])
def test_daemon_stops_without_unclosed_resources(tmp_path: Path, program: str,
                                                 section: str) -> None:
    extra = {} if section == 'cache' else {'DESTINATIONS': '127.0.0.1:%d' % 9,
                                           'RELAY_METHOD': 'consistent-hashing'}
    daemon = CarbonInstance(tmp_path / section, program=program, section=section, **extra)
    if section == 'aggregator':
        (daemon.conf / 'aggregation-rules.conf').write_text(
            'x.all.total (10) = sum x.*.total\n')
    env = dict(os.environ, GRAPHITE_ROOT=str(daemon.root), PYTHONPATH=str(ROOT),
               PYTHONWARNINGS='always::ResourceWarning')
    log = tmp_path / 'output.log'
    with open(log, 'w') as out:
        proc = subprocess.Popen(daemon.script + ['--nodaemon', 'start'], env=env, stdout=out,
                                stderr=subprocess.STDOUT)
    try:
        wait_for(lambda: proc.poll() is not None or ') started' in log.read_text(),
                 what='%s to start' % program)
        assert proc.poll() is None, log.read_text()
        time.sleep(0.3)  # the reactor running, its SIGTERM handler in place
        proc.terminate()
        assert proc.wait(60) == 0, log.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    output = log.read_text()
    assert 'shut down cleanly' in output
    assert 'ResourceWarning' not in output and 'unclosed' not in output, output
