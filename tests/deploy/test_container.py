"""The container image, built and run for real: relay -> 2 caches -> render app.

Debian's docker.io engine is started by the test (tests/deploy/docker_engine.py), the base
image is made from Debian's packages, the repository's Dockerfile is built with BuildKit
(the host's CA bundle given to pip as a secret). Points go in through the relay container,
come back through the render app's /render (whisper plus carbonlink from both caches), and
``docker stop`` of each cache, while it still holds points it has not written, leaves every
point in whisper (read from the host). Every container must report healthy through the
image's HEALTHCHECK.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest
import whisper

from carbon.hashing import ConsistentHashRing
from tests.deploy.docker_engine import DockerEngine
from tests.support import ROOT, free_port, wait_for

pytestmark = [pytest.mark.system, pytest.mark.timeout(1800)]

IMAGE = "carbon-fast"      # compose.yaml's image name
CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"
METRICS = 200          # names; two points each
STEPS = (120, 60)      # seconds before the current minute
UID = 999              # the image's _graphite
# the caches write slowly, so points are still in them when they are stopped; creates are
# not throttled, so the slow part is the updates
CACHE_OVERRIDES = ("MAX_UPDATES_PER_SECOND = 1\nMAX_UPDATES_PER_SECOND_ON_SHUTDOWN = 1000\n"
                   "MAX_CREATES_PER_MINUTE = 100000\n")


def expected_points() -> dict[str, dict[int, float]]:
    minute = int(time.time()) // 60 * 60
    return {"test.container.m%03d" % i: {minute - back: float(i * 10 + k)
                                         for k, back in enumerate(STEPS)}
            for i in range(METRICS)}


def send_lines(port: int, points: dict[str, dict[int, float]]) -> int:
    lines = ["%s %r %d\n" % (name, value, ts)
             for name, series in points.items() for ts, value in series.items()]
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        conn.sendall("".join(lines).encode())
    return len(lines)


def render_points(port: int, target: str = "test.container.*") -> dict[str, dict[int, float]]:
    url = "http://127.0.0.1:%d/render?target=%s&from=-10min&format=json" % (port, target)
    with urllib.request.urlopen(url, timeout=10) as answer:
        series = json.load(answer)
    return {s["target"]: {ts: v for v, ts in s["datapoints"] if v is not None} for s in series}


def whisper_points(storage: Path, names) -> dict[str, dict[int, float]]:
    """What the whisper files hold, read on the host."""
    out = {}
    now = int(time.time())
    for name in names:
        path = storage / "whisper" / (name.replace(".", "/") + ".wsp")
        if not path.exists():
            out[name] = {}
            continue
        (start, _end, step), values = whisper.fetch(str(path), now - 600, now)
        out[name] = {start + i * step: v for i, v in enumerate(values) if v is not None}
    return out


def missing(expected, found) -> int:
    return sum(1 for name, series in expected.items() for ts, value in series.items()
               if found.get(name, {}).get(ts) != value)


def port_accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def render_answers(port: int) -> bool:
    try:
        with urllib.request.urlopen("http://127.0.0.1:%d/version" % port, timeout=2) as r:
            return r.status == 200
    except OSError:
        return False


def run_compose(engine: DockerEngine) -> dict[str, int]:
    """compose.yaml as shipped (ports moved by its variables): points in through the relay,
    out through the render app; then stopped, every container exits by itself."""
    line_port, render_port = free_port(), free_port()
    project = "cftest%d" % os.getpid()
    env = {"CARBON_LINE_PORT": str(line_port), "CARBON_PICKLE_PORT": str(free_port()),
           "CARBON_RENDER_PORT": str(render_port)}
    compose_file = str(ROOT / "compose.yaml")
    engine.compose(project, "-f", compose_file, "up", "-d", "--no-build", env=env)
    try:
        wait_for(lambda: port_accepts(line_port), 90, 0.5, "the compose relay")
        wait_for(lambda: render_answers(render_port), 90, 0.5, "the compose render app")
        minute = int(time.time()) // 60 * 60
        expected = {"test.compose.m%02d" % i: {minute - 60: float(i)} for i in range(20)}
        sent = send_lines(line_port, expected)
        wait_for(lambda: missing(expected, render_points(render_port, "test.compose.*")) == 0,
                 60, 1.0, "the compose stack's points through /render")
        engine.compose(project, "-f", compose_file, "stop", env=env)
        ids = engine.compose(project, "-f", compose_file, "ps", "-q", env=env).stdout.split()
        codes = [engine.inspect(i.decode(), "{{.State.ExitCode}}") for i in ids]
        assert len(codes) == 4 and set(codes) == {"0"}, codes
    finally:
        engine.compose(project, "-f", compose_file, "down", "-v", env=env)
    return {"sent": sent, "read_back": sent}


def test_image_runs_relay_two_caches_render(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.fail("the container test runs dockerd: it needs root")
    report: dict[str, object] = {}
    with DockerEngine() as engine:
        started = time.monotonic()
        engine.ensure_base_image()
        report["base_image_s"] = round(time.monotonic() - started, 1)
        started = time.monotonic()
        engine.build(ROOT, IMAGE, CA_BUNDLE)
        report["build_s"] = round(time.monotonic() - started, 1)
        report["image_bytes"] = int(engine.inspect(IMAGE, "{{.Size}}"))
        assert engine.inspect(IMAGE, "{{.Config.User}}") == "_graphite"
        assert json.loads(engine.inspect(IMAGE, "{{json .Config.Healthcheck.Test}}")) == [
            "CMD", "/usr/local/bin/carbon-container", "healthcheck"]
        # the C accelerators are in the image, not the pure-Python fallbacks
        engine.run_output(["--entrypoint", "python", IMAGE, "-c",
                           "import carbon.cache._store, carbon.formats._plaintext, "
                           "carbon.storage._whisper_writer, webapp.render._rows"])

        # the image's own /etc/carbon, with slower caches: mounting a folder overrides it
        conf = tmp_path / "conf"
        conf.mkdir()
        tar = engine.docker("run", "--rm", "--entrypoint", "tar", IMAGE,
                            "-C", "/etc/carbon", "-c", ".").stdout
        subprocess.run(["tar", "-C", str(conf), "-x"], input=tar, check=True)
        with open(conf / "carbon.conf", "a") as handle:
            for instance in ("a", "b"):
                handle.write("\n[cache:%s]\n%s" % (instance, CACHE_OVERRIDES))
        storage = tmp_path / "storage"
        storage.mkdir()
        os.chown(storage, UID, UID)

        net = engine.network("cf-test-%d" % os.getpid())
        relay_port, render_port = free_port(), free_port()
        volume = "%s:/var/lib/graphite" % storage
        for instance in ("a", "b"):
            engine.run("cache-" + instance, "--network", net, "-v", volume,
                       "-v", "%s:/etc/carbon:ro" % conf, IMAGE, "cache", "--instance", instance)
        engine.run("relay", "--network", net, "-p", "127.0.0.1:%d:2013" % relay_port, IMAGE,
                   "relay")
        engine.run("render", "--network", net, "-v", volume,
                   "-p", "127.0.0.1:%d:8080" % render_port, IMAGE, "render")
        wait_for(lambda: port_accepts(relay_port), 90, 0.5, "the relay container")
        wait_for(lambda: render_answers(render_port), 90, 0.5, "the render container")
        for instance in ("a", "b"):
            wait_for(lambda i=instance: "started" in engine.logs("cache-" + i), 90, 0.5,
                     "cache-%s to start" % instance)

        expected = expected_points()
        report["sent"] = send_lines(relay_port, expected)
        # every point is visible through the render app: whisper + carbonlink of both caches
        try:
            wait_for(lambda: missing(expected, render_points(render_port)) == 0, 60, 1.0,
                     "every point through /render")
        except AssertionError:
            raise AssertionError("%d points missing from /render; logs:\n%s" % (
                missing(expected, render_points(render_port)),
                "\n".join(engine.logs(n)[-2000:] for n in ("relay", "cache-a", "render"))))

        # the HEALTHCHECK asks each daemon itself (30 s interval: the first check is due
        # 30 s after the start)
        names = ("cache-a", "cache-b", "relay", "render")
        for name in names:
            try:
                wait_for(lambda n=name: engine.inspect(n, "{{.State.Health.Status}}")
                         == "healthy", 120, 1.0, "%s healthy" % name)
            except AssertionError:
                raise AssertionError("%s not healthy: %s\n%s" % (
                    name, engine.inspect(name, "{{json .State.Health}}"),
                    engine.logs(name)[-3000:]))
        said = {name: json.loads(engine.inspect(name, "{{json .State.Health}}"))["Log"][-1]
                ["Output"] for name in names}
        assert "carbon-cache carbonlink 127.0.0.1:7002 answers" in said["cache-a"], said
        assert "carbon-relay line receiver 127.0.0.1:2013 accepts" in said["relay"], said
        assert "answers version 1.1.10" in said["render"], said
        report["health"] = said

        ring = ConsistentHashRing([("cache-a", "a"), ("cache-b", "b")])
        owner = {name: ring.get_node(name)[1] for name in expected}
        for instance in ("a", "b"):
            mine = {n: s for n, s in expected.items() if owner[n] == instance}
            before = missing(mine, whisper_points(storage, mine))
            assert mine and before > 0, (
                "cache-%s had written all its %d metrics before the stop: nothing to drain"
                % (instance, len(mine)))
            started = time.monotonic()
            engine.docker("stop", "-t", "120", "cache-" + instance, timeout=180)
            report["stop_%s_s" % instance] = round(time.monotonic() - started, 1)
            report["in_cache_%s_at_stop" % instance] = before
            # SIGTERM reached the daemon and it exited by itself, after draining
            assert engine.inspect("cache-" + instance, "{{.State.ExitCode}}") == "0"
            log = engine.logs("cache-" + instance)
            assert "carbon-cache shut down cleanly" in log, log[-3000:]
            drained = re.search(r"Draining (\d+) datapoints of (\d+) metrics", log)
            assert drained and int(drained.group(1)) > 0, log[-3000:]
            report["drained_%s" % instance] = int(drained.group(1))
            after = missing(mine, whisper_points(storage, mine))
            assert after == 0, "%d of cache-%s's points not in whisper after docker stop" % (
                after, instance)

        stored = whisper_points(storage, expected)
        report["stored"] = sum(len(s) for s in stored.values())
        report["lost"] = missing(expected, stored)
        assert report["lost"] == 0
        # the files belong to the image's non-root user
        assert (storage / "whisper" / "test").stat().st_uid == UID

        engine.docker("stop", "-t", "30", "relay", "render", timeout=120)
        report["compose"] = run_compose(engine)
    print("container test:", json.dumps(report))
    shutil.rmtree(storage, ignore_errors=True)
