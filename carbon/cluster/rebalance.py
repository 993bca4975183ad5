"""Move every metric whose owners change from an old ring (cluster file) to a new one.

Steps (each idempotent, so a crashed run is resumed by running the same command):

1. write every host's configuration for the move and start the new hosts;
2. send each host's agent the rebalance state and tell the relays (the agent SIGHUPs
   its relay, which swaps its ring in place and confirms) to route with the
   ``cluster-rebalance`` router: new owners get every point, old owners too until a
   metric has moved (double-write); SIGHUP the render apps to read the new CLUSTER_SERVERS;
3. list the old hosts' metrics (their agents) and plan the moves: a metric an old host
   owned on the old ring and does not own on the new ring is pulled by each new owner
   lacking it; the plan is kept in ``ROOT/rebalance/plan.json``;
4. per metric: the new owner's agent pulls it from the old owner's agent (rate-limited
   stream), merges whisper-fill style and verifies; the name is then reported moved to
   every relay host and journaled (``journal.txt``: a rerun skips journaled names);
5. the relays are told to route on the new ring alone (swapped in place, confirmed:
   the double-write ends); with ``delete=True`` the moved metrics whose old copy changed
   after its pull (file stamp, or points still in the old host's caches) are pulled
   once more, then old copies are removed in batches (each only while the caches hold
   no points of it and its file is unchanged since the last pull, else pulled again),
   or listed;
6. hosts no longer in the file stop.
"""

from __future__ import annotations

import http.client
import json
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any, TextIO

from carbon.cluster import control, generate
from carbon.cluster.agent import whisper_listing
from carbon.cluster.spec import ClusterSpec, HostSpec
from carbon.config.settings import Settings
from carbon.relay.routing import ConsistentHashingRouter

DELETE_BATCH = 1000  # old copies removed a request


@dataclass
class Move:
    """One metric to move: from ``source`` to each host in ``targets``; then removed from
    the hosts in ``delete``."""

    name: str
    size: int
    source: str
    targets: list[str]
    delete: list[str] = field(default_factory=list)


@dataclass
class Rates:
    """Transfer limits: bytes/s and files/s over all workers (0: unlimited)."""

    bytes_per_second: float = 0.0
    files_per_second: float = 0.0
    workers: int = 4


def ring(spec: ClusterSpec) -> ConsistentHashingRouter:
    router = ConsistentHashingRouter(Settings(
        REPLICATION_FACTOR=spec.replication_factor, DIVERSE_REPLICAS=spec.diverse_replicas,
        ROUTER_HASH_TYPE=spec.hash_type, RELAY_HASH_CACHE_SIZE=0))
    for dest in spec.destinations():
        router.add_destination(dest)
    return router


def owners(router: ConsistentHashingRouter, spec: ClusterSpec, name: str) -> list[str]:
    """Names of the hosts holding ``name`` on ``spec``'s ring, in replica order."""
    out: list[str] = []
    for dest in router.compute_destinations(name):
        host = spec.host_of(dest.host).name
        if host not in out:
            out.append(host)
    return out


def agent_call(host: HostSpec, method: str, path: str, body: bytes = b"",
               timeout: float = 120.0) -> bytes:
    """One request to ``host``'s agent; OSError on a failed answer."""
    conn = http.client.HTTPConnection(host.address, host.agent_port, timeout=timeout)
    try:
        conn.request(method, path, body=body or None)
        reply = conn.getresponse()
        data = reply.read()
        if reply.status != 200:
            raise OSError("agent %s %s %s: %d %s" % (host.name, method, path, reply.status,
                                                      data.decode("utf-8", "replace")[:300]))
        return data
    finally:
        conn.close()


def listing(host: HostSpec) -> list[tuple[str, int]]:
    text = agent_call(host, "GET", "/list").decode("utf-8")
    out = []
    for line in text.splitlines():
        name, _, size = line.rpartition(" ")
        out.append((name, int(size)))
    return out


