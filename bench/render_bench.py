"""Render benchmark: this app against graphite-web 1.1.10 over the same whisper tree.

    python bench/render_bench.py [--series 200] [--duration 4] [--concurrency 4]
                                 [--threads 4] [--workdir ~/.cache/render-bench]
                                 [--skip-graphite] [--skip-gunicorn] [--skip-twisted]
                                 [--rounds 2]

The script builds everything it needs outside the repository (under --workdir): a
whisper tree of N series x 1 day at 60 s and gunicorn (pip --target, run on this
interpreter) for this app; graphite-web 1.1.10 runs from bench/common.py's shared
Python 3.9 venv (Django 2.2, pyparsing 2.4.7, cairocffi, plus gunicorn).
Servers measured, each ONE process with T threads so
they get the same CPU:

* graphite-web under ``gunicorn --workers 1 --threads T`` (gthread)
* this app under the same gunicorn configuration (``webapp.wsgi:application``)
* this app's embedded Twisted server (``python -m webapp.server --threads T``)

Scenarios: format=json of all series, ``sumSeries`` of them, and all series with
maxDataPoints=300. Before measuring, every server's response BODY BYTES are compared
with graphite-web's. Load is a closed loop of C keep-alive raw-socket clients
(``bench/render_load.py``: headers parsed, bodies discarded unparsed) for D seconds;
reported: requests/s, p50/p99 latency and the server's CPU time per request (less
sensitive than requests/s to other load on a shared machine). The servers run forwards,
then backwards (``--rounds 2``: A B C C B A); each figure is the mean over the rounds.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Optional
from urllib.parse import urlencode

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import ROOT, free_port, graphite_web_venv, mirrored  # noqa: E402
from render_load import fetch, load  # noqa: E402


def log(msg: str) -> None:
    print('[render-bench] %s' % msg, file=sys.stderr, flush=True)


def run(cmd: list[str], **kw: Any) -> None:
    log('$ ' + ' '.join(cmd))
    subprocess.run(cmd, check=True, **kw)


def build_tree(workdir: Path, series: int) -> tuple[Path, int]:
    """N series x 1 day at 60 s; rebuilt when missing or older than 6 hours."""
    import whisper
    storage = workdir / 'storage'
    root = storage / 'whisper'
    stamp = storage / 'built-at'
    now = int(time.time())
    if stamp.exists() and now - int(stamp.read_text()) < 6 * 3600 and \
            len(list(root.glob('bench/*/cpu.wsp'))) == series:
        return storage, int(stamp.read_text())
    shutil.rmtree(root, ignore_errors=True)
    log('writing %d whisper files' % series)
    for i in range(series):
        path = root / 'bench' / ('host%03d' % i) / 'cpu.wsp'
        path.parent.mkdir(parents=True, exist_ok=True)
        whisper.create(str(path), [(60, 1440 * 2), (300, 2016)])
        points = [(now - j * 60, float((j * 7 + i) % 101)) for j in range(1440)
                  if (j + i) % 53]
        whisper.update_many(str(path), points)
    stamp.write_text(str(now))
    return storage, now


def setup_graphite(workdir: Path, storage: Path) -> tuple[Path, dict]:
    """graphite-web 1.1.10's venv (bench/common.py, shared, with gunicorn) and the
    environment that gives it this run's settings module (in workdir, not in the venv)."""
    venv = graphite_web_venv(extra=('gunicorn',))
    (workdir / 'bench_gw_settings.py').write_text(
        'SECRET_KEY = "bench"\nSTORAGE_DIR = %r\nWHISPER_DIR = %r\nLOG_DIR = %r\n'
        'CARBONLINK_HOSTS = []\nTIME_ZONE = "UTC"\n'
        % (str(storage), str(storage / 'whisper') + '/', str(workdir / 'gw-log')))
    (workdir / 'gw-log').mkdir(exist_ok=True)
    env = dict(os.environ, DJANGO_SETTINGS_MODULE='graphite.settings', PYTHONPATH=str(workdir),
               GRAPHITE_SETTINGS_MODULE='bench_gw_settings')
    migrate = [str(venv / 'bin/django-admin'), 'migrate', '-v', '0', '--run-syncdb']
    try:
        run(migrate, env=env, cwd=str(workdir))
    except subprocess.CalledProcessError:
        # seen once on a fresh venv ("table tags_series already exists"): start the
        # database over and migrate again
        (storage / 'graphite.db').unlink(missing_ok=True)
        run(migrate, env=env, cwd=str(workdir))
    return venv, env


