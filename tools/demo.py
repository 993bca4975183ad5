"""Run carbon-cache with conf/ (loopback only), feed it, and show the stored points."""

from __future__ import annotations

import os
import pickle
import re
import shutil
import socket
import struct
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import whisper

ROOT = Path(__file__).resolve().parent.parent
RUN = ROOT / "demo-run"


def loopback_conf(text: str) -> str:
    """The shipped carbon.conf with every interface on 127.0.0.1 and fast writes."""
    text = re.sub(r"(?m)^(\w+_INTERFACE) = 0\.0\.0\.0$", r"\1 = 127.0.0.1", text)
    return text.replace("[cache]\n", "[cache]\nCARBON_METRIC_INTERVAL = 10\n", 1)


def query(port: int, request: dict) -> dict:
    body = pickle.dumps(request, protocol=2)
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(struct.pack("!I", len(body)) + body)
        data = b""
        while len(data) < 4 or len(data) < 4 + struct.unpack("!I", data[:4])[0]:
            data += sock.recv(65536)
    return pickle.loads(data[4:])


def render_json(whisper_dir: Path, now: int) -> str:
    """Start graphite-render on 127.0.0.1 and ask /render for the demo series as JSON."""
    port = free_port()
    settings = RUN / "conf" / "local_settings.py"
    settings.write_text("WHISPER_DIR = %r\nCARBONLINK_HOSTS = ['127.0.0.1:7002:a']\n"
                        % str(whisper_dir))
    render = [str(Path(sys.executable).parent / "graphite-render"), "--config", str(settings),
              "--bind", "127.0.0.1", "--port", str(port)]
    server = subprocess.Popen(render, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    try:
        url = ("http://127.0.0.1:%d/render?target=sumSeries(demo.servers.*.cpu)&from=%d"
               "&until=%d&format=json" % (port, now - 360, now))
        deadline = time.time() + 30
        while True:
            try:
                with urllib.request.urlopen(url, timeout=5) as response:
                    return "GET %s\n%s" % (url, response.read().decode())
            except OSError:
                if time.time() > deadline or server.poll() is not None:
                    return "graphite-render did not answer"
                time.sleep(0.2)
    finally:
        server.terminate()
        server.wait(10)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def main() -> int:
    shutil.rmtree(RUN, ignore_errors=True)
    (RUN / "conf").mkdir(parents=True)
    for conf in (ROOT / "conf").iterdir():
        shutil.copy(conf, RUN / "conf" / conf.name)
    carbon_conf = RUN / "conf" / "carbon.conf"
    carbon_conf.write_text(loopback_conf(carbon_conf.read_text()))
    env = dict(os.environ, GRAPHITE_ROOT=str(RUN))
    script = [str(Path(sys.executable).parent / "carbon-cache.py")]
    print("$ carbon-cache.py --config %s start" % carbon_conf)
    started = subprocess.run(script + ["--config", str(carbon_conf), "start"], env=env,
                             capture_output=True, text=True)
    print(started.stdout + started.stderr, end="")
    if started.returncode:
        return started.returncode
    try:
        now = int(time.time()) // 60 * 60
        lines = "".join("demo.servers.web%02d.cpu %d %d\n" % (h, 10 + h * 5 + k, now - 60 * k)
                        for h in range(3) for k in range(5, 0, -1))
        with socket.create_connection(("127.0.0.1", 2003)) as sock:
            sock.sendall(lines.encode())
        print("sent %d datapoints over plaintext TCP to 127.0.0.1:2003" % lines.count("\n"))
        cached = query(7002, {"type": "cache-query", "metric": "demo.servers.web01.cpu"})
        print("carbonlink cache-query demo.servers.web01.cpu ->", cached)
        whisper_dir = RUN / "storage" / "whisper"
        path = whisper_dir / "demo" / "servers" / "web01" / "cpu.wsp"
        deadline = time.time() + 30
        while time.time() < deadline:
            if path.exists():
                _, values = whisper.fetch(str(path), now - 600, now)
                if sum(v is not None for v in values) == 5:
                    break
            time.sleep(0.2)
        for h in range(3):
            wsp = whisper_dir / "demo" / "servers" / ("web%02d" % h) / "cpu.wsp"
            (start, end, step), values = whisper.fetch(str(wsp), now - 360, now)
            points = [(start + i * step, v) for i, v in enumerate(values) if v is not None]
            print("%s: %s" % (wsp.relative_to(RUN), points))
        print(render_json(whisper_dir, now))
        status = subprocess.run(script + ["--config", str(carbon_conf), "status"], env=env,
                                capture_output=True, text=True)
        print("$ carbon-cache.py status\n" + status.stdout, end="")
    finally:
        stopped = subprocess.run(script + ["--config", str(carbon_conf), "stop"], env=env,
                                 capture_output=True, text=True)
        print("$ carbon-cache.py stop\n" + stopped.stdout, end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