def plan(old: ClusterSpec, new: ClusterSpec,
         listings: dict[str, list[tuple[str, int]]] | None = None) -> list[Move]:
    """The moves from ``old``'s ring to ``new``'s, from each old host's local metrics."""
    old_ring, new_ring = ring(old), ring(new)
    moves: dict[str, Move] = {}
    for host in old.hosts:
        names = listings[host.name] if listings is not None else listing(host)
        for name, size in names:
            before = owners(old_ring, old, name)
            if host.name not in before:
                continue  # not placed here by the ring (e.g. a cache's own metrics)
            after = owners(new_ring, new, name)
            targets = [h for h in after if h not in before]
            leaving = [h for h in before if h not in after]
            if not targets and not leaving:
                continue
            move = moves.get(name)
            if move is None:
                moves[name] = Move(name, size, host.name, targets, leaving)
    return sorted(moves.values(), key=lambda m: m.name)


def estimate(moves: list[Move], rates: Rates) -> dict[str, Any]:
    """What a move would do: metrics, transfers, bytes and the time at ``rates``."""
    transfers = sum(len(m.targets) for m in moves)
    size = sum(m.size * len(m.targets) for m in moves)
    seconds = 0.0
    if rates.bytes_per_second > 0:
        seconds = max(seconds, size / rates.bytes_per_second)
    if rates.files_per_second > 0:
        seconds = max(seconds, transfers / rates.files_per_second)
    return {"metrics": len(moves), "transfers": transfers, "bytes": size,
            "deletes": sum(len(m.delete) for m in moves),
            "seconds": seconds if rates.bytes_per_second or rates.files_per_second else None}


