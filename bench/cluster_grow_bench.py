"""Fault 1 at the issue's load: a 4th host added to a running 3-host cluster while
1,000,000 points a minute flow in.

    .venv/bin/python bench/cluster_grow_bench.py [--metrics 10000] [--rate 16667]
                                                  [--before 60] [--after 30]

carbon-cluster starts hosts a, b, c on 127.0.0.N (relay, carbon-cache, render app, agent
each). Three senders write every metric once a round (a new minute each round, value =
the round) through the three relays, paced to ``--rate`` points/s; every send is repeated
until the relay has read all of it (at least once). After ``--before`` seconds,
``carbon-cluster rebalance OLD NEW --delete`` (NEW written by ``add-host --dry-run``) adds
host d and moves its metrics while the load goes on;
the load runs ``--after`` seconds more (at most ``--max-seconds`` in all). A reader polls
the render apps (every host's in turn) for single metrics, mostly ones that move, and
counts wrong answers: a point delivered to a relay more than ``--settle`` seconds before
the request that is missing or has another value, or a failed request. At the end the
cluster stops (relays flush, caches drain) and every metric's whisper file on its owner
on the new ring is read: points lost = delivered points not there; old copies left =
moved metrics still on their old owner.
"""

from __future__ import annotations

import argparse
import bisect
import json
import random
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import whisper  # noqa: E402

from carbon.cluster.rebalance import owners, ring  # noqa: E402
from carbon.cluster.spec import ClusterSpec, load_cluster  # noqa: E402
from tests.cluster.clusterutil import (cli, cluster_file, free_ports_option,  # noqa: E402
                                       send_lines)

STEP = 60
HOSTS = {"a": "127.0.0.41", "b": "127.0.0.42", "c": "127.0.0.43"}
NEW_HOST = ("d", "127.0.0.44")
SENDERS = 3


def loadavg() -> str:
    return Path("/proc/loadavg").read_text().strip()


class Load:
    """SENDERS threads, each sending its share of every metric once a round through one
    relay (relays in turn), paced to ``rate`` points/s over all of them."""

    def __init__(self, spec: ClusterSpec, names: list[str], rate: float, base: int,
                 max_rounds: int) -> None:
        self.spec, self.names, self.base = spec, names, base
        self.interval = len(names) / rate  # seconds per round
        self.max_rounds = max_rounds
        self.finished: list[list[float]] = [[] for _ in range(SENDERS)]  # monotonic times
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._run, args=(k,)) for k in range(SENDERS)]
        self.started = 0.0

    def part(self, name_index: int) -> int:
        return name_index % SENDERS

    def _run(self, k: int) -> None:
        relays = list(self.spec.hosts)
        mine = self.names[k::SENDERS]
        round_ = 0
        while not self.stop.is_set() and round_ < self.max_rounds:
            due = self.started + round_ * self.interval
            if due > time.monotonic():
                time.sleep(due - time.monotonic())
            ts = self.base + round_ * STEP
            relay = relays[(k + round_) % len(relays)]
            send_lines((relay.address, relay.relay_line_port),
                       ["%s %d %d\n" % (n, round_, ts) for n in mine], attempts=600)
            self.finished[k].append(time.monotonic())
            round_ += 1

    def start(self) -> None:
        self.started = time.monotonic()
        for thread in self.threads:
            thread.start()

    def join(self) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join()

    def settled_rounds(self, part: int, before: float) -> int:
        """Rounds of ``part`` delivered to a relay before monotonic time ``before``."""
        return bisect.bisect_right(self.finished[part], before)

    def delivered(self) -> int:
        return sum(len(self.names[k::SENDERS]) * len(self.finished[k]) for k in range(SENDERS))


