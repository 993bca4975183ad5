"""kill -9 at random moments under sustained load: nothing the daemon had read is lost.

What "read" means here. A TCP send that completed only put bytes in the kernel; the
daemon may never have read them. So the load carries its own receipt: round k of the
load is the points of every metric for timestamp BASE + k, then one line of the
sentinel metric (value k), all on one connection, in order. The daemon handles a
connection's reads in order and journals a read's points before it caches them, so
once the sentinel of round k is visible (carbonlink answers it from the cache, or it is
in the sentinel's whisper file), every point of rounds up to k on that connection has
been read and journaled. A new connection (after a restart) starts again at the round
after the last one confirmed. Just before each kill the test asks for the newest
confirmed round: everything up to it must be in whisper in the end, with its value.

Kills: while new metrics are being created (2 new a round), while only existing
metrics are updated, and while the next start replays the journal (before it listens).
The CI form makes 3 kills; CARBON_KILL9_KILLS=21 (or more) runs the long form.
"""

from __future__ import annotations

import os
import random
import signal
import socket
import threading
import time
from pathlib import Path

import whisper

from tests.support import CarbonInstance, carbonlink, port_open, read_whisper, wait_for

UPDATED = 100  # metrics written every round
NEW_A_ROUND = 2  # metrics created every round of a create phase
ROUND_SECONDS = 0.01
MAX_ROUNDS = 9000
SCHEMAS = r"""[sentinel]
pattern = ^kill\.sentinel$
retentions = 1s:3h

[updated]
pattern = ^kill\.up\.
retentions = 1s:3h

[fill]
pattern = ^kill\.fill
retentions = 1s:15m

[created]
pattern = .*
retentions = 10s:3h
"""
FILL_METRICS = 2000
FILL_POINTS = 500  # a metric, before a replay kill: a journal that takes a while


def updated_name(index: int) -> str:
    return "kill.up.m%03d" % index


def created_name(round_number: int, index: int) -> str:
    return "kill.new.r%05d.m%d" % (round_number, index)


class Load:
    """Sends rounds on one connection at a time; knows which rounds carry new metrics."""

    def __init__(self, instance: CarbonInstance, base: int) -> None:
        self.instance = instance
        self.base = base
        self.next_round = 0
        self.creating: dict[int, bool] = {}
        self.create_phase = True
        self.stop = threading.Event()
        self.connected = threading.Event()
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def lines(self, k: int) -> bytes:
        stamp = self.base + k
        out = ["%s %d %d\n" % (updated_name(i), k * 1000 + i, stamp) for i in range(UPDATED)]
        if self.creating.get(k):
            out += ["%s %d %d\n" % (created_name(k, j), k * 10 + j, stamp)
                    for j in range(NEW_A_ROUND)]
        out.append("kill.sentinel %d %d\n" % (k, stamp))
        return "".join(out).encode()

    def resume_from(self, confirmed: int) -> None:
        with self.lock:
            self.next_round = confirmed + 1

    def run(self) -> None:
        while not self.stop.is_set():
            self.connected.wait(0.2)
            if not self.connected.is_set():
                continue
            try:
                sock = socket.create_connection(("127.0.0.1", self.instance.line_port),
                                                timeout=5)
            except OSError:
                time.sleep(0.05)
                continue
            try:
                while not self.stop.is_set() and self.connected.is_set():
                    with self.lock:
                        k = self.next_round
                        if k >= MAX_ROUNDS:
                            break
                        self.creating.setdefault(k, self.create_phase)
                        self.next_round = k + 1
                    sock.sendall(self.lines(k))
                    time.sleep(ROUND_SECONDS)
            except OSError:
                pass
            finally:
                sock.close()
            if self.next_round >= MAX_ROUNDS:
                return


