"""The reference's own code, run from its own venvs: carbon 1.1.10 and graphite-web 1.1.10.

The venvs are made on first use by bench/common.py (under ~/.cache). A piece that cannot
be installed fails the tests that need it under CI (CI=true) and skips them elsewhere.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import pytest

from tests.support import ROOT, free_port, port_open, wait_for
from tests.webapp.helpers import stop_server

sys.path.insert(0, str(ROOT / "bench"))
from common import CACHE_DIR, graphite_web_venv, reference_venv  # noqa: E402


def require(install: Callable[[], Any], what: str) -> Any:
    """``install()``, or fail (under CI) / skip (elsewhere) naming ``what``."""
    try:
        return install()
    except Exception as exc:  # any install failure: pip, interpreter, network
        message = "%s could not be installed: %s" % (what, exc)
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(message)
        pytest.skip(message)


def carbon_venv() -> Path:
    return require(reference_venv, "carbon 1.1.10")


def web_venv() -> Path:
    return require(graphite_web_venv, "graphite-web 1.1.10")


def run_reference(venv: Path, script: str, payload: Any, env: dict | None = None,
                  timeout: float = 60) -> Any:
    """Run ``script`` on the venv's Python with ``payload`` as JSON on stdin; its JSON
    stdout is returned."""
    # run from the venv's folder: our own ``carbon`` package must not shadow carbon 1.1.10
    done = subprocess.run([str(venv / "bin" / "python"), "-c", script],
                          input=json.dumps(payload), capture_output=True, text=True,
                          timeout=timeout, env=env or reference_env(), cwd=str(venv))
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def reference_env(**extra: str) -> dict:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8",
           "HOME": os.environ.get("HOME", "/tmp")}
    env.update(extra)
    return env


UNPICKLE = r"""
import base64, json, sys
from graphite.util import unpickle
out = []
for item in json.load(sys.stdin):
    try:
        out.append(["ok", repr(unpickle.loads(base64.b64decode(item)))])
    except Exception as exc:
        out.append(["error", "%s: %s" % (type(exc).__name__, exc)])
