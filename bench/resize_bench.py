"""The online resize vs whisper-resize.py file by file (issue 29).

N whisper files of 10s:1d, full of points, resized to 10s:1d,1m:30d:

* baseline: whisper 1.1.10's whisper-resize.py run once per file (``--nobackup``), with
  no cache running (writes stopped), on a copy of the files (``--baseline-files M``
  runs it on the first M files and scales the time to N, said so in the output);
* ours: a real carbon-cache (this project's) on ``--address`` takes ``--rate`` points/s
  for those very metrics over one line connection while ``carbon.cluster.resize``
  rewrites every file holding the metrics on the cache; a reader meanwhile reads random
  metrics as the render app does (carbonlink, then the file) and counts reads that fail,
  return a value never sent, or lack a point an earlier read returned. Afterwards the
  sender stops, the cache drains and stops, and every point sent is looked for in the
  files: lost = sent - found.

    python bench/resize_bench.py [--files 10000] [--rate 100000] [--baseline-files N]
                                 [--address 127.0.0.61] [--no-fsync] [--keep DIR]

Prints one JSON object (wall times, speed-up, sent/stored/lost, reads/wrong reads, the
load average before and after).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import whisper  # noqa: E402

from carbon.carbonlink.client import cache_query_bulk  # noqa: E402
from webapp.storage.whisper_read import fetch  # noqa: E402

OLD = [(10, 8640)]
NEW = "10s:1d,1m:30d"
STEP = 10


def free_port(address: str) -> int:
    with socket.socket() as sock:
        sock.bind((address, 0))
        return sock.getsockname()[1]


def names(count: int) -> list[str]:
    return ["bench.g%03d.m%05d" % (i % 100, i) for i in range(count)]


def path_of(base: str, name: str) -> str:
    return os.path.join(base, *name.split(".")) + ".wsp"


def make_files(base: str, metrics: list[str], now: int, first_sent: int) -> int:
    """Every file a copy of one 10s:1d file, full of points before ``first_sent`` (the
    sender's points come after: a read there sees only points sent); returns its size."""
    os.makedirs(base, exist_ok=True)
    template = os.path.join(os.path.dirname(base), "template.wsp")
    whisper.create(template, OLD)
    whisper.update_many(template, [(now - STEP * k, float(k % 1000)) for k in range(8640)
                                   if now - STEP * k < first_sent], now=now)
    for name in metrics:
        path = path_of(base, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        shutil.copyfile(template, path)
    return os.path.getsize(template)


def value(index: int, k: int) -> float:
    return float(index * 100000 + k % 100000)


class Sender(threading.Thread):
    """Round k: one point for every metric at ``base + 10 k``, paced to ``rate``."""

    def __init__(self, address: tuple[str, int], metrics: list[str], base: int,
                 rate: float) -> None:
        super().__init__(daemon=True)
        self.address, self.metrics, self.base, self.rate = address, metrics, base, rate
        self.rounds = 0
        self.sent = 0
        self.stop = threading.Event()
        self.seconds = 0.0

    def run(self) -> None:
        started = time.monotonic()
        chunk = 2000
        with socket.create_connection(self.address, timeout=30) as sock:
            while not self.stop.is_set() and self.rounds < 8000:
                t = self.base + STEP * self.rounds
                k = self.rounds
                for start in range(0, len(self.metrics), chunk):
                    part = self.metrics[start:start + chunk]
                    sock.sendall("".join("%s %r %d\n" % (m, value(start + i, k), t)
                                         for i, m in enumerate(part)).encode())
                    self.sent += len(part)
                    ahead = self.sent / self.rate - (time.monotonic() - started)
                    if ahead > 0:
                        time.sleep(ahead)
                self.rounds += 1
        self.seconds = time.monotonic() - started


class Reader(threading.Thread):
    """Random metrics read as the render app does: carbonlink, then the file."""

    def __init__(self, query: tuple[str, int], base_dir: str, metrics: list[str],
                 sender: Sender) -> None:
        super().__init__(daemon=True)
        self.query, self.base_dir, self.metrics, self.sender = query, base_dir, metrics, sender
        self.reads = 0
        self.wrong: list[str] = []
        self.seen: dict[int, set[int]] = {}
        self.stop = threading.Event()

    def run(self) -> None:
        rng = random.Random(1)
        base = self.sender.base
        while not self.stop.is_set():
            index = rng.randrange(len(self.metrics))
            metric = self.metrics[index]
            try:
                cached = cache_query_bulk(self.query, [metric]).get(metric, [])
                now = int(time.time())
                result, _ = fetch(path_of(self.base_dir, metric), base - 1, now, now)
            except Exception as exc:  # noqa: BLE001 - any failure is a wrong read
                self.wrong.append("%s: %s" % (metric, exc))
                continue
            got = {t: v for t, v in cached if t >= base}
            if result is not None:
                (first, _, step), values = result
                for i, v in enumerate(values):
                    t = first + i * step
                    if v is not None and t >= base:
                        got[t] = v
            for t, v in got.items():
                k = (t - base) // STEP
                if v != value(index, k):
                    self.wrong.append("%s at %d: %r" % (metric, t, v))
            missing = self.seen.get(index, set()) - set(got)
            if missing:
                self.wrong.append("%s: %d points gone" % (metric, len(missing)))
            self.seen[index] = set(got)
            self.reads += 1


def baseline(base: str, metrics: list[str]) -> float:
    script = os.path.join(os.path.dirname(sys.executable), "whisper-resize.py")
    started = time.monotonic()
    for name in metrics:
        subprocess.run([sys.executable, script, path_of(base, name), *NEW.split(","),
                        "--nobackup"], check=True, stdout=subprocess.DEVNULL)
    return time.monotonic() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--files", type=int, default=10000)
    parser.add_argument("--rate", type=float, default=100000, help="points/s sent")
    parser.add_argument("--baseline-files", type=int, default=0,
                        help="run whisper-resize.py on this many files (0: all)")
    parser.add_argument("--address", default="127.0.0.61")
    parser.add_argument("--no-fsync", action="store_true")
    parser.add_argument("--keep", help="work in this folder and keep it")
    args = parser.parse_args()
    root = args.keep or tempfile.mkdtemp(prefix="resize-bench-")
    os.makedirs(root, exist_ok=True)
    load_before = os.getloadavg()
    metrics = names(args.files)
    now = int(time.time())
    ours_dir = os.path.join(root, "storage", "whisper")
    theirs_dir = os.path.join(root, "baseline", "whisper")
    base = (now - 86400 + 3600) // STEP * STEP  # the sender's first timestamp
    size = make_files(ours_dir, metrics, now, base)
    subset = metrics[:args.baseline_files or args.files]
    for name in subset:
        os.makedirs(os.path.dirname(path_of(theirs_dir, name)), exist_ok=True)
        shutil.copyfile(path_of(ours_dir, name), path_of(theirs_dir, name))
    result: dict = {"files": args.files, "old_size": size, "load_before": load_before}
    seconds = baseline(theirs_dir, subset)
    result["baseline_files"] = len(subset)
    result["baseline_seconds"] = seconds
    result["baseline_seconds_for_all"] = seconds * args.files / len(subset)
    shutil.rmtree(os.path.join(root, "baseline"))

    conf = os.path.join(root, "conf")
    os.makedirs(conf, exist_ok=True)
    line, query = free_port(args.address), free_port(args.address)
    with open(os.path.join(conf, "carbon.conf"), "w") as handle:
        handle.write("[cache]\n" + "".join("%s = %s\n" % kv for kv in {
            "LINE_RECEIVER_INTERFACE": args.address, "LINE_RECEIVER_PORT": line,
            "PICKLE_RECEIVER_INTERFACE": args.address,
            "PICKLE_RECEIVER_PORT": free_port(args.address),
            "CACHE_QUERY_INTERFACE": args.address, "CACHE_QUERY_PORT": query,
            "ENABLE_UDP_LISTENER": False, "MAX_CACHE_SIZE": "inf",
            "MAX_UPDATES_PER_SECOND": "inf", "MAX_CREATES_PER_MINUTE": "inf",
            "CARBON_METRIC_INTERVAL": 0, "LOG_UPDATES": False}.items()))
    schemas = os.path.join(conf, "storage-schemas.conf")
    with open(schemas, "w") as handle:
        handle.write("[all]\npattern = .*\nretentions = 10s:1d\n")
    env = dict(os.environ, GRAPHITE_ROOT=root,
               PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    log = open(os.path.join(root, "cache.log"), "w")
    cache = subprocess.Popen([sys.executable, "-m", "carbon.daemon", "carbon-cache",
                              "--nodaemon", "start"], env=env, stdout=log,
                             stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                socket.create_connection((args.address, line), timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        sender = Sender((args.address, line), metrics, base, args.rate)
        sender.start()
        reader = Reader((args.address, query), ours_dir, metrics, sender)
        reader.start()
        time.sleep(3)  # points flowing
        with open(schemas, "w") as handle:
            handle.write("[all]\npattern = .*\nretentions = %s\n" % NEW)
        # the command an operator runs (its own process: the sender and reader threads
        # here do not share its interpreter)
        command = [sys.executable, "-m", "carbon.cluster.resize", "--whisper-dir", ours_dir,
                   "--conf-dir", conf, "--carbonlink", "%s:%d" % (args.address, query),
                   "--rate-files", "0", "--rate-bytes", "0"]
        if args.no_fsync:
            command.append("--no-fsync")
        started = time.monotonic()
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=7200)
        result["ours_seconds"] = time.monotonic() - started
        result["resize_output"] = done.stdout.strip()
        result["resize_exit"] = done.returncode
        result["sender_alive_at_end"] = sender.is_alive()
        time.sleep(2)
        sender.stop.set()
        sender.join(120)
        reader.stop.set()
        reader.join(60)
        result["points_per_second_sent"] = sender.sent / sender.seconds if sender.seconds else 0
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            pending = cache_query_bulk((args.address, query), metrics[:2000])
            if not any(pending.values()):
                break
            time.sleep(0.5)
        cache.send_signal(signal.SIGTERM)
        cache.wait(300)
    finally:
        if cache.poll() is None:
            cache.kill()
            cache.wait(30)
        log.close()
    stored = 0
    for index, name in enumerate(metrics):
        path = path_of(ours_dir, name)
        (first, _, step), values = whisper.fetch(path, base - 1, base + STEP * sender.rounds)
        got = {first + i * step: v for i, v in enumerate(values)}
        stored += sum(1 for k in range(sender.rounds)
                      if got.get(base + STEP * k) == value(index, k))
    result.update({
        "sent": sender.sent, "stored": stored, "lost": sender.sent - stored,
        "reads": reader.reads, "wrong_reads": len(reader.wrong),
        "wrong_examples": reader.wrong[:3],
        "speedup": result["baseline_seconds_for_all"] / result["ours_seconds"],
        "load_after": os.getloadavg(), "fsync": not args.no_fsync,
    })
    print(json.dumps(result, indent=1))
    if not args.keep:
        shutil.rmtree(root)
    return 0


if __name__ == "__main__":
    sys.exit(main())
