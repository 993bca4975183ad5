"""carbonate 1.1.10's carbon-lookup and carbon-sieve over our ``carbon`` package agree with
where our relay daemon actually sends each metric."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.cluster.carbonate_tools import ROOT, run_carbonate
from tests.support import free_port, port_open, wait_for


class LineSink:
    """A line-protocol destination on ``address``: remembers every metric name it got."""

    def __init__(self, address: str) -> None:
        self.server = socket.socket()
        self.server.bind((address, 0))
        self.server.listen(8)
        self.address = address
        self.port = self.server.getsockname()[1]
        self.names: list[str] = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            threading.Thread(target=self._read, args=(conn,), daemon=True).start()

    def _read(self, conn: socket.socket) -> None:
        buf = b""
        with conn:
            while True:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                buf += chunk
                *lines, buf = buf.split(b"\n")
                self.names.extend(line.split()[0].decode() for line in lines if line.strip())

    def close(self) -> None:
        self.server.close()


AGG_RULES = "agg.<app>.total (60) = sum app.<app>.*.requests\n"


@pytest.mark.parametrize("method", ["consistent-hashing", "aggregated-consistent-hashing"])
def test_lookup_and_sieve_match_the_relay(tmp_path: Path, method: str) -> None:
    sinks = [LineSink(address) for address in ("127.0.0.1", "127.0.0.1", "127.0.0.2",
                                               "127.0.0.2", "127.0.0.3")]
    dests = ["%s:%d:%s" % (s.address, s.port, "ab"[i % 2]) for i, s in enumerate(sinks)]
    factor = 2 if method == "consistent-hashing" else 1
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "aggregation-rules.conf").write_text(AGG_RULES)
    (conf / "storage-schemas.conf").write_text("[all]\npattern = .*\nretentions = 60s:1d\n")
    line_port = free_port()
    (conf / "carbon.conf").write_text("\n".join([
        "[relay]", "STORAGE_DIR = %s" % (tmp_path / "storage"), "USER = ",
        "LINE_RECEIVER_INTERFACE = 127.0.0.1", "LINE_RECEIVER_PORT = %d" % line_port,
        "PICKLE_RECEIVER_PORT = 0", "RELAY_METHOD = %s" % method,
        "REPLICATION_FACTOR = %d" % factor, "DIVERSE_REPLICAS = True",
        "DESTINATIONS = %s" % ", ".join(dests), "DESTINATION_PROTOCOL = line",
        "CARBON_METRIC_INTERVAL = 0", ""]))
    (tmp_path / "carbonate.conf").write_text(
        "[main]\ndestinations = %s\nreplication_factor = %d\nrelay_method = %s\n"
        % (", ".join(dests), factor, method))
    names = ["app.%s.host%d.requests" % (app, n) for app in ("web", "db") for n in range(5)]
    names += ["servers.s%03d.cpu.load" % n for n in range(150)]
    env = dict(os.environ, GRAPHITE_ROOT=str(tmp_path), PYTHONPATH=str(ROOT))
    relay = subprocess.Popen([sys.executable, "-m", "carbon.daemon", "carbon-relay", "--config",
                              str(conf / "carbon.conf"), "--nodaemon", "start"], env=env,
                             stdout=open(tmp_path / "relay.out", "w"), stderr=subprocess.STDOUT)
    try:
        wait_for(lambda: relay.poll() is not None or port_open(line_port), what="relay")
        assert relay.poll() is None, (tmp_path / "relay.out").read_text()
        now = int(time.time())
        with socket.create_connection(("127.0.0.1", line_port)) as sock:
            sock.sendall("".join("%s 1 %d\n" % (n, now) for n in names).encode())
        wait_for(lambda: sum(len(s.names) for s in sinks) >= len(names) * factor
                 if method == "consistent-hashing" else
                 len({n for s in sinks for n in s.names}) >= len(names), what="all sent")
    finally:
        relay.send_signal(signal.SIGTERM)
        relay.wait(30)
        for sink in sinks:
            sink.close()
    placed: dict[str, set[str]] = {}
    for dest, sink in zip(dests, sinks, strict=True):
        for name in sink.names:
            placed.setdefault(name, set()).add(dest)
    config = ["-c", str(tmp_path / "carbonate.conf"), "-a", str(conf / "aggregation-rules.conf")]
    for name in names[:8] + names[-12:]:
        found = run_carbonate("carbon-lookup", config + [name], cwd=tmp_path)
        assert found.returncode == 0, found.stderr
        assert set(found.stdout.split()) == placed[name], name
    everything = "\n".join(names) + "\n"
    for dest in dests[1:3]:
        kept = run_carbonate("carbon-sieve", config + ["-n", dest], stdin=everything,
                             cwd=tmp_path)
        assert kept.returncode == 0, kept.stderr
        assert set(kept.stdout.split()) == {n for n in names if dest in placed[n]}
    inverted = run_carbonate("carbon-sieve", config + ["-I", "-n", "127.0.0.2"],
                             stdin=everything, cwd=tmp_path)
    expected = {n for n in names if not any(d.startswith("127.0.0.2:") for d in placed[n])}
    assert set(inverted.stdout.split()) == expected
    assert 0 < len(expected) < len(names)



def test_reference_module_faces(tmp_path: Path) -> None:
    from carbon.aggregator.rules import RuleManager
    from carbon.conf import CarbonConfigException, Settings
    from carbon.config.errors import ConfigError
    from carbon.util import parseDestinations

    settings = Settings()
    assert settings.REPLICATION_FACTOR == 1 and settings["DIVERSE_REPLICAS"] is True
    path = tmp_path / "carbon.conf"
    path.write_text("[relay]\nREPLICATION_FACTOR = 3\nDESTINATIONS = a:1, b:2:x\n"
                    "DIVERSE_REPLICAS = no\nROUTER_HASH_TYPE = fnv1a_ch\n")
    settings.readFrom(str(path), "relay")
    settings.readFrom(str(path), "absent")
    assert (settings.REPLICATION_FACTOR, settings.DIVERSE_REPLICAS) == (3, False)
    assert settings.DESTINATIONS == ["a:1", "b:2:x"]
    assert parseDestinations(settings.DESTINATIONS) == [("a", 1, None), ("b", 2, "x")]
    with pytest.raises(CarbonConfigException):
        settings.readFrom(str(tmp_path / "missing.conf"), "relay")
    # the daemons' parser (carbon.config.settings.parse_value): a text key stays text,
    # a bad number names file and key, as load_settings does
    path.write_text("[relay]\nAMQP_PASSWORD = 1234\nWRITE_BACK_FREQUENCY = 5\n")
    settings.readFrom(str(path), "relay")
    assert (settings.AMQP_PASSWORD, settings.WRITE_BACK_FREQUENCY) == ("1234", 5)
    path.write_text("[relay]\nMAX_QUEUE_SIZE = lots\n")
    with pytest.raises(ConfigError, match="carbon.conf, key MAX_QUEUE_SIZE: invalid number"):
        settings.readFrom(str(path), "relay")
    rules = tmp_path / "rules.conf"
    rules.write_text("# c\n" + AGG_RULES)
    RuleManager.read_from(str(rules))
    try:
        assert [r.get_aggregate_metric("app.web.h1.requests") for r in RuleManager.rules] == \
            ["agg.web.total"]
        rules.unlink()
        RuleManager.read_rules()
        assert RuleManager.rules == []
    finally:
        RuleManager.clear()