def confirmed_round(instance: CarbonInstance, base: int) -> int:
    """The newest round whose sentinel the daemon has: cached (carbonlink) or on disk."""
    best = -1
    try:
        reply = carbonlink(instance.query_port, {"type": "cache-query",
                                                 "metric": "kill.sentinel"})
        best = max([int(value) for _, value in reply.get("datapoints", [])], default=-1)
    except (OSError, AssertionError, EOFError):
        pass
    on_disk = read_whisper(instance.whisper_path("kill.sentinel"), base - 10, base + MAX_ROUNDS)
    return max([best] + [int(value) for value in on_disk.values()])


def fill_name(number: int, index: int) -> str:
    return "kill.fill%d.m%04d" % (number, index)


def fill(instance: CarbonInstance, number: int, now: int) -> None:
    """Many points on their own connection, confirmed once the last metric's are all
    cached or on disk."""
    lines = "".join("%s %d %d\n" % (fill_name(number, i), j, now - j)
                    for j in range(FILL_POINTS, 0, -1) for i in range(FILL_METRICS))
    with socket.create_connection(("127.0.0.1", instance.line_port), timeout=30) as sock:
        sock.sendall(lines.encode())
    last = fill_name(number, FILL_METRICS - 1)

    def held() -> bool:
        cached = carbonlink(instance.query_port, {"type": "cache-query", "metric": last})
        stamps = {int(stamp) for stamp, _ in cached["datapoints"]}
        stamps.update(read_whisper(instance.whisper_path(last), now - 900, now + 1))
        return len(stamps) >= FILL_POINTS

    wait_for(held, timeout=60, interval=0.2, what="the fill to be read")


def fill_missing(instance: CarbonInstance, number: int, now: int) -> list:
    missing = []
    for i in range(FILL_METRICS):
        stored = read_whisper(instance.whisper_path(fill_name(number, i)), now - 900, now + 1)
        missing += [(fill_name(number, i), j) for j in range(1, FILL_POINTS + 1)
                    if stored.get(now - j) != j]
    return missing


def wait_line(instance: CarbonInstance, text: str, after: int, timeout: float) -> None:
    """Poll the daemon's output every 2 ms until ``text`` appears past offset ``after``."""
    path = instance.root / "stdout.log"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with open(path, "rb") as handle:
            handle.seek(after)
            if text.encode() in handle.read():
                return
        time.sleep(0.002)
    raise AssertionError("no %r in the daemon's output" % text)


def start(instance: CarbonInstance) -> None:
    """Start and wait until the reactor runs (carbonlink answers): a SIGTERM before that
    finds Python's default handler."""
    instance.start_foreground()
    wait_for(lambda: answers(instance), timeout=30, what="carbonlink to answer")


def answers(instance: CarbonInstance) -> bool:
    try:
        carbonlink(instance.query_port, {"type": "cache-query", "metric": "kill.none"})
    except (OSError, AssertionError, EOFError):
        return False
    return True


def spawn(instance: CarbonInstance) -> None:
    """Start without waiting for the listener (for kills during the replay)."""
    import subprocess
    import sys

    from tests.support import ROOT

    env = dict(os.environ, GRAPHITE_ROOT=str(instance.root), PYTHONPATH=str(ROOT))
    log = open(instance.root / "stdout.log", "w")
    instance.proc = subprocess.Popen(
        [sys.executable, "-m", "carbon.daemon", instance.program, "--nodaemon", "start"],
        env=env, stdout=log, stderr=subprocess.STDOUT)


def kill(instance: CarbonInstance) -> None:
    instance.proc.send_signal(signal.SIGKILL)
    instance.proc.wait(10)
    keep_output(instance)


def keep_output(instance: CarbonInstance) -> None:
    """The next start truncates stdout.log: keep each run's lines in history.log."""
    with open(instance.root / "history.log", "a") as history:
        history.write(instance.output() + "--- killed\n")


