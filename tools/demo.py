"""The whole stack from the shipped conf/, on loopback: relay -> caches a and b -> render app.

    tools/demo.sh            start, feed sample metrics, show where they are; Ctrl-C stops
    tools/demo.sh --stop     stop a demo left running (e.g. from another shell)
    tools/demo.sh --seconds N --no-wait   feed N seconds, show, stop (no Ctrl-C needed)

GRAPHITE_ROOT is ./demo-run (or $CARBON_DEMO_DIR), whose conf/ is a copy of conf/ (unchanged).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RUN = Path(os.environ.get("CARBON_DEMO_DIR") or ROOT / "demo-run")
BIN = Path(sys.executable).parent
RENDER_PID = RUN / "graphite-render.pid"
DAEMONS = [("carbon-cache.py", "a"), ("carbon-cache.py", "b"), ("carbon-relay.py", "a")]
PORTS = {2003: "cache a", 2004: "cache a", 7002: "cache a", 2103: "cache b",
         2104: "cache b", 7102: "cache b", 2013: "relay", 2014: "relay"}
RELAY_LINE_PORT = 2013
HOSTS = ["web01", "web02", "web03", "db01", "db02"]


def env() -> dict:
    out = dict(os.environ, GRAPHITE_ROOT=str(RUN))
    out.pop("GRAPHITE_CONF_DIR", None)
    out.pop("GRAPHITE_STORAGE_DIR", None)
    return out


def carbon(script: str, instance: str, action: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / script), "--instance=%s" % instance, action], env=env(),
                          capture_output=True, text=True, timeout=120)


def port_free(port: int) -> bool:
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def port_open(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def wait(predicate, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        if time.monotonic() > deadline:
            raise SystemExit("demo: timed out waiting for %s" % what)
        time.sleep(0.1)


def exited(pid: int) -> bool:
    """Whether ``pid`` has ended. A render app this process started stays a zombie (and
    answers signal 0) until it is reaped, so reap it here; one started by another demo
    process (``--stop``) is not our child and is only probed."""
    try:
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return True
    except ChildProcessError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def stop() -> None:
    """Stop the render app and the daemons of a demo run (by their pidfiles)."""
    if RENDER_PID.exists():
        try:
            pid = int(RENDER_PID.read_text())
            os.kill(pid, signal.SIGTERM)
            for _ in range(100):
                if exited(pid):
                    break
                time.sleep(0.1)
        except (ValueError, ProcessLookupError):
            pass
        RENDER_PID.unlink(missing_ok=True)
        print("stopped graphite-render")
    if not (RUN / "conf").is_dir():
        return
    for script, instance in reversed(DAEMONS):
        result = carbon(script, instance, "stop")
        if result.returncode == 0:
            print("$ %s --instance=%s stop  -> %s" % (script, instance,
                                                      result.stdout.strip() or "stopped"))


def start(render_port: int) -> None:
    shutil.rmtree(RUN, ignore_errors=True)
    shutil.copytree(ROOT / "conf", RUN / "conf")
    for script, instance in DAEMONS:
        result = carbon(script, instance, "start")
        line = (result.stdout + result.stderr).strip().splitlines()
        print("$ %s --instance=%s start   %s" % (script, instance, line[-1] if line else ""))
        if result.returncode:
            raise SystemExit("demo: %s did not start:\n%s%s" % (script, result.stdout,
                                                               result.stderr))
    log = open(RUN / "graphite-render.log", "w")
    render = subprocess.Popen([str(BIN / "graphite-render"), "--config",
                               str(RUN / "conf" / "local_settings.py"), "--port",
                               str(render_port)], env=env(), stdout=log,
                              stderr=subprocess.STDOUT, start_new_session=True)
    RENDER_PID.write_text(str(render.pid))
    print("$ graphite-render --config conf/local_settings.py --port %d" % render_port)
    for port in (7002, 7102, RELAY_LINE_PORT, render_port):
        wait(lambda p=port: port_open(p) or render.poll() is not None, 60, "port %d" % port)
    if render.poll() is not None:
        raise SystemExit("demo: graphite-render exited:\n" + (RUN / "graphite-render.log")
                         .read_text())


def feed(seconds: float) -> int:
    """Ten minutes of history, then one point a second per series for ``seconds``."""
    now = int(time.time())
    sent = 0
    with socket.create_connection(("127.0.0.1", RELAY_LINE_PORT)) as sock:
        lines = ["servers.%s.cpu %d %d\n" % (h, 20 + 10 * i + k % 7, now - 60 * k)
                 for i, h in enumerate(HOSTS) for k in range(10, 0, -1)]
        sock.sendall("".join(lines).encode())
        sent += len(lines)
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            stamp = int(time.time())
            lines = ["servers.%s.cpu %d %d\n" % (h, 20 + 10 * i + stamp % 5, stamp)
                     for i, h in enumerate(HOSTS)]
            sock.sendall("".join(lines).encode())
            sent += len(lines)
            time.sleep(1)
    return sent


def placement() -> dict[str, list[str]]:
    """Metric names each cache instance created, from its creates.log."""
    out = {}
    for instance in ("a", "b"):
        path = RUN / "storage" / "log" / "carbon-cache" / ("carbon-cache-" + instance) / \
            "creates.log"
        text = path.read_text() if path.exists() else ""
        out[instance] = sorted(set(re.findall(r"creating database metric (\S+)", text)))
    return out


def get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=30) as response:
        return response.read()


def show(render_port: int) -> None:
    names = ["servers.%s.cpu" % h for h in HOSTS]
    wait(lambda: sum(len(v) for v in placement().values()) >= len(names), 60,
         "the caches to create the whisper files")
    print("\nWhere the data landed (relay: consistent hashing over 127.0.0.1:2004:a and "
          "127.0.0.1:2104:b):")
    for instance, metrics in placement().items():
        ours = [m for m in metrics if not m.startswith("carbon.")]
        print("  cache %s: %s" % (instance, ", ".join(ours) or "(none yet)"))
    print("  whisper files: %s" % (RUN / "storage" / "whisper" / "servers"))
    base = "http://127.0.0.1:%d" % render_port
    query = urllib.parse.urlencode({"target": "sumSeries(servers.*.cpu)", "from": "-10min",
                                    "format": "json"})
    url = "%s/render?%s" % (base, query)
    series = json.loads(get(url))
    points = series[0]["datapoints"] if series else []
    print("\nGET %s" % url)
    print('  [{"target": "%s", "datapoints": %s ...]}]' % (
        series[0]["target"] if series else "", json.dumps(points[-4:])))
    png = RUN / "servers-cpu.png"
    png.write_bytes(get("%s/render?%s" % (base, urllib.parse.urlencode(
        {"target": "servers.*.cpu", "from": "-15min", "width": 800, "height": 400}))))
    print("\nPNG of servers.*.cpu: %s" % png)
    print("\nOpen:")
    print("  %s/render?target=servers.*.cpu&from=-15min" % base)
    print("  %s/metrics/find?query=servers.*" % base)
    print("  %s/functions   (render functions, as graphite-web)" % base)
    print("  Grafana: add a Graphite data source, URL %s, version 1.1.x" % base)
    print("Self-metrics: carbon.agents.* and carbon.relays.* (every 10 s); logs under %s"
          % (RUN / "storage" / "log"))


def interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tools/demo.sh", description=__doc__.splitlines()[0])
    parser.add_argument("--stop", action="store_true", help="stop a running demo and exit")
    parser.add_argument("--seconds", type=float, default=5, help="seconds of live feed (5)")
    parser.add_argument("--port", type=int, default=8080, help="render app port (8080)")
    parser.add_argument("--no-wait", action="store_true",
                        help="stop after showing the results instead of waiting for Ctrl-C")
    args = parser.parse_args(argv)
    if args.stop:
        stop()
        return 0
    taken = ["%d (%s)" % (p, who) for p, who in PORTS.items() if not port_free(p)]
    if not port_free(args.port):
        taken.append("%d (render app; choose another with --port)" % args.port)
    if taken:
        print("demo: ports of 127.0.0.1 in use: %s\n(a demo still running? tools/demo.sh "
              "--stop)" % ", ".join(taken), file=sys.stderr)
        return 1
    interrupted = False
    try:
        start(args.port)
        print("\nFeeding 5 series to the relay (127.0.0.1:%d) for %g s ..."
              % (RELAY_LINE_PORT, args.seconds))
        print("sent %d datapoints" % feed(args.seconds))
        show(args.port)
        if not args.no_wait:
            print("\nRunning. Ctrl-C (or tools/demo.sh --stop) stops everything.", flush=True)
            signal.signal(signal.SIGTERM, interrupt)
            while RENDER_PID.exists():  # removed by tools/demo.sh --stop
                time.sleep(0.5)
    except KeyboardInterrupt:
        interrupted = True
    finally:
        print()
        stop()
    return 130 if interrupted and args.no_wait else 0


if __name__ == "__main__":
    sys.exit(main())