def setup_ours_gunicorn(workdir: Path) -> Path:
    """gunicorn installed into a private directory used on this interpreter's PYTHONPATH."""
    target = workdir / 'gunicorn-lib'
    marker = target / '.installed'
    if not marker.exists():
        shutil.rmtree(target, ignore_errors=True)
        run([sys.executable, '-m', 'pip', 'install', '-q', '--target', str(target), 'gunicorn'])
        marker.write_text('ok')
    return target


class Server:
    def __init__(self, name: str, cmd: list[str], env: dict, port: int) -> None:
        self.name, self.port = name, port
        self.log = open(Path(env['BENCH_WORKDIR']) / ('%s.log' % name.replace(' ', '_')), 'w')
        self.proc = subprocess.Popen(cmd, env=env, stdout=self.log, stderr=subprocess.STDOUT,
                                     cwd=env.get('BENCH_CWD'))
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(('127.0.0.1', port), timeout=0.5):
                    return
            except OSError:
                if self.proc.poll() is not None:
                    raise SystemExit('%s exited early, see %s' % (name, self.log.name))
                time.sleep(0.2)
        raise SystemExit('%s did not start' % name)

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
        self.log.close()


def tree_cpu(pid: int) -> float:
    """User + system CPU seconds of a process and its live descendants."""
    total = 0.0
    try:
        with open('/proc/%d/stat' % pid) as fh:
            fields = fh.read().rsplit(')', 1)[1].split()
        total += sum(int(fields[i]) for i in (11, 12)) / os.sysconf('SC_CLK_TCK')
        children: list[int] = []
        for task in os.listdir('/proc/%d/task' % pid):
            with open('/proc/%d/task/%s/children' % (pid, task)) as fh:
                children += [int(c) for c in fh.read().split()]
    except OSError:
        return total
    return total + sum(tree_cpu(c) for c in children)


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--series', type=int, default=200)
    parser.add_argument('--duration', type=float, default=4.0)
    parser.add_argument('--concurrency', type=int, default=4)
    parser.add_argument('--threads', type=int, default=4)
    parser.add_argument('--workdir', default=os.path.expanduser('~/.cache/render-bench'))
    parser.add_argument('--skip-graphite', action='store_true')
    parser.add_argument('--skip-gunicorn', action='store_true')
    parser.add_argument('--skip-twisted', action='store_true')
    parser.add_argument('--only', default='', help='comma-separated scenario names to run '
                        '(json, sum, mdp); default all')
    parser.add_argument('--baseline-root', help='also measure this app from another checkout '
                        '(e.g. an export of the previous commit), under gunicorn')
    parser.add_argument('--rounds', type=int, default=2,
                        help='run the servers forwards, then backwards, ...')
    args = parser.parse_args(argv)
    workdir = Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    storage, now = build_tree(workdir, args.series)
    ours_conf = workdir / 'ours_settings.py'
    ours_conf.write_text('STORAGE_DIR = %r\nCARBONLINK_HOSTS = []\nLOG_LEVEL = "WARNING"\n'
                         % str(storage))
    base_env = dict(os.environ, BENCH_WORKDIR=str(workdir), PYTHONPATH=str(ROOT),
                    GRAPHITE_SETTINGS=str(ours_conf))
    servers: list[tuple[str, list[str], dict]] = []
    if not args.skip_graphite:
        gw, gw_env = setup_graphite(workdir, storage)
        servers.append(('graphite-web 1.1.10 (gunicorn)', [
            str(gw / 'bin/gunicorn'), '--workers', '1', '--threads', str(args.threads),
            '--worker-class', 'gthread', '--log-level', 'warning', 'graphite.wsgi:application'],
            dict(base_env, DJANGO_SETTINGS_MODULE='graphite.settings',
                 PYTHONPATH=gw_env['PYTHONPATH'],
                 GRAPHITE_SETTINGS_MODULE=gw_env['GRAPHITE_SETTINGS_MODULE'],
                 BENCH_CWD=str(workdir))))
    if not args.skip_gunicorn:
        lib = setup_ours_gunicorn(workdir)
        servers.append(('this app (gunicorn)', [
            sys.executable, '-m', 'gunicorn', '--workers', '1', '--threads', str(args.threads),
            '--worker-class', 'gthread', '--log-level', 'warning', 'webapp.wsgi:application'],
            dict(base_env, BENCH_CWD=str(ROOT), PYTHONPATH='%s:%s' % (ROOT, lib))))
    if args.baseline_root:
        lib = setup_ours_gunicorn(workdir)
        servers.append(('this app, baseline (gunicorn)', [
            sys.executable, '-m', 'gunicorn', '--workers', '1', '--threads', str(args.threads),
            '--worker-class', 'gthread', '--log-level', 'warning', 'webapp.wsgi:application'],
            dict(base_env, BENCH_CWD=args.baseline_root,
                 PYTHONPATH='%s:%s' % (args.baseline_root, lib))))
    if not args.skip_twisted:
        servers.append(('this app (twisted)', [sys.executable, '-m', 'webapp.server',
                                               '--config', str(ours_conf), '--threads',
                                               str(args.threads)],
                        dict(base_env, BENCH_CWD=str(ROOT))))
    window = {'from': now - 86400, 'until': now, 'now': now, 'format': 'json'}
    scenarios = [
        ('json %d series' % args.series, dict(window, target='bench.*.cpu')),
        ('sumSeries', dict(window, target='sumSeries(bench.*.cpu)')),
        ('maxDataPoints=300', dict(window, target='bench.*.cpu', maxDataPoints=300)),
    ]
    if args.only:
        wanted = {'json': 0, 'sum': 1, 'mdp': 2}
        scenarios = [scenarios[wanted[w]] for w in args.only.split(',')]
    runs: dict[str, dict[str, list[dict[str, Any]]]] = {}
    answers: dict[str, dict[str, bytes]] = {}
    for name, cmd, env in mirrored(servers, args.rounds):
        port = free_port()
        if 'gunicorn' in name:
            cmd = cmd + ['--bind', '127.0.0.1:%d' % port]
        else:
            cmd = cmd + ['--port', str(port)]
        log('starting %s on port %d' % (name, port))
        server = Server(name, cmd, env, port)
        try:
            for label, params in scenarios:
                path = '/render?' + urlencode(params)
                status, body = fetch(port, path)
                if status != 200:
                    raise SystemExit('%s answered %d to %s: %r' % (name, status, label,
                                                                    body[:300]))
                answers.setdefault(label, {})[name] = body
                for _ in range(2):
                    fetch(port, path)
                cpu0 = tree_cpu(server.proc.pid)
                result = load(port, path, args.duration, args.concurrency)
                result['cpu_ms'] = (tree_cpu(server.proc.pid) - cpu0) * 1000 / \
                    max(1, result['requests'])
                runs.setdefault(label, {}).setdefault(name, []).append(result)
                log('%s / %s: %s' % (name, label, result))
        finally:
            server.stop()
    results = {label: {name: mean_result(found) for name, found in by_server.items()}
               for label, by_server in runs.items()}
    return 0 if report(args, results, answers) else 1