def test_kill9_loses_nothing_the_daemon_read(tmp_path: Path) -> None:
    kills = int(os.environ.get("CARBON_KILL9_KILLS", "3"))
    seed = int(os.environ.get("CARBON_KILL9_SEED", str(random.SystemRandom().randrange(10**6))))
    chooser = random.Random(seed)
    instance = CarbonInstance(tmp_path, MAX_UPDATES_PER_SECOND=200,
                              MAX_CREATES_PER_MINUTE="inf", CACHE_JOURNAL_SEGMENT_BYTES=262144,
                              LOG_CREATES=False, LOG_LISTENER_CONN_SUCCESS=False)
    (instance.conf / "storage-schemas.conf").write_text(SCHEMAS)
    base = int(time.time()) - MAX_ROUNDS - 600
    load = Load(instance, base)
    load.thread.start()
    confirmed = -1
    fills: list[int] = []  # the time of each fill
    phases: list[str] = []
    try:
        start(instance)
        load.connected.set()
        for number in range(kills):
            phase = ("create", "update", "replay")[number % 3]
            load.create_phase = phase == "create"
            if phase == "replay":
                # A journal that takes a while to replay; kill, then kill the next start
                # while it replays (before it listens).
                fills.append(int(time.time()))
                fill(instance, len(fills) - 1, fills[-1])
                confirmed = confirmed_round(instance, base)
                load.connected.clear()
                kill(instance)
                offset = 0  # spawn starts a fresh stdout.log
                spawn(instance)
                wait_line(instance, "Journal: replaying", offset, 30)
                time.sleep(chooser.uniform(0.0, 0.04))
                kill(instance)
                assert "Journal: replayed" not in instance.output()[offset:], \
                    "the replay ended before the kill"
            else:
                time.sleep(chooser.uniform(0.5, 2.0))
                confirmed = confirmed_round(instance, base)
                kill(instance)
                load.connected.clear()
            phases.append(phase)
            load.resume_from(confirmed)
            start(instance)
            load.connected.set()
        time.sleep(0.5)
        confirmed = confirmed_round(instance, base)
    finally:
        load.stop.set()
        load.connected.clear()
        load.thread.join(10)
    assert confirmed > 0 and len(phases) == kills
    # Write everything: a start with no rate limit, then SIGTERM (drains the cache).
    instance.kill()
    instance.settings["MAX_UPDATES_PER_SECOND"] = "inf"
    instance.write_conf()
    start(instance)
    assert instance.terminate(timeout=120) == 0, instance.output()[-3000:]
    keep_output(instance)
    output = (instance.root / "history.log").read_text()
    assert "Traceback" not in output, output[-3000:]
    wsp = list((instance.storage / "whisper").rglob("*.wsp"))
    for path in wsp:  # every file is a whisper file
        whisper.info(str(path))
    missing = []
    for i in range(UPDATED):
        stored = read_whisper(instance.whisper_path(updated_name(i)), base - 10,
                              base + MAX_ROUNDS)
        missing += [(updated_name(i), k) for k in range(confirmed + 1)
                    if stored.get(base + k) != k * 1000 + i]
    created = [k for k, yes in load.creating.items() if yes and k <= confirmed]
    for k in created:
        for j in range(NEW_A_ROUND):
            stamp = (base + k) // 10 * 10
            stored = read_whisper(instance.whisper_path(created_name(k, j)), base - 20,
                                  base + MAX_ROUNDS)
            if stored.get(stamp) != k * 10 + j:
                missing.append((created_name(k, j), k))
    for number, now in enumerate(fills):
        missing += fill_missing(instance, number, now)
    notes = [line for line in output.splitlines()
             if "rror" in line or "unreadable" in line or "Journal" in line]
    assert not missing, "seed %d: %d points lost, e.g. %s\n%s" % (
        seed, len(missing), missing[:5], "\n".join(notes[-40:]))
    assert created and port_open  # creates happened before kills
    print("kill -9: %d kills (%s), %d rounds confirmed, %d points checked, %d files, seed %d"
          % (kills, ",".join(phases), confirmed + 1, (confirmed + 1) * (UPDATED + 1)
             + len(created) * NEW_A_ROUND, len(wsp), seed))