class Reader:
    """Polls render apps for single metrics and counts wrong answers, per phase."""

    def __init__(self, load: Load, specs: list[ClusterSpec], watched: list[int],
                 settle: float, per_second: float) -> None:
        self.load, self.specs, self.watched = load, specs, watched
        self.settle, self.pause = settle, 1.0 / per_second
        self.phase = "before"
        self.counts: dict[str, dict[str, int]] = {}
        self.examples: list[str] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run)

    def _count(self, key: str) -> None:
        phase = self.counts.setdefault(self.phase, {"reads": 0, "wrong": 0, "errors": 0})
        phase[key] += 1

    def _run(self) -> None:
        turn = 0
        while not self.stop.is_set():
            spec = self.specs[-1]
            host = spec.hosts[turn % len(spec.hosts)]
            turn += 1
            index = random.choice(self.watched)
            name = self.load.names[index]
            asked = time.monotonic()
            settled = self.load.settled_rounds(self.load.part(index), asked - self.settle)
            try:
                got = render_one(host.render_address, name)
            except Exception as exc:  # noqa: BLE001 - any failed answer is a wrong read
                self._count("reads")
                self._count("errors")
                if len(self.examples) < 5:
                    self.examples.append("%s %s: %s" % (host.name, name, exc))
                time.sleep(self.pause)
                continue
            self._count("reads")
            wrong = [r for r in range(settled)
                     if got.get(self.load.base + r * STEP) != float(r)]
            wrong += [ts for ts, v in got.items() if v != float((ts - self.load.base) // STEP)]
            if wrong:
                self._count("wrong")
                if len(self.examples) < 5:
                    self.examples.append("%s %s: %d of %d settled points wrong or missing"
                                         % (host.name, name, len(wrong), settled))
            time.sleep(self.pause)

    def start(self) -> None:
        self.thread.start()

    def join(self) -> None:
        self.stop.set()
        self.thread.join()


def render_one(address: str, name: str) -> dict[int, float]:
    url = "http://%s/render?target=%s&format=json&from=-1d" % (address, name)
    with urllib.request.urlopen(url, timeout=30) as reply:
        failed = reply.headers.get("X-Graphite-Failed-Hosts")
        if failed:
            raise OSError("failed hosts %s" % failed)
        data = json.load(reply)
    return {t: v for s in data for v, t in s["datapoints"] if v is not None}


def whisper_file(spec: ClusterSpec, host: str, name: str) -> Path:
    return Path(spec.host_dir(host)) / "storage" / "whisper" / (name.replace(".", "/") + ".wsp")


def final_check(load: Load, old: ClusterSpec, new: ClusterSpec) -> dict:
    old_ring, new_ring = ring(old), ring(new)
    lost = left = moved = 0
    for index, name in enumerate(load.names):
        rounds = len(load.finished[load.part(index)])
        owner = owners(new_ring, new, name)[0]
        before = owners(old_ring, old, name)[0]
        if owner != before:
            moved += 1
            left += whisper_file(old, before, name).exists()
        path = whisper_file(new, owner, name)
        try:
            (first, _, step), values = whisper.fetch(str(path), load.base - STEP,
                                                     load.base + rounds * STEP)
        except (OSError, whisper.WhisperException):
            lost += rounds
            continue
        have = {first + i * step: v for i, v in enumerate(values) if v is not None}
        lost += sum(have.get(load.base + r * STEP) != float(r) for r in range(rounds))
    return {"points_lost": lost, "moved_metrics": moved, "old_copies_left": left}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--metrics", type=int, default=10000)
    parser.add_argument("--rate", type=float, default=1e6 / 60, help="points/s")
    parser.add_argument("--before", type=float, default=60.0, help="s of load before the add")
    parser.add_argument("--after", type=float, default=30.0, help="s of load after it")
    parser.add_argument("--max-seconds", type=float, default=300.0, help="load at most this")
    parser.add_argument("--settle", type=float, default=5.0,
                        help="a point read this long after delivery must be there")
    parser.add_argument("--reads", type=float, default=4.0, help="reader requests/s")
    parser.add_argument("--folder", default=None)
    args = parser.parse_args()
    folder = Path(args.folder or tempfile.mkdtemp(prefix="cluster-grow-"))
    folder.mkdir(parents=True, exist_ok=True)
    print("loadavg before: %s" % loadavg(), flush=True)
    path = cluster_file(folder, HOSTS, extra='MAX_CACHE_SIZE = "inf"')
    started = cli("start", path)
    assert started.returncode == 0, started.stdout + started.stderr
    spec = load_cluster(str(path))
    new_path = folder / "cluster4.toml"
    specs = [spec]
    try:
        names = ["grow.g%02d.m%05d" % (n % 100, n) for n in range(args.metrics)]
        max_rounds = int(args.max_seconds * args.rate / args.metrics) + 1
        base = int(time.time()) // STEP * STEP - (max_rounds + 5) * STEP  # inside 1 day
        if max_rounds + 5 > 1440:
            raise SystemExit("more rounds than the 1-day schema holds: lower --max-seconds")
        load = Load(spec, names, args.rate, base, max_rounds)
        grown = cli("add-host", path, *NEW_HOST, "--out", new_path, "--dry-run",
                    *free_ports_option())
        assert grown.returncode == 0, grown.stdout + grown.stderr
        new_spec = load_cluster(str(new_path))
        old_ring, new_ring = ring(spec), ring(new_spec)
        moving = [i for i, n in enumerate(names)
                  if owners(new_ring, new_spec, n) != owners(old_ring, spec, n)]
        staying = [i for i in range(len(names)) if i not in set(moving)][:len(moving) // 4]
        reader = Reader(load, specs, moving + staying, args.settle, args.reads)
        load.start()
        reader.start()
        time.sleep(args.before)
        reader.phase = "during"
        began = time.monotonic()
        # add-host --dry-run wrote NEW (host d on free ports); rebalance is add-host's
        # second half, run on that file.
        grow = cli("rebalance", path, new_path, "--delete", timeout=1800)
        rebalanced = time.monotonic() - began
        specs.append(load_cluster(str(new_path)))
        reader.phase = "after"
        print(grow.stdout.strip(), flush=True)
        if grow.returncode != 0:
            print(grow.stderr[-3000:], flush=True)
        time.sleep(max(0.0, min(args.after, args.max_seconds - (time.monotonic() - load.started))))
        load.join()
        seconds = time.monotonic() - load.started
        time.sleep(args.settle)
        reader.join()
        delivered = load.delivered()
    finally:
        for spec_path in (new_path, path):
            if spec_path.exists():
                cli("stop", spec_path)
    result = final_check(load, spec, specs[-1])
    result.update(metrics=args.metrics, target_rate=args.rate, delivered=delivered,
                  load_seconds=seconds, achieved_rate=delivered / seconds,
                  rounds=[len(f) for f in load.finished], add_host_rc=grow.returncode,
                  rebalance_seconds=rebalanced, reads=reader.counts,
                  examples=reader.examples, loadavg_after=loadavg(), folder=str(folder))
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