def mean_result(found: list[dict[str, Any]]) -> dict[str, Any]:
    """The mean of each figure over a server's rounds (errors summed)."""
    out = {key: sum(r[key] for r in found) / len(found)
           for key in ('rps', 'p50_ms', 'p99_ms', 'cpu_ms')}
    out['errors'] = sum(r['errors'] for r in found)
    return out


def report(args: argparse.Namespace, results: dict[str, dict[str, Any]],
           answers: dict[str, dict[str, bytes]]) -> bool:
    """Print the table (ratios against graphite-web) and the byte comparison; True if same."""
    base_name = 'graphite-web 1.1.10 (gunicorn)'
    print('\nServers: one process each, %d threads (gunicorn gthread --workers 1 --threads %d;'
          ' twisted --threads %d). Clients: %d raw-socket keep-alive connections in one '
          'process, closed loop, %.0f s per scenario, bodies read but not parsed. '
          '%d series x 1 day at 60 s.'
          % (args.threads, args.threads, args.threads, args.concurrency, args.duration,
             args.series))
    print('\n| scenario | server | req/s | vs graphite-web | p50 ms | p99 ms | server CPU '
          'ms/req | errors |')
    print('| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |')
    for label, by_server in results.items():
        base = by_server.get(base_name)
        for name, r in by_server.items():
            ratio = '%.1fx' % (r['rps'] / base['rps']) if base and base['rps'] else '-'
            print('| %s | %s | %.1f | %s | %.0f | %.0f | %.1f | %d |' % (
                label, name, r['rps'], ratio, r['p50_ms'], r['p99_ms'], r['cpu_ms'],
                r['errors']))
    all_same = True
    for label, by_server in answers.items():
        names = list(by_server)
        same = all(by_server[n] == by_server[names[0]] for n in names[1:])
        all_same = all_same and same
        print('%s: response bytes %s across %s (%d bytes)' % (
            label, 'IDENTICAL' if same else 'DIFFER', ', '.join(names),
            len(by_server[names[0]])))
    return all_same


if __name__ == '__main__':
    sys.exit(main())