class Progress:
    """Progress line with rate and ETA on ``out`` (once a second at most)."""

    def __init__(self, total: int, total_bytes: int, out: TextIO | None) -> None:
        self.total, self.total_bytes, self.out = total, total_bytes, out
        self.done = self.bytes = 0
        self.started = time.monotonic()
        self.last = 0.0
        self.lock = threading.Lock()

    def add(self, size: int) -> None:
        with self.lock:
            self.done += 1
            self.bytes += size
            now = time.monotonic()
            if self.out is not None and (now - self.last >= 1.0 or self.done == self.total):
                self.last = now
                self.out.write(self.line(now) + ("\r" if self.out.isatty() else "\n"))
                self.out.flush()

    def line(self, now: float | None = None) -> str:
        elapsed = max(1e-6, (now or time.monotonic()) - self.started)
        rate = self.done / elapsed
        left = (self.total - self.done) / rate if rate > 0 else 0.0
        return "moved %d/%d metrics, %.1f MB, %.0f metrics/s, ETA %d:%02d" % (
            self.done, self.total, self.bytes / 1e6, rate, left // 60, left % 60)


class Throttle:
    """Keeps the start of transfers at most ``per_second`` a second (0: no limit)."""

    def __init__(self, per_second: float) -> None:
        self.interval = 1.0 / per_second if per_second > 0 else 0.0
        self.next = time.monotonic()
        self.lock = threading.Lock()

    def wait(self) -> None:
        if not self.interval:
            return
        with self.lock:
            now = time.monotonic()
            slot = max(now, self.next)
            self.next = slot + self.interval
        if slot > now:
            time.sleep(slot - now)


@dataclass
class Report:
    """The outcome of a rebalance."""

    moves: int = 0
    skipped: int = 0
    bytes: int = 0
    unverified: list[str] = field(default_factory=list)
    deleted: int = 0
    left: list[str] = field(default_factory=list)  # old copies kept (host name, metric)
    seconds: float = 0.0
    transfer_seconds: float = 0.0
    caught_up: int = 0  # metrics pulled again because their old copy changed
    phases: dict[str, float] = field(default_factory=dict)  # step -> seconds

    def phase(self, name: str, since: float) -> float:
        """Record the seconds of step ``name`` begun at ``since``; returns now."""
        now = time.monotonic()
        self.phases[name] = self.phases.get(name, 0.0) + now - since
        return now


class Rebalancer:
    """Runs the steps of the module docstring for OLD -> NEW."""

    def __init__(self, old: ClusterSpec, new: ClusterSpec, rates: Rates | None = None,
                 out: TextIO | None = None, delete: bool = False,
                 crash_after: int | None = None) -> None:
        if old.root != new.root:
            raise ValueError("old and new cluster files must share one root folder")
        self.old, self.new = old, new
        self.rates = rates or Rates()
        self.out = out
        self.delete = delete
        self.crash_after = crash_after  # tests: stop after this many moves (a 'crash')
        self.folder = os.path.join(new.root, "rebalance")
        self.journal_path = os.path.join(self.folder, "journal.txt")
        self.plan_path = os.path.join(self.folder, "plan.json")
        # name -> (mtime_ns, read_ns) of the source's file at the last pull
        self.stamps: dict[str, tuple[int, int]] = {}

    # -- helpers ----------------------------------------------------------------------
    def say(self, text: str) -> None:
        if self.out is not None:
            self.out.write(text + "\n")
            self.out.flush()

    def all_hosts(self) -> list[HostSpec]:
        """The new file's hosts, then old hosts that leave the cluster."""
        names = self.new.names()
        return list(self.new.hosts) + [h for h in self.old.hosts if h.name not in names]

    def spec_of(self, host: HostSpec) -> ClusterSpec:
        return self.new if host.name in self.new.names() else self.old

    def journal(self) -> set[str]:
        try:
            with open(self.journal_path, encoding="utf-8") as handle:
                return {line[5:].rstrip("\n") for line in handle if line.startswith("done ")}
        except FileNotFoundError:
            return set()

    # -- steps ------------------------------------------------------------------------
    def prepare(self, resume: bool) -> None:
        state_rel = os.path.join("rebalance", "state.json")
        state = {"old": [str(d) for d in self.old.destinations()],
                 "new": [str(d) for d in self.new.destinations()],
                 "hash_type": self.new.hash_type,
                 "replication_factor": self.new.replication_factor,
                 "diverse_replicas": self.new.diverse_replicas, "reset": not resume}
        old_state = {"old": state["old"], "new": state["old"],
                     "hash_type": self.old.hash_type,
                     "replication_factor": self.old.replication_factor,
                     "diverse_replicas": self.old.diverse_replicas}
        for host in self.all_hosts():
            spec = self.spec_of(host)
            path = os.path.join(generate.storage_dir(spec, host), state_rel)
            generate.write_host(spec, host, generate.rebalance_relay(self.old, self.new, path))
        for host in self.new.hosts:
            if host.name not in self.old.names():
                # a new host's relay starts on the old ring until every relay switches
                self._state_file(self.new, host, old_state)
                control.start(self.new, host.name, parallel=True)
        for host in self.all_hosts():
            agent_call(host, "POST", "/state", json.dumps(state).encode())
        union = generate.rebalance_relay(self.old, self.new, "")["DESTINATIONS"]
        self.reload_relays([(host, union) for host in self.all_hosts()])
        for host in self.all_hosts():  # new CLUSTER_SERVERS, port kept open
            control.reload_render(self.spec_of(host), host.name)
        self.say("relays double-write to old and new owners; render apps see every host")

    def reload_relays(self, targets: list[tuple[HostSpec, list[str]]]) -> None:
        """Every host's relay swaps its ring in place (its agent sends the SIGHUP and
        waits until the master and each worker confirmed ``destinations``), hosts in
        parallel; a relay that does not run is started."""
        def one(target: tuple[HostSpec, list[str]]) -> None:
            host, destinations = target
            try:
                agent_call(host, "POST", "/relay-reload",
                           json.dumps({"destinations": destinations}).encode())
            except OSError as exc:
                if "relay not running" not in str(exc):
                    raise
                control.start(self.spec_of(host), host.name, only="relay")
        with ThreadPoolExecutor(max(1, len(targets))) as pool:
            list(pool.map(one, targets))

    def _state_file(self, spec: ClusterSpec, host: HostSpec, state: dict[str, Any]) -> None:
        folder = os.path.join(generate.storage_dir(spec, host), "rebalance")
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, "state.json"), "w") as out:
            json.dump(dict(state, moved=os.path.join(folder, "moved.txt")), out)

    def load_or_plan(self, resume: bool) -> list[Move]:
        if resume and os.path.exists(self.plan_path):
            with open(self.plan_path, encoding="utf-8") as handle:
                return [Move(**m) for m in json.load(handle)["moves"]]
        moves = plan(self.old, self.new)
        os.makedirs(self.folder, exist_ok=True)
        with open(self.plan_path + ".tmp", "w", encoding="utf-8") as out:
            json.dump({"old": self.old.path, "new": self.new.path,
                       "moves": [asdict(m) for m in moves]}, out)
        os.replace(self.plan_path + ".tmp", self.plan_path)
        with open(self.journal_path, "w"):
            pass
        return moves

    def transfer(self, moves: list[Move], report: Report, batch: int = 25) -> None:
        """Pull every move not journaled yet, ``batch`` metrics a request per
        (source, target) pair; a metric is reported moved once every target verified it."""
        done = self.journal()
        todo = [m for m in moves if m.name not in done]
        if self.crash_after is not None:
            todo = todo[:self.crash_after]
        report.skipped = len(moves) - len([m for m in moves if m.name not in done])
        if report.skipped:
            self.say("resuming: %d of %d metrics already moved" % (report.skipped, len(moves)))
        progress = Progress(len(todo), sum(m.size * len(m.targets) for m in todo), self.out)
        throttle = Throttle(self.rates.files_per_second)
        workers = max(1, self.rates.workers)
        rate = self.rates.bytes_per_second / workers if self.rates.bytes_per_second else 0.0
        groups: dict[tuple[str, str], list[Move]] = {}
        for move in todo:
            for target in move.targets:
                groups.setdefault((move.source, target), []).append(move)
        tasks = [(source, target, group[i:i + batch])
                 for (source, target), group in groups.items()
                 for i in range(0, len(group), batch)]
        waiting = {m.name: len(m.targets) for m in todo}
        failed: set[str] = set()
        journal = open(self.journal_path, "a", encoding="utf-8")
        relays = self.all_hosts()
        pending: list[str] = []
        lock = threading.Lock()

        def flush_moved() -> None:
            with lock:
                names, pending[:] = list(pending), []
            if names:
                body = "".join(n + "\n" for n in names).encode()
                for host in relays:
                    agent_call(host, "POST", "/moved", body)
                journal.write("".join("done %s\n" % n for n in names))
                journal.flush()
                os.fsync(journal.fileno())

        def pull(task: tuple[str, str, list[Move]]) -> None:
            source, target, group = task
            for _ in group:
                throttle.wait()
            answers = json.loads(agent_call(
                self.new.host(target), "POST", "/pull?source=%s&rate=%f" % (
                    self.spec_host(source).agent_address, rate),
                "".join(m.name + "\n" for m in group).encode()))
            with lock:
                for answer in answers:
                    name = answer["name"]
                    report.bytes += int(answer["bytes"])
                    self._stamp(answer)
                    if not answer["verified"]:
                        failed.add(name)
                    waiting[name] -= 1
                    if waiting[name] == 0:
                        report.moves += 1
                        if name in failed:
                            report.unverified.append(name)
                        else:
                            pending.append(name)
            for answer in answers:
                progress.add(int(answer["bytes"]))

        started = time.monotonic()
        stop = threading.Event()

        def ticker() -> None:
            while not stop.wait(1.0):
                flush_moved()
        tick = threading.Thread(target=ticker, daemon=True)
        tick.start()
        try:
            with ThreadPoolExecutor(workers) as pool:
                for _ in pool.map(pull, tasks):
                    pass
        finally:
            stop.set()
            tick.join()
            flush_moved()
            journal.close()
        report.transfer_seconds = time.monotonic() - started

    def spec_host(self, name: str) -> HostSpec:
        return self.old.host(name)

    def _stamp(self, answer: dict[str, Any]) -> None:
        if answer.get("verified") and int(answer.get("mtime_ns", -1)) >= 0:
            self.stamps[answer["name"]] = (int(answer["mtime_ns"]), int(answer["read_ns"]))
        else:
            self.stamps.pop(answer["name"], None)

    def catch_up(self, moves: list[Move], batch: int = 25) -> set[str]:
        """Pull ``moves`` once more before their old copies go: points delivered to an
        old owner after its first pull (the relays' last points routed on the old ring)
        are merged too. Returns the names whose new copy did not verify."""
        groups: dict[tuple[str, str], list[str]] = {}
        for move in moves:
            for target in move.targets:
                groups.setdefault((move.source, target), []).append(move.name)
        tasks = [(source, target, names[i:i + batch]) for (source, target), names
                 in groups.items() for i in range(0, len(names), batch)]
        lock = threading.Lock()

        def pull(task: tuple[str, str, list[str]]) -> list[str]:
            source, target, names = task
            answers = json.loads(agent_call(
                self.new.host(target), "POST", "/pull?source=%s" % (
                    self.spec_host(source).agent_address),
                "".join(name + "\n" for name in names).encode()))
            with lock:
                for answer in answers:
                    self._stamp(answer)
            return [a["name"] for a in answers if not a["verified"]]
        with ThreadPoolExecutor(max(1, self.rates.workers)) as pool:
            return {name for failed in pool.map(pull, tasks) for name in failed}

    def finish(self, moves: list[Move], report: Report) -> None:
        # the double-write ends: every relay routes on the new ring alone (confirmed)
        mark = time.monotonic()
        final = generate.final_relay(self.new)
        for host in self.new.hosts:
            generate.write_host(self.new, host)
        for host in self.old.hosts:
            if host.name not in self.new.names():  # leaving: its relay sends to the new ring
                generate.write_host(self.old, host, final)
        self.reload_relays([(host, final["DESTINATIONS"]) for host in self.all_hosts()])
        mark = report.phase("switch", mark)
        verified = self.journal()
        done = [m for m in moves if m.name in verified]
        if self.delete:  # the catch-up pulls happen in the delete rounds, as needed
            report.left += self._delete_all([m for m in done if m.delete], report)
            mark = report.phase("delete", mark)
        for move in done:
            if not self.delete or move.name not in verified:
                report.left += ["%s %s" % (name, move.name) for name in move.delete]
        with open(os.path.join(self.folder, "old-copies.txt"), "w", encoding="utf-8") as out:
            out.write("".join(line + "\n" for line in report.left))
        for host in self.new.hosts:
            control.reload_render(self.new, host.name)
        for host in self.old.hosts:
            if host.name not in self.new.names():
                control.stop(self.old, host.name)
        report.phase("end", mark)

    def _delete_all(self, moves: list[Move], report: Report, rounds: int = 60) -> list[str]:
        """Remove the old copies of ``moves`` in batches (``POST /delete-many``), after a
        ``sync`` on the new owners. This is also the catch-up: a copy whose points the
        old host's caches still hold waits (they reach its file, then it has changed); a
        copy that changed since its pull (points delivered to the old owner after it:
        the relays' last ones routed on the old ring, or double-written ones the cache
        wrote late) is pulled again, synced, and asked for again; only a copy unchanged
        since its last pull is removed. Returns the copies kept ("host name" lines)."""
        def sync(group: list[Move]) -> None:
            for name in sorted({t for m in group for t in m.targets}):
                agent_call(self.new.host(name), "POST", "/sync")
        kept: list[str] = []
        unstamped = [m for m in moves if m.name not in self.stamps]
        if unstamped:  # pulled by an earlier run: when is unknown, so pulled again now
            report.caught_up += len(unstamped)
            failed = self.catch_up(unstamped)
            kept += ["%s %s" % (h, m.name) for m in unstamped if m.name in failed
                     for h in m.delete]
            moves = [m for m in moves if m.name not in failed]
        todo = {(host, m.name): m for m in moves for host in m.delete}
        sync(moves)
        for _ in range(rounds):
            if not todo:
                break
            by_host: dict[str, list[str]] = {}
            for host, name in todo:
                by_host.setdefault(host, []).append(name)
            again: list[Move] = []
            waiting = False
            for host, names in by_host.items():
                for i in range(0, len(names), DELETE_BATCH):
                    part = names[i:i + DELETE_BATCH]
                    lines = "".join(
                        "%s %d %d\n" % (n, *(self.stamps.get(n, (-1, -1))
                                              if todo[(host, n)].source == host
                                              else (-1, -1))) for n in part)
                    answer = json.loads(agent_call(self.spec_host(host), "POST",
                                                   "/delete-many", lines.encode()))
                    for name, outcome in answer.items():
                        if outcome == "pending":
                            waiting = True
                            continue
                        move = todo.pop((host, name))
                        if outcome == "deleted":
                            report.deleted += 1
                        elif outcome == "changed":
                            todo[(host, name)] = move
                            again.append(move)
                            report.caught_up += 1
                        # "missing": no old copy to remove
            if again:
                failed = self.catch_up(again)
                for key in [k for k in todo if k[1] in failed]:
                    report.left.append("%s %s" % key)  # new copy unverified: keep the old
                    del todo[key]
                sync(again)
            if waiting and not again:
                time.sleep(0.5)
        return kept + ["%s %s" % key for key in todo]

    def run(self, resume: bool | None = None) -> Report:
        started = time.monotonic()
        if resume is None:
            resume = os.path.exists(self.plan_path) and self._same_plan()
        report = Report()
        self.prepare(resume)
        mark = report.phase("prepare", started)
        moves = self.load_or_plan(resume)
        mark = report.phase("plan", mark)
        self.say("%d metrics to move (%d transfers, %.1f MB)" % (
            len(moves), sum(len(m.targets) for m in moves),
            sum(m.size * len(m.targets) for m in moves) / 1e6))
        self.transfer(moves, report)
        report.phase("transfer", mark)
        if self.crash_after is not None and report.moves >= self.crash_after:
            report.seconds = time.monotonic() - started
            return report  # the test's crash: the plan and journal stay for a resume
        self.finish(moves, report)
        os.replace(self.plan_path, self.plan_path + ".done")
        report.seconds = time.monotonic() - started
        return report

    def _same_plan(self) -> bool:
        try:
            with open(self.plan_path, encoding="utf-8") as handle:
                head = json.load(handle)
        except (OSError, ValueError):
            return False
        return head.get("old") == self.old.path and head.get("new") == self.new.path


def dry_run(old: ClusterSpec, new: ClusterSpec, rates: Rates,
            listings: dict[str, list[tuple[str, int]]] | None = None) -> dict[str, Any]:
    """What ``rebalance`` would move, without changing anything."""
    return estimate(plan(old, new, listings), rates)


def local_listings(spec: ClusterSpec) -> dict[str, list[tuple[str, int]]]:
    """Listings read from this machine's host folders (dry runs without agents)."""
    return {host.name: whisper_listing(generate.whisper_dir(spec, host)) for host in spec.hosts}
