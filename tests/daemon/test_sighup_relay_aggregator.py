"""SIGHUP on a real carbon-relay (relay-rules.conf, blacklist) and a real
carbon-aggregator (aggregation and rewrite rules, whatever their mtime): one log line per
changed file, nothing logged when nothing changed, and the daemon routes by the new rules."""

from __future__ import annotations

import os
import time
from pathlib import Path

from tests.daemon.test_sighup_reload import hup
from tests.support import CarbonInstance, read_whisper, send_tcp, wait_for

NOW = int(time.time()) // 60 * 60


def keep_mtime(path: Path, text: str) -> None:
    """Rewrite ``path`` and put its old mtime back: only a forced re-read sees it."""
    stat = path.stat()
    path.write_text(text)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))


def landed(instance: CarbonInstance, metric: str) -> dict:
    return read_whisper(instance.whisper_path(metric), NOW - 600, NOW + 60)


def rules(*sections: tuple[str, str | None, int]) -> str:
    out = []
    for name, pattern, port in sections:
        out.append("[%s]" % name)
        out.append("pattern = %s" % pattern if pattern else "default = true")
        out.append("destinations = 127.0.0.1:%d\n" % port)
    return "\n".join(out)


def test_relay_rereads_its_rules_and_blacklist_on_sighup(tmp_path: Path) -> None:
    caches = {name: CarbonInstance(tmp_path / name) for name in ("a", "b")}
    relay = CarbonInstance(tmp_path / "relay", program="carbon-relay", section="relay",
                           RELAY_METHOD="rules", USE_WHITELIST=True,
                           DESTINATIONS=", ".join("127.0.0.1:%d" % c.pickle_port
                                                  for c in caches.values()))
    a, b = caches["a"].pickle_port, caches["b"].pickle_port
    path = relay.conf / "relay-rules.conf"
    path.write_text(rules(("default", None, a)))
    try:
        for cache in caches.values():
            cache.start_foreground()
        relay.start_foreground()
        send_tcp(relay.line_port, b"x.one 1 %d\n" % NOW)
        wait_for(lambda: landed(caches["a"], "x.one"), what="x.one on a")

        good = rules(("to_b", "^x\\.", b), ("default", None, a))
        keep_mtime(path, good)
        assert hup(relay, 1) == ["reloaded 2 relay rules from %s" % path]
        send_tcp(relay.line_port, b"x.two 2 %d\ny.three 3 %d\n" % (NOW, NOW))
        wait_for(lambda: landed(caches["b"], "x.two"), what="x.two on b (the new rule)")
        wait_for(lambda: landed(caches["a"], "y.three"), what="y.three on a (default)")
        assert not caches["a"].whisper_path("x.two").exists()

        assert hup(relay, 0) == []  # nothing changed: nothing logged
        path.write_text("[broken]\npattern = x\n")
        lines = hup(relay, 1)
        assert lines[0].startswith("kept the relay rules: ") and "relay-rules.conf" in \
            lines[0]
        path.write_text(good)  # the running rules again: no line for them
        (relay.conf / "blacklist.conf").write_text("^x\\.blocked\n")
        assert hup(relay, 1) == ["reloaded blacklist (1 patterns)"]
        send_tcp(relay.line_port, b"x.blocked 4 %d\nx.after 5 %d\n" % (NOW, NOW))
        wait_for(lambda: landed(caches["b"], "x.after"), what="x.after on b (old rules kept)")
        assert not caches["b"].whisper_path("x.blocked").exists()
        assert relay.proc is not None and relay.proc.poll() is None
        assert "Traceback" not in relay.output()
    finally:
        for instance in (relay, *caches.values()):
            instance.kill()


def test_aggregator_rereads_rule_files_on_sighup_whatever_their_mtime(tmp_path: Path) -> None:
    cache = CarbonInstance(tmp_path / "cache")
    agg = CarbonInstance(tmp_path / "agg", program="carbon-aggregator", section="aggregator",
                         DESTINATIONS="127.0.0.1:%d" % cache.pickle_port)
    rules_path = agg.conf / "aggregation-rules.conf"
    rewrite_path = agg.conf / "rewrite-rules.conf"
    rules_path.write_text("")
    rewrite_path.write_text("")
    try:
        cache.start_foreground()
        agg.start_foreground()
        assert hup(agg, 0) == []  # nothing changed: nothing logged
        keep_mtime(rewrite_path, "[pre]\n^old\\. = new.\n")
        keep_mtime(rules_path, "sum.all (60) = sum new.*\n")
        lines = hup(agg, 2)
        assert lines == ["reloaded 1 aggregation rules", "reloaded rewrite rules (1)"]
        send_tcp(agg.line_port, b"old.a 2 %d\nold.b 3 %d\n" % (NOW, NOW))
        wait_for(lambda: landed(cache, "new.a"), what="new.a (the rewrite rule)")
        assert not cache.whisper_path("old.a").exists()
        assert agg.terminate() == 0  # flushes the pending aggregate
        wait_for(lambda: landed(cache, "sum.all").get(NOW) == 5.0, what="sum.all = 5")
        assert "Traceback" not in agg.output()
    finally:
        agg.kill()
        cache.kill()


HUP_AT_LISTEN = """
import os, signal, sys
from carbon.daemon.aggregator import AggregatorDaemon
from carbon.daemon import cli

class HupAtListen(AggregatorDaemon):
    def start(self):
        super().start()  # the ports are open: a sender or an operator may act now
        with open(sys.argv[1], "a") as rules:
            rules.write("two.total (60) = sum two.*\\n")
        os.kill(os.getpid(), signal.SIGHUP)

cli.DAEMONS["carbon-aggregator"] = "__main__:HupAtListen"
cli.run("carbon-aggregator", ["--nodaemon", "start"])
"""


def test_sighup_right_after_the_ports_open_is_applied_not_fatal(tmp_path: Path) -> None:
    """The SIGHUP handler is in place before the ports open: a SIGHUP that arrives once
    the daemon listens (sent by whoever saw the port open, or an operator right after
    ``start``) queues a reload; it used to meet the default action and end the process.
    A real carbon-aggregator whose start() ends by sending itself SIGHUP."""
    import subprocess
    import sys

    from tests.support import ROOT, free_port

    agg = CarbonInstance(tmp_path / "agg", program="carbon-aggregator", section="aggregator",
                         DESTINATIONS="127.0.0.1:%d" % free_port())
    rules_path = agg.conf / "aggregation-rules.conf"
    rules_path.write_text("one.total (60) = sum one.*\n")
    env = dict(os.environ, GRAPHITE_ROOT=str(agg.root), PYTHONPATH=str(ROOT))
    with open(agg.root / "stdout.log", "w") as out:
        agg.proc = subprocess.Popen([sys.executable, "-c", HUP_AT_LISTEN, str(rules_path)],
                                    env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_for(lambda: agg.proc.poll() is not None or
                 "SIGHUP: reloaded 2 aggregation rules" in agg.output(), what="the reload")
        assert agg.proc.poll() is None, "ended by SIGHUP: %s" % agg.proc.poll()
        assert agg.terminate() == 0
        assert "Traceback" not in agg.output()
    finally:
        agg.kill()
