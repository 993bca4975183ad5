"""Interop with carbon 1.1.10's own AMQP code (its venv: bench/common.reference_venv)
through the private RabbitMQ: its publisher into our listener, our publisher into its
listener (carbon-cache.py 1.1.10 with ENABLE_AMQP). Every point must land in whisper.

carbon 1.1.10 speaks AMQP 0-8 (txamqp with its amqp0-8.xml spec), which RabbitMQ 4.0
(Debian 13's) refuses with ``bad_version``: against such a broker these tests are skipped
saying so (the broker is asked with the 0-8 header itself, whatever its version)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.amqp.broker import speaks_amqp_0_8
from tests.amqp.test_amqp_listener import amqp_daemon, publish
from tests.support import free_port, read_whisper, wait_for

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from common import reference_venv  # noqa: E402

pytestmark = pytest.mark.skipif(os.environ.get("SKIP_REFERENCE") == "1",
                                reason="SKIP_REFERENCE=1")

NOW = int(time.time()) // 60 * 60
METRICS = 40

# carbon 1.1.10's amqp_publisher.writeMetric (what its CLI calls), once per metric.
REFERENCE_PUBLISHER = """
import sys
from twisted.internet import defer, reactor
from carbon.amqp_publisher import writeMetric

port, exchange, now, count = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])

@defer.inlineCallbacks
def run():
    try:
        for i in range(count):
            yield writeMetric("amqp.ref.m%d" % i, i + 0.5, now - 60, "127.0.0.1", port,
                              "guest", "guest", "/", exchange)
        print("published", count)
    finally:
        reactor.stop()

reactor.callWhenRunning(run)
reactor.run()
"""


@pytest.fixture
def broker_0_8(broker):
    """The private broker, if it takes carbon 1.1.10's AMQP 0-8; else a skip saying why."""
    if not speaks_amqp_0_8(broker.port):
        pytest.skip("carbon 1.1.10 speaks AMQP 0-8, which this RabbitMQ refuses (bad_version: "
                    "RabbitMQ 4.x, as in Debian 13, has no 0-8); needs RabbitMQ 3.x")
    return broker


def landed(path_of, names: list[str], start: int) -> dict:
    return {name: read_whisper(path_of(name), start, NOW + 60) for name in names}


def test_reference_publisher_into_our_listener(tmp_path, broker_0_8):
    broker = broker_0_8
    cache = amqp_daemon(tmp_path, broker, "interop_in", MAX_CREATES_PER_MINUTE="inf")
    try:
        python = str(reference_venv() / "bin" / "python")
        done = subprocess.run([python, "-c", REFERENCE_PUBLISHER, str(broker.port), "interop_in",
                               str(NOW), str(METRICS)], capture_output=True, text=True,
                              timeout=120, env={"PATH": "/usr/bin:/bin"}, cwd=tmp_path)
        assert done.returncode == 0 and "published %d" % METRICS in done.stdout, done.stderr
        names = ["amqp.ref.m%d" % i for i in range(METRICS)]
        expected = {name: {NOW - 60: i + 0.5} for i, name in enumerate(names)}
        wait_for(lambda: landed(cache.whisper_path, names, NOW - 600) == expected,
                 timeout=60, what="every point of carbon's publisher")
    finally:
        cache.kill()


def test_our_publisher_into_reference_listener(tmp_path, broker_0_8):
    broker = broker_0_8
    root = tmp_path / "ref"
    (root / "conf").mkdir(parents=True)
    (root / "conf" / "storage-schemas.conf").write_text(
        "[all]\npattern = .*\nretentions = 60:1d\n")
    (root / "conf" / "carbon.conf").write_text("\n".join([
        "[cache]", "USER = ", "LINE_RECEIVER_INTERFACE = 127.0.0.1",
        "LINE_RECEIVER_PORT = %d" % free_port(), "PICKLE_RECEIVER_INTERFACE = 127.0.0.1",
        "PICKLE_RECEIVER_PORT = %d" % free_port(), "CACHE_QUERY_INTERFACE = 127.0.0.1",
        "CACHE_QUERY_PORT = %d" % free_port(), "ENABLE_UDP_LISTENER = False",
        "CARBON_METRIC_INTERVAL = 0", "MAX_CREATES_PER_MINUTE = inf",
        "MAX_UPDATES_PER_SECOND = inf", "ENABLE_AMQP = True", "AMQP_HOST = 127.0.0.1",
        "AMQP_PORT = %d" % broker.port, "AMQP_EXCHANGE = interop_out", "AMQP_VHOST = /",
        "AMQP_USER = guest", "AMQP_PASSWORD = guest", "AMQP_VERBOSE = False", ""]))
    venv = reference_venv()
    log = open(root / "stdout.log", "w")
    cache = subprocess.Popen([str(venv / "bin" / "python"), str(venv / "bin" / "carbon-cache.py"),
                              "--config", str(root / "conf" / "carbon.conf"), "--debug",
                              "start"], env={"GRAPHITE_ROOT": str(root), "PATH": "/usr/bin:/bin"},
                             stdout=log, stderr=subprocess.STDOUT)
    log.close()
    output = root / "stdout.log"
    try:
        wait_for(lambda: "binding exchange 'interop_out'" in output.read_text()
                 or cache.poll() is not None, timeout=60, what="carbon 1.1.10 AMQP listener")
        assert cache.poll() is None, output.read_text()
        whisper = root / "storage" / "whisper"

        def probe_landed() -> bool:  # the bind is logged just before it is sent
            publish(broker, "interop_out", "amqp.ours.probe", "1", str(NOW - 60))
            return bool(read_whisper(whisper / "amqp/ours/probe.wsp", NOW - 600, NOW + 60))
        wait_for(probe_landed, timeout=30, interval=0.5, what="carbon 1.1.10 consuming")
        names = ["amqp.ours.m%d" % i for i in range(METRICS)]
        lines = ["%s %d %d" % (name, i, NOW - 60 * k) for i, name in enumerate(names)
                 for k in (1, 2)]
        assert "published %d message(s)" % METRICS in publish(broker, "interop_out",
                                                               stdin="\n".join(lines))
        expected = {name: {NOW - 120: float(i), NOW - 60: float(i)}
                    for i, name in enumerate(names)}
        wait_for(lambda: landed(lambda n: whisper / (n.replace(".", "/") + ".wsp"), names,
                                NOW - 600) == expected,
                 timeout=60, what="every point in carbon 1.1.10's whisper files")
    finally:
        cache.kill()
        cache.wait(10)


def test_the_0_8_probe_matches_the_broker_version(broker):
    """RabbitMQ before 4.0 takes carbon 1.1.10's AMQP 0-8, 4.0 and later refuse it: the
    probe the interop tests skip on says the same as the broker's version."""
    script = Path(broker.server).resolve()  # .../lib/rabbitmq_server-X.Y.Z/sbin/...
    found = [p for p in script.parents if p.name.startswith("rabbitmq_server-")] or \
        sorted((Path(broker.server).parents[1] / "lib").glob("rabbitmq_server-*"))
    if not found:
        pytest.skip("no rabbitmq_server-<version> folder above %s" % script)
    major = int(found[-1].name.split("-", 1)[1].split(".")[0])
    assert speaks_amqp_0_8(broker.port) == (major < 4), found[-1].name
