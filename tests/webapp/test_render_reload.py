"""SIGHUP on a real ``graphite-render``: new CLUSTER_SERVERS without a refused request."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Iterator
from urllib.parse import quote

import pytest

from tests.webapp.helpers import http_get, make_whisper, stop_server

ROOT = Path(__file__).resolve().parents[2]


class RenderProcess:
    """A graphite-render process on 127.0.0.1, stderr (its log) kept in a file."""

    def __init__(self, folder: Path, metric: str, base_time: int) -> None:
        folder.mkdir()
        make_whisper(str(folder / 'whisper'), metric, [(base_time, 1.0)])
        self.settings = folder / 'local_settings.py'
        self.log = folder / 'render.log'
        self.write_settings([])
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        with open(self.log, 'w') as log:
            self.proc = subprocess.Popen(
                [sys.executable, '-m', 'webapp.server', '--config', str(self.settings),
                 '--port', '0'], stdout=subprocess.PIPE, stderr=log, env=env, cwd=str(ROOT),
                text=True)
        line = self.proc.stdout.readline()
        assert 'listening on http://127.0.0.1:' in line, self.log.read_text()
        self.base = line.strip().split()[-1].rstrip('/')
        self.address = self.base.split('//', 1)[1]

    def write_settings(self, servers: list[str], text: str | None = None) -> None:
        """Replace the settings file whole (written beside it, then renamed)."""
        body = text if text is not None else (
            'STORAGE_DIR = %r\nCARBONLINK_HOSTS = []\nCLUSTER_SERVERS = %r\n'
            % (str(self.settings.parent), servers))
        scratch = self.settings.with_suffix('.tmp')
        scratch.write_text(body)
        os.replace(scratch, self.settings)

    def find(self, query: str) -> tuple[int, dict, list[str]]:
        status, headers, body = http_get(self.base + '/metrics/find?query=%s' % quote(query),
                                         timeout=5)
        names = [node['id'] for node in json.loads(body)] if status == 200 else []
        return status, headers, sorted(names)

    def hup_and_wait_for_log(self, fragment: str, timeout: float = 5.0) -> str:
        self.proc.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = self.log.read_text()
            if fragment in text:
                return text
            time.sleep(0.02)
        raise AssertionError('no %r in the log after SIGHUP:\n%s' % (fragment,
                                                                     self.log.read_text()))


@pytest.fixture
def pair(tmp_path: Any, base_time: int) -> Iterator[tuple[RenderProcess, RenderProcess]]:
    """Two render apps: ``front`` (has hup.front) and ``remote`` (has hup.remote)."""
    started: list[RenderProcess] = []
    try:
        started.append(RenderProcess(tmp_path / 'front', 'hup.front', base_time))
        started.append(RenderProcess(tmp_path / 'remote', 'hup.remote', base_time))
        yield started[0], started[1]
    finally:
        for render in started:
            stop_server(render.proc)


class Poller(threading.Thread):
    """Asks ``front`` for hup.* back to back until stopped; counts every answer."""

    def __init__(self, front: RenderProcess) -> None:
        super().__init__(daemon=True)
        self.front = front
        self.stop = threading.Event()
        self.answers: list[list[str]] = []
        self.failures: list[str] = []

    def run(self) -> None:
        while not self.stop.is_set() and len(self.answers) + len(self.failures) < 20000:
            try:
                status, headers, names = self.front.find('hup.*')
            except OSError as err:
                self.failures.append(repr(err))
                continue
            if status != 200 or 'X-Graphite-Failed-Hosts' in headers:
                self.failures.append('%d %s' % (status, headers.get('X-Graphite-Failed-Hosts')))
            else:
                self.answers.append(names)


def test_sighup_applies_cluster_servers_without_a_failed_request(pair: tuple) -> None:
    front, remote = pair
    poller = Poller(front)
    poller.start()
    try:
        time.sleep(0.3)
        before = len(poller.answers)
        front.write_settings([remote.address])
        text = front.hup_and_wait_for_log('SIGHUP: CLUSTER_SERVERS changed')
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and ['hup.front', 'hup.remote'] not in poller.answers:
            time.sleep(0.02)
        time.sleep(0.3)
    finally:
        poller.stop.set()
        poller.join(10)
    assert poller.failures == []
    assert before > 0 and all(names == ['hup.front'] for names in poller.answers[:before])
    switched = poller.answers.index(['hup.front', 'hup.remote'])
    assert all(names == ['hup.front', 'hup.remote'] for names in poller.answers[switched:])
    assert len(poller.answers) - switched > 5  # still answering after the switch
    assert "SIGHUP: CLUSTER_SERVERS changed from [] to ['%s']" % remote.address in text
    assert 'REMOTE_EXCLUDE_LOCAL changed' not in text  # one line per changed value only
    assert front.proc.poll() is None


def test_sighup_with_a_bad_settings_file_keeps_the_running_settings(pair: tuple) -> None:
    front, remote = pair
    front.write_settings([remote.address])
    front.hup_and_wait_for_log('SIGHUP: CLUSTER_SERVERS changed')
    front.write_settings([], text='CLUSTER_SERVERS = [\n')
    text = front.hup_and_wait_for_log('SIGHUP: kept the running settings')
    line = [entry for entry in text.splitlines() if 'kept the running settings' in entry][0]
    assert 'ERROR' in line and str(front.settings) in line and 'line 1' in line
    assert front.proc.poll() is None
    status, headers, names = front.find('hup.*')
    assert status == 200 and names == ['hup.front', 'hup.remote']
    # fixed again: the next SIGHUP applies it
    front.write_settings([])
    front.hup_and_wait_for_log("SIGHUP: CLUSTER_SERVERS changed from ['%s'] to []"
                               % remote.address)
    assert front.find('hup.*')[2] == ['hup.front']


# The front app in a fresh interpreter where ResourceWarning is an error: a remote dropped
# by SIGHUP (reload_settings) must not leave its keep-alive socket to the garbage collector.
DROP_REMOTE = r'''
import gc, sys
from webapp.app import make_app
from webapp.settings import load_settings
from tests.webapp.helpers import call
unraisable = []
sys.unraisablehook = lambda hook: unraisable.append(repr(hook.exc_value))
path, remote = sys.argv[1], sys.argv[2]
def write(servers):
    with open(path, 'w') as out:
        out.write('STORAGE_DIR = %r\nCARBONLINK_HOSTS = []\nCLUSTER_SERVERS = %r\n'
                  % (sys.argv[3], servers))
write([remote])
app = make_app(load_settings(path))
status, headers, body = call(app, '/metrics/find', {'query': 'hup.*'})
assert status == 200 and b'hup.remote' in body, (status, body)
assert 'X-Graphite-Failed-Hosts' not in headers
write([])
assert app.reload_settings(path) == ["SIGHUP: CLUSTER_SERVERS changed from ['%s'] to []" % remote]
gc.collect()
print('after reload:', unraisable)
app.close()
gc.collect()
sys.exit(1 if unraisable else 0)
'''


def test_sighup_closes_the_dropped_remotes_connection(tmp_path: Any, base_time: int) -> None:
    remote = RenderProcess(tmp_path / 'remote', 'hup.remote', base_time)
    try:
        done = subprocess.run(
            [sys.executable, '-W', 'error::ResourceWarning', '-c', DROP_REMOTE,
             str(tmp_path / 'front.py'), remote.address, str(tmp_path)],
            capture_output=True, text=True, timeout=60, cwd=str(ROOT),
            env=dict(os.environ, PYTHONPATH=str(ROOT)))
    finally:
        stop_server(remote.proc)
    assert done.returncode == 0, done.stdout + done.stderr
    assert 'ResourceWarning' not in done.stderr and 'after reload: []' in done.stdout
