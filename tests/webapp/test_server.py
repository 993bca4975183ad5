"""Settings files and the ``graphite-render`` Twisted server as a real process."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from carbon.config.errors import ConfigError
from tests.webapp.helpers import call, http_get, make_whisper, stop_server
from webapp.settings import load_settings

ROOT = Path(__file__).resolve().parents[2]


def write(tmp_path: Any, text: str) -> str:
    path = tmp_path / 'local_settings.py'
    path.write_text(text)
    return str(path)


def test_settings_file_and_derived_values(tmp_path: Any) -> None:
    path = write(tmp_path, 'import os\nSTORAGE_DIR = %r\nCARBONLINK_HOSTS = ["10.0.0.1:7002:a",'
                 ' "[::1]:7102"]\nCLUSTER_SERVERS = ["h1:8080"]\nREMOTE_FETCH_TIMEOUT = 9\n'
                 'TIME_ZONE = "Europe/Paris"\nSECRET_KEY = "ignored"\nlowercase = 1\n'
                 % str(tmp_path))
    settings = load_settings(path)
    assert settings.WHISPER_DIR == str(tmp_path / 'whisper')
    assert settings.TAGDB_SQLITE_PATH == str(tmp_path / 'graphite.db')
    assert settings.FETCH_TIMEOUT == 9.0 and settings.FIND_TIMEOUT == 3.0
    assert settings.CLUSTER_SERVERS == ['h1:8080'] and settings.TIME_ZONE == 'Europe/Paris'
    assert 'lowercase' not in settings
    assert load_settings(path, TIME_ZONE='UTC').TIME_ZONE == 'UTC'
    assert load_settings(None).WHISPER_DIR == '/opt/graphite/storage/whisper'


@pytest.mark.parametrize('text, fragment', [
    ('X = (\n', 'line 1'),
    ('A = 1\nraise RuntimeError("nope")\n', 'line 2'),
    ('CARBONLINK_HOST = ["a:1"]\n', 'did you mean CARBONLINK_HOSTS'),
    ('CARBONLINK_HOSTS = ["nocolon"]\n', 'CARBONLINK_HOSTS'),
    ('CARBONLINK_TIMEOUT = "soon"\n', 'must be a number'),
    ('TIME_ZONE = "Mars/Base"\n', 'unknown time zone'),
    ('CARBONLINK_HASHING_TYPE = "md5"\n', 'unknown hashing type'),
])
def test_settings_errors_name_file_and_line(tmp_path: Any, text: str, fragment: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_settings(path)
    assert fragment in str(info.value) and path in str(info.value)


def test_wsgi_module_reads_environment(tmp_path: Any, monkeypatch: Any) -> None:
    make_whisper(str(tmp_path / 'whisper'), 'a.b', [])
    path = write(tmp_path, 'STORAGE_DIR = %r\nCARBONLINK_HOSTS = []\n' % str(tmp_path))
    monkeypatch.setenv('GRAPHITE_SETTINGS', path)
    sys.modules.pop('webapp.wsgi', None)
    module = importlib.import_module('webapp.wsgi')
    try:
        status, _, body = call(module.application, '/metrics/index.json')
        assert json.loads(body) == ['a.b']
    finally:
        module.application.close()
        sys.modules.pop('webapp.wsgi', None)


def test_graphite_render_process(tmp_path: Any, base_time: int) -> None:
    make_whisper(str(tmp_path / 'whisper'), 'proc.m', [(base_time, 7.0)])
    path = write(tmp_path, 'STORAGE_DIR = %r\nCARBONLINK_HOSTS = []\n' % str(tmp_path))
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, '-m', 'webapp.server', '--config', path,
                             '--port', '0'], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=env, cwd=str(ROOT), text=True)
    try:
        line = proc.stdout.readline()
        assert 'listening on http://127.0.0.1:' in line, proc.stderr.read()
        base = line.strip().split()[-1].rstrip('/')
        status, _, body = http_get(base + '/render?target=proc.m&format=json&from=%d&until=%d'
                                   % (base_time - 60, base_time))
        assert status == 200 and json.loads(body)[0]['datapoints'] == [[7.0, base_time]]
        status, headers, body = http_get(base + '/render?target=bad(&format=json')
        assert status == 400 and headers['Content-Type'].startswith('text/plain')
        assert http_get(base + '/version')[2] == b'1.1.10\n'
        body = b'target=proc.m&format=json&from=%d&until=%d' % (base_time - 60, base_time)
        status, _, answer = http_get(base + '/render', data=body, headers={
            'Content-Type': 'application/x-www-form-urlencoded'})
        assert status == 200 and json.loads(answer)[0]['target'] == 'proc.m'
        big = slow_get(base + '/render?target=identity("i")&format=json&from=-1y')
        points = json.loads(big)[0]['datapoints']    # ~13 MB, paced out to a slow reader
        assert len(big) > 3 * (4 << 20) and len(points) >= 525600
        assert all(value == stamp for value, stamp in points)
    finally:
        stop_server(proc)
    assert proc.returncode == 0


def slow_get(url: str) -> bytes:
    """The body of a GET read 64 KB at a time with a pause between reads."""
    import http.client
    import time
    from urllib.parse import urlsplit
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    try:
        conn.request('GET', parts.path + '?' + parts.query)
        resp = conn.getresponse()
        assert resp.status == 200
        # printed while it is sent (webapp.readahead): chunked, no length up front
        assert resp.getheader('Transfer-Encoding') == 'chunked'
        chunks = []
        while True:
            chunk = resp.read(65536)
            if not chunk:
                return b''.join(chunks)
            chunks.append(chunk)
            time.sleep(0.0005)
    finally:
        conn.close()


def test_graphite_render_bad_config(tmp_path: Any) -> None:
    path = write(tmp_path, 'CARBONLINK_HOSTS = ["x"]\n')
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    result = subprocess.run([sys.executable, '-m', 'webapp.server', '--config', path],
                            capture_output=True, text=True, env=env, cwd=str(ROOT), timeout=30)
    assert result.returncode == 2 and 'CARBONLINK_HOSTS' in result.stderr


def children_of(pid: int) -> list[int]:
    with open('/proc/%d/task/%d/children' % (pid, pid)) as fh:
        return [int(p) for p in fh.read().split()]


def wait_for(check: Any, timeout: float = 10.0) -> Any:
    import time
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError('condition not met in %.0f s' % timeout)


def test_graphite_render_workers(tmp_path: Any, base_time: int) -> None:
    """--workers 2: two processes answer on one port; a SIGHUP as soon as the port is
    announced is applied by each worker once it can (it used to end a starting worker), a
    later one reaches both, a killed worker is replaced by one that reads the settings as
    reloaded, SIGTERM stops them all."""
    import signal
    from concurrent.futures import ThreadPoolExecutor
    from tests.support import free_port
    make_whisper(str(tmp_path / 'whisper'), 'proc.m', [(base_time, 7.0)])
    path = write(tmp_path, 'STORAGE_DIR = %r\nCARBONLINK_HOSTS = []\n' % str(tmp_path))
    errors = open(tmp_path / 'stderr.log', 'w')
    proc = subprocess.Popen([sys.executable, '-m', 'webapp.server', '--config', path,
                             '--port', '0', '--workers', '2', '--threads', '2'],
                            stdout=subprocess.PIPE, stderr=errors, env=dict(
                                os.environ, PYTHONPATH=str(ROOT)), cwd=str(ROOT), text=True)
    errors.close()

    def log() -> str:
        return (tmp_path / 'stderr.log').read_text()

    def reloads() -> list[str]:
        return [line.split('SIGHUP: ', 1)[1] for line in log().splitlines()
                if 'SIGHUP: CLUSTER_SERVERS changed' in line]

    def reconfigure() -> str:
        servers = '["127.0.0.1:%d"]' % free_port()
        with open(path, 'a') as fh:
            fh.write('CLUSTER_SERVERS = %s\n' % servers)
        proc.send_signal(signal.SIGHUP)
        return servers.replace('"', "'")
    try:
        line = proc.stdout.readline()
        assert '(2 workers)' in line, log()
        url = line.split()[3] + 'render?target=proc.m&format=json&from=%d&until=%d' % (
            base_time - 60, base_time)
        # at once: the workers are not forked yet or still building their apps
        servers = reconfigure()
        first = wait_for(lambda: len(children_of(proc.pid)) == 2 and children_of(proc.pid))
        wait_for(lambda: len(reloads()) == 2 or 'exited' in log(), timeout=60)
        assert children_of(proc.pid) == first and 'exited' not in log(), log()
        with ThreadPoolExecutor(8) as pool:
            answers = list(pool.map(lambda _: http_get(url), range(16)))
        assert all(a[0] == 200 and json.loads(a[2])[0]['datapoints'] == [[7.0, base_time]]
                   for a in answers)
        # each running worker applies a SIGHUP
        later = reconfigure()
        wait_for(lambda: reloads()[2:] == ['CLUSTER_SERVERS changed from %s to %s' % (
            servers, later)] * 2, timeout=60)
        # a worker killed is replaced, with the reloaded settings; the port keeps answering
        os.kill(first[0], signal.SIGKILL)
        now = wait_for(lambda: len(children_of(proc.pid)) == 2 and
                       first[0] not in children_of(proc.pid) and children_of(proc.pid),
                       timeout=60)
        assert first[1] in now and 'worker %d exited with status -9; starting another' % \
            first[0] in log()
        wait_for(lambda: reloads()[4:] == ['CLUSTER_SERVERS changed from [] to %s' % later],
                 timeout=60)
        assert http_get(url)[0] == 200
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == 0
        for pid in now:
            assert not os.path.exists('/proc/%d/status' % pid) or \
                'zombie' in open('/proc/%d/status' % pid).read()
    finally:
        stop_server(proc)


def test_graphite_render_workers_port_in_use(tmp_path: Any) -> None:
    import socket
    path = write(tmp_path, 'STORAGE_DIR = %r\nCARBONLINK_HOSTS = []\n' % str(tmp_path))
    with socket.socket() as taken:
        taken.bind(('127.0.0.1', 0))
        taken.listen(1)
        result = subprocess.run([sys.executable, '-m', 'webapp.server', '--config', path,
                                 '--port', str(taken.getsockname()[1]), '--workers', '2'],
                                capture_output=True, text=True, timeout=30,
                                env=dict(os.environ, PYTHONPATH=str(ROOT)), cwd=str(ROOT))
    assert result.returncode == 1 and 'cannot listen on 127.0.0.1' in result.stderr
