"""The shipped conf/ in a temporary GRAPHITE_ROOT, unchanged, and its fixed ports."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from tests.support import CONF, ROOT, port_open, wait_for

sys.path.insert(0, str(ROOT / "tools"))
from demo import port_free  # noqa: E402  (the demo's own check: both agree on "free")

# TCP ports the shipped carbon.conf listens on (relay, rules relay, caches a and b,
# aggregator, aggregator-cache), all on 127.0.0.1.
SHIPPED_PORTS = {
    "relay line": 2013, "relay pickle": 2014,
    "relay:rules line": 2113, "relay:rules pickle": 2114,
    "cache a line": 2003, "cache a pickle": 2004, "cache a carbonlink": 7002,
    "cache b line": 2103, "cache b pickle": 2104, "cache b carbonlink": 7102,
    "aggregator line": 2023, "aggregator pickle": 2025,
    "aggregator-cache line": 2033, "aggregator-cache pickle": 2034,
    "aggregator-cache carbonlink": 7032,
}
BIN = Path(sys.executable).parent


def require_free_ports(names: list[str] | None = None) -> None:
    """Fail naming every shipped port that is taken: these tests run conf/ as shipped,
    so they cannot move to free ports."""
    taken = ["%s (%s)" % (SHIPPED_PORTS[name], name) for name in names or list(SHIPPED_PORTS)
             if not port_free(SHIPPED_PORTS[name])]
    assert not taken, ("this test runs conf/ as shipped and needs these ports of 127.0.0.1 "
                       "free: %s" % ", ".join(taken))


def shipped_root(tmp: Path) -> Path:
    """A GRAPHITE_ROOT whose conf/ is a byte-for-byte copy of the repository's conf/."""
    shutil.copytree(CONF, tmp / "conf")
    for path in CONF.iterdir():
        assert (tmp / "conf" / path.name).read_bytes() == path.read_bytes()
    return tmp


def stack_env(root: Path) -> dict:
    env = dict(os.environ, GRAPHITE_ROOT=str(root), PYTHONPATH=str(ROOT))
    env.pop("GRAPHITE_STORAGE_DIR", None)
    env.pop("GRAPHITE_CONF_DIR", None)
    return env


class Foreground:
    """Daemons started in the foreground (--nodaemon) for one test; stopped by PID."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.procs: list[subprocess.Popen] = []

    def start(self, argv: list[str], port: int) -> subprocess.Popen:
        log = open(self.root / ("%s-%d.out" % (Path(argv[0]).name, port)), "w")
        proc = subprocess.Popen(argv, env=stack_env(self.root), stdout=log,
                                stderr=subprocess.STDOUT, cwd=self.root)
        self.procs.append(proc)
        wait_for(lambda: proc.poll() is not None or port_open(port), 60,
                 what="%s to listen on %d" % (" ".join(argv[:3]), port))
        assert proc.poll() is None, log.name + ": " + Path(log.name).read_text()
        return proc

    def stop(self) -> None:
        for proc in reversed(self.procs):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)


def get_json(url: str, timeout: float = 30) -> object:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=10) as response:
                return json.loads(response.read())
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


# the shipped relay -> caches a and b, and the ports they listen on
RELAY_AND_CACHES = ["relay line", "relay pickle", "cache a line", "cache a pickle",
                    "cache a carbonlink", "cache b line", "cache b pickle", "cache b carbonlink"]


def start_relay_and_caches(stack: Foreground) -> None:
    """carbon-cache a and b, then carbon-relay, in the foreground from the shipped conf/
    (their ports were checked free with ``require_free_ports(RELAY_AND_CACHES)``)."""
    stack.start([str(BIN / "carbon-cache.py"), "--instance=a", "--nodaemon", "start"],
                SHIPPED_PORTS["cache a carbonlink"])
    stack.start([str(BIN / "carbon-cache.py"), "--instance=b", "--nodaemon", "start"],
                SHIPPED_PORTS["cache b carbonlink"])
    stack.start([str(BIN / "carbon-relay.py"), "--nodaemon", "start"],
                SHIPPED_PORTS["relay line"])