print(json.dumps(out))
"""


def graphite_web_settings(folder: Path, **settings: Any) -> dict:
    """An environment for graphite-web 1.1.10 whose settings module (in ``folder``, not in
    the shared venv) holds ``settings`` on top of test-friendly defaults."""
    folder.mkdir(parents=True, exist_ok=True)
    storage = Path(settings.pop("STORAGE_DIR", folder / "storage"))
    values = {"SECRET_KEY": "interop-tests", "TIME_ZONE": "UTC",
              "STORAGE_DIR": str(storage), "WHISPER_DIR": str(storage / "whisper") + "/",
              "LOG_DIR": str(folder / "log"), "INDEX_FILE": str(folder / "index"),
              "CARBONLINK_HOSTS": [], "CLUSTER_SERVERS": [], "TAGDB": "",
              "DATABASES": {"default": {"NAME": str(folder / "graphite.db"),
                                        "ENGINE": "django.db.backends.sqlite3"}}}
    values.update(settings)
    # graphite-web reads WHISPER_DIR only if it exists when it starts (STANDARD_DIRS)
    Path(values["WHISPER_DIR"]).mkdir(parents=True, exist_ok=True)
    (folder / "log").mkdir(exist_ok=True)
    module = "interop_gw_settings"
    (folder / (module + ".py")).write_text(
        "".join("%s = %r\n" % item for item in values.items()))
    return reference_env(PYTHONPATH=str(folder), GRAPHITE_SETTINGS_MODULE=module,
                         DJANGO_SETTINGS_MODULE="graphite.settings")


def reference_unpickle(folder: Path, payloads: list[bytes]) -> list[tuple[str, str]]:
    """Each payload loaded by graphite-web 1.1.10's own unpickler (graphite.util.unpickle,
    what its carbonlink client uses): ("ok", repr) or ("error", message)."""
    venv = web_venv()
    env = graphite_web_settings(folder)
    got = run_reference(venv, UNPICKLE, [base64.b64encode(p).decode() for p in payloads],
                        env=env)
    return [tuple(item) for item in got]


def statsd_install() -> Path:
    """statsd 0.9.0 from npm, installed once into the benchmark cache folder; returns its
    stats.js."""
    folder = CACHE_DIR / "statsd-0.9.0"
    script = folder / "node_modules" / "statsd" / "stats.js"
    if not script.exists():
        done = subprocess.run(["npm", "install", "--prefix", str(folder), "--no-save",
                               "--omit=optional", "--no-audit", "--no-fund", "statsd@0.9.0"],
                              capture_output=True, text=True, timeout=300)
        if done.returncode != 0 or not script.exists():
            raise RuntimeError("npm install statsd@0.9.0 failed: %s" % done.stderr[-2000:])
    return script


class GraphiteWeb:
    """graphite-web 1.1.10 as a real process (Django's server, no autoreload)."""

    def __init__(self, folder: Path, port: int | None = None, **settings: Any) -> None:
        venv = web_venv()
        self.port = port or free_port()
        env = graphite_web_settings(folder, **settings)
        self.settings_file = folder / (env["GRAPHITE_SETTINGS_MODULE"] + ".py")
        # its own SQLite database (users, profiles): about a second
        subprocess.run([str(venv / "bin" / "django-admin"), "migrate", "-v", "0",
                        "--run-syncdb"], env=env, cwd=str(folder), check=True,
                       capture_output=True, timeout=120)
        self.log = open(folder / "server.log", "w")
        self.proc = subprocess.Popen(
            [str(venv / "bin" / "django-admin"), "runserver", "--noreload", "--nothreading",
             "127.0.0.1:%d" % self.port], env=env, cwd=str(folder), stdout=self.log,
            stderr=subprocess.STDOUT)
        self.folder = folder
        try:
            wait_for(lambda: self.proc.poll() is not None or port_open(self.port),
                     timeout=60, what="graphite-web to listen")
        except AssertionError:
            self.stop()
            raise
        assert self.proc.poll() is None, self.output()

    def url(self, path: str) -> str:
        return "http://127.0.0.1:%d%s" % (self.port, path)

    def output(self) -> str:
        if not self.log.closed:
            self.log.flush()
        return (self.folder / "server.log").read_text()

    def stop(self) -> None:
        stop_server(self.proc)
        self.log.close()


class ReferenceCarbon:
    """A carbon 1.1.10 daemon (carbon-cache.py, carbon-relay.py ...) in the foreground."""

    def __init__(self, root: Path, program: str, section: str, **settings: Any) -> None:
        venv = carbon_venv()
        self.root = root
        conf = root / "conf"
        conf.mkdir(parents=True, exist_ok=True)
        (conf / "storage-schemas.conf").write_text("[all]\npattern = .*\nretentions = 60:1d\n")
        (conf / "storage-aggregation.conf").write_text("")
        self.ports = {key: free_port() for key in ("LINE_RECEIVER_PORT", "PICKLE_RECEIVER_PORT",
                                                    "CACHE_QUERY_PORT")}
        values: dict[str, Any] = {"USER": "", "CARBON_METRIC_INTERVAL": 0,
                                  "LINE_RECEIVER_INTERFACE": "127.0.0.1",
                                  "PICKLE_RECEIVER_INTERFACE": "127.0.0.1",
                                  "CACHE_QUERY_INTERFACE": "127.0.0.1",
                                  "LOCAL_DATA_DIR": str(root / "whisper"),
                                  "LOG_UPDATES": False, "LOG_CACHE_HITS": False}
        values.update(self.ports)
        values.update(settings)
        (conf / "carbon.conf").write_text("[%s]\n%s\n" % (section, "".join(
            "%s = %s\n" % item for item in values.items())))
        self.log = open(root / "stdout.log", "w")
        self.proc = subprocess.Popen(
            [str(venv / "bin" / "python"), str(venv / "bin" / program), "--config",
             str(conf / "carbon.conf"), "--nodaemon", "start"],
            env=reference_env(GRAPHITE_ROOT=str(root)), stdout=self.log,
            stderr=subprocess.STDOUT)
        port = self.ports["PICKLE_RECEIVER_PORT"]
        try:
            wait_for(lambda: self.proc.poll() is not None or port_open(port), timeout=60,
                     what="%s to listen" % program)
        except AssertionError:
            self.stop()
            raise
        assert self.proc.poll() is None, (root / "stdout.log").read_text()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self.log.close()
