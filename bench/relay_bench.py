"""carbon-relay side by side: ours, reference carbon-relay 1.1.10, carbon-c-relay.

Each relay listens for plaintext on 127.0.0.1 and consistent-hashes to counting
destinations (bench/relay_sink.py, one process); the load is N lines over M names
sent flat out over C inbound TCP connections (default 2,000,000 / 100,000 / 4).
Measured: seconds until every point (times the replication factor) has reached the
destinations, lines/s, relay CPU seconds, peak RSS, and points missing at the end.
Checked after each run, from the bytes every destination recorded: each name arrived
only at the destinations carbon's consistent-hash ring places it on (carbon-c-relay's
ring for carbon-c-relay), and no destination got a name more often than it was sent
(no duplicates beyond REPLICATION_FACTOR); the run fails otherwise. Implementations run
in mirrored order (A B C C B A with ``--rounds 2``), run folders are kept to the end.

    python bench/relay_bench.py [--lines 2000000 --names 100000 --connections 4]
        [--values full|integers] [--destinations 2 --replication 1 --protocol pickle]
        [--impl ours,ours-w2,reference,c-relay,c-relay-bigq,direct] [--rounds 2]
        [--growth docs/data/growth/relay.json]
    python bench/relay_bench.py --memory-per-name 1000000

Values are random full-precision floats written with every digit (``repr``), as real
metrics are; ``--values integers`` sends small integers instead (a labelled extra).
``ours-w2`` is ours with RELAY_WORKERS = 2 (two processes, like carbon-c-relay's -w 2
threads); relay CPU is summed over every process of a relay. ``direct`` is the
harness alone: the same parts sent straight to the sinks (part k to sink k modulo
the sinks, no relay, no placement check), the ceiling of what this harness can
measure on this machine. ``--growth FILE`` appends each relay's mean to FILE (issue
17's cost-as-the-work-grows data). ``--memory-per-name N`` teaches our relay's name
table N names (RELAY_HASH_CACHE_SIZE as ``--hash-cache`` or the default) and prints the
names it keeps and the bytes it holds per name.

carbon-c-relay is used if ``carbon-c-relay`` (or ``relay``) is on PATH; it always
sends plaintext, so its destinations count lines.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import random
import shlex
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from common import (ROOT, RunDirs, crelay_binary, free_port, mirrored,  # noqa: E402
                    reference_venv, rss_kb, stop, wait_port)

from carbon.config.defaults import DEFAULTS  # noqa: E402
from carbon.config.settings import Settings  # noqa: E402
from carbon.formats.pickled import split_frames  # noqa: E402
from carbon.routers import make_router, parse_destinations  # noqa: E402

HERE = Path(__file__).resolve().parent
BIG_QUEUE = 2_000_000  # carbon-c-relay -q large enough to lose nothing


def _stat_fields(pid: int) -> list[str]:
    with open("/proc/%d/stat" % pid) as handle:
        return handle.read().rsplit(")", 1)[1].split()


def process_tree(pid: int) -> list[int]:
    """``pid`` and every live descendant (worker processes of a relay)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                ppid = int(_stat_fields(int(entry))[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    tree, todo = [], [pid]
    while todo:
        current = todo.pop()
        tree.append(current)
        todo.extend(children.get(current, []))
    return tree


def tree_cpu(pid: int) -> tuple[float, float]:
    """(user, system) CPU seconds of ``pid``, its live descendants and reaped children."""
    ticks = os.sysconf("SC_CLK_TCK")
    user = system = 0
    for member in process_tree(pid):
        try:
            fields = _stat_fields(member)
        except OSError:
            continue  # exited between the scan and now
        user += int(fields[11]) + int(fields[13])
        system += int(fields[12]) + int(fields[14])
    return user / ticks, system / ticks


def tree_rss_kb(pid: int) -> int:
    total = 0
    for member in process_tree(pid):
        try:
            total += rss_kb(member)
        except OSError:
            pass
    return total


def stop_tree(proc: subprocess.Popen) -> None:
    """Kill a relay and any worker processes it started."""
    members = process_tree(proc.pid) if proc.poll() is None else []
    stop(proc)
    for member in members[1:]:
        try:
            os.kill(member, 9)
        except OSError:
            pass


def reference_python() -> tuple[str, str]:
    venv = reference_venv()
    return str(venv / "bin" / "python"), str(venv / "bin" / "carbon-relay.py")


def write_conf(base: Path, line_port: int, dests: list[str], args: argparse.Namespace,
               workers: int = 1) -> None:
    conf = base / "conf"
    conf.mkdir(parents=True)
    (conf / "storage-schemas.conf").write_text("[all]\npattern = .*\nretentions = 60s:1d\n")
    (conf / "carbon.conf").write_text("\n".join([
        "[relay]",
        "STORAGE_DIR = %s" % (base / "storage"),
        "LINE_RECEIVER_INTERFACE = 127.0.0.1", "LINE_RECEIVER_PORT = %d" % line_port,
        "PICKLE_RECEIVER_INTERFACE = 127.0.0.1", "PICKLE_RECEIVER_PORT = %d" % free_port(),
        "RELAY_METHOD = consistent-hashing",
        "REPLICATION_FACTOR = %d" % args.replication, "DIVERSE_REPLICAS = False",
        "DESTINATIONS = %s" % ", ".join(dests),
        "DESTINATION_PROTOCOL = %s" % args.protocol,
        *(["MAX_QUEUE_SIZE = %d" % args.max_queue] if args.max_queue else []),
        "USE_FLOW_CONTROL = True",
        "MAX_DATAPOINTS_PER_MESSAGE = 500", "CARBON_METRIC_INTERVAL = 0",
        *(["RELAY_WORKERS = %d" % workers] if workers > 1 else []),
        *(["RELAY_HASH_CACHE_SIZE = %d" % args.hash_cache] if args.hash_cache else []),
        "LOG_LISTENER_CONN_SUCCESS = False", "USER = ", ""]))
    (conf / "crelay.conf").write_text(
        "cluster bench\n    carbon_ch replication %d\n%s\n    ;\nmatch * send to bench;\n" % (
            args.replication,  # carbon-c-relay spells an instance host:port=instance
            "\n".join("        %s=%s" % tuple(d.rsplit(":", 1)) for d in dests)))


def start_relay(impl: str, base: Path, line_port: int) -> subprocess.Popen:
    log = open(base / "relay.log", "w")
    env = {"GRAPHITE_ROOT": str(base), "PATH": "/usr/bin:/bin"}
    conf = str(base / "conf" / "carbon.conf")
    if impl == "reference":
        python, script = reference_python()
        cmd = [python, script, "--config", conf, "--nodaemon", "start"]
    elif impl.startswith("c-relay"):
        cmd = [crelay_binary() or "carbon-c-relay", "-f", str(base / "conf" / "crelay.conf"),
               "-p", str(line_port), "-w", "2"]
        if impl == "c-relay-bigq":
            cmd += ["-q", str(BIG_QUEUE)]
    else:
        env["PYTHONPATH"] = str(ROOT)
        cmd = [sys.executable, "-m", "carbon.daemon", "carbon-relay", "--config", conf,
               "--nodaemon", "start"]
    return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=str(base))


def make_payload(lines: int, names: int, connections: int,
                 full_precision: bool = True) -> tuple[list[bytes], Counter]:
    """``lines`` plaintext lines over ``names`` names, cut into one part per connection,
    and how often each name is sent. Values are random floats written with every digit
    (``repr``), as real metrics are, or small integers without ``full_precision``."""
    now = int(time.time())
    per_part = -(-lines // connections)
    rng = random.Random(1)
    parts = []
    for c in range(connections):
        rows = range(c * per_part, min(lines, (c + 1) * per_part))
        parts.append("".join("bench.host%03d.metric%06d %s %d\n" % (
            i % 1000, i % names, repr(rng.random() * 1000) if full_precision else i % 1000,
            now - 60 * (i // names)) for i in rows).encode())
    sent = Counter("bench.host%03d.metric%06d" % (i % 1000, i % names) for i in range(lines))
    return parts, sent


def received_names(record: Path, port: int, protocol: str) -> Counter:
    """How often each name arrived at one destination: its connections' recorded bytes
    (``<port>.<n>``, one file a connection)."""
    names: Counter = Counter()
    for path in record.glob("%d.*" % port):
        data = path.read_bytes()
        if protocol == "line":
            names.update(line.split(b" ", 1)[0].decode() for line in data.split(b"\n")
                         if line.strip())
        else:
            frames, _, _ = split_frames(data, 1 << 32)
            names.update(metric for frame in frames for metric, _ in pickle.loads(frame))
    return names


def check_placement(impl: str, dests: list[str], record: Path, protocol: str,
                    sent: Counter, replication: int) -> tuple[int, int]:
    """(misplaced, duplicated) points: arrivals at a destination the ring does not place
    the name on, and arrivals beyond the times the name was sent to that destination."""
    settings = Settings(RELAY_METHOD="consistent-hashing", REPLICATION_FACTOR=replication,
                        DIVERSE_REPLICAS=False)
    if impl.startswith("c-relay"):
        settings["ROUTER_HASH_TYPE"] = "crelay_carbon_ch"
    router = make_router(settings, parse_destinations(dests))
    names = list(sent)
    placed = {name: {d.port for d in where}
              for name, where in zip(names, router.destinations_many(names), strict=True)}
    misplaced = duplicated = 0
    for dest in parse_destinations(dests):
        for name, count in received_names(record, dest.port, protocol).items():
            if dest.port not in placed.get(name, ()):
                misplaced += count
            elif count > sent[name]:
                duplicated += count - sent[name]
    return misplaced, duplicated


def sink_counts(control: int) -> dict[str, int]:
    with socket.create_connection(("127.0.0.1", control), timeout=5) as sock:
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    return json.loads(data)


def send_all(ports: list[int], parts: list[bytes]) -> list[threading.Thread]:
    """One thread a part, part k to ports[k % len(ports)]."""
    def push(port: int, part: bytes) -> None:
        with socket.create_connection(("127.0.0.1", port)) as sock:
            sock.sendall(part)
    threads = [threading.Thread(target=push, args=(ports[k % len(ports)], part))
               for k, part in enumerate(parts)]
    for thread in threads:
        thread.start()
    return threads


def run_one(impl: str, parts: list[bytes], sent: Counter, args: argparse.Namespace,
            dirs: RunDirs) -> dict:
    lines = sum(sent.values())
    base = dirs.new("relay-bench-")
    record = base / "received"
    record.mkdir()
    sink_protocol = "line" if impl.startswith("c-relay") or impl == "direct" else args.protocol
    ports = [free_port() for _ in range(args.destinations)]
    controls, line_port = [free_port() for _ in ports], free_port()
    dests = ["127.0.0.1:%d:%s" % (p, chr(ord("a") + i)) for i, p in enumerate(ports)]
    write_conf(base, line_port, dests, args, workers=2 if impl == "ours-w2" else 1)
    sinks = [subprocess.Popen([sys.executable, str(HERE / "relay_sink.py"), "--listen",
                               "%d:%s" % (port, sink_protocol), "--control", str(control),
                               "--record", str(record)],
                              stdout=subprocess.PIPE, text=True)
             for port, control in zip(ports, controls, strict=True)]
    relay = None
    try:
        for sink in sinks:
            assert sink.stdout.readline().strip() == "READY"
        direct = impl == "direct"
        if direct:  # the harness alone: parts straight to the sinks
            expected, watched = lines, os.getpid()
        else:
            relay = start_relay(impl, base, line_port)
            wait_port(line_port, relay)
            expected, watched = lines * args.replication, relay.pid
        cpu0, started = tree_cpu(watched), time.monotonic()
        senders = (send_all(ports, parts) if direct else send_all([line_port], parts))
        peak, got, last_change, last_got = 0, 0, started, -1
        while got < expected and time.monotonic() - last_change < args.settle:
            time.sleep(0.05)
            if not direct:
                peak = max(peak, tree_rss_kb(relay.pid))
            got = sum(sum(sink_counts(c).values()) for c in controls)
            if got != last_got:
                last_got, last_change = got, time.monotonic()
        elapsed = (last_change if got < expected else time.monotonic()) - started
        cpu1 = tree_cpu(watched)
        for thread in senders:
            thread.join(30)
        for control in controls:
            sink_counts(control)  # flushes the recordings
        misplaced, duplicated = (0, 0) if direct else check_placement(
            impl, dests, record, sink_protocol, sent, args.replication)
        # delivered lines per second: a relay that drops lines does not get credit for them
        delivered_lines = got if direct else got / args.replication
        return {"impl": impl, "seconds": round(elapsed, 2),
                "lines_per_s": round(delivered_lines / elapsed) if elapsed else None,
                "cpu_s": round(sum(cpu1) - sum(cpu0), 2),
                "user_s": round(cpu1[0] - cpu0[0], 2), "sys_s": round(cpu1[1] - cpu0[1], 2),
                "peak_rss_mb": peak // 1024,
                "delivered": got, "missing": expected - got,
                "misplaced": misplaced, "duplicated": duplicated}
    finally:
        if relay is not None:
            stop_tree(relay)
        for sink in sinks:
            stop(sink)
            sink.stdout.close()


def print_ratios(results: list[dict], args: argparse.Namespace) -> None:
    """Mean lines/s and peak RSS per relay, and ours against carbon-c-relay in this run."""
    means = {}
    for impl in dict.fromkeys(r["impl"] for r in results):
        runs = [r for r in results if r["impl"] == impl]
        means[impl] = (sum(r["lines_per_s"] or 0 for r in runs) / len(runs),
                       max(r["peak_rss_mb"] for r in runs), sum(r["missing"] for r in runs))
    print("\n%s lines over %s names, %d connections, mean of %d run(s) each:" % (
        format(args.lines, ","), format(args.names, ","), args.connections, args.rounds))
    for impl, (rate, rss, missing) in means.items():
        print("  %-13s %10s lines/s  peak RSS %5d MB  lost %s" % (
            impl, format(int(rate), ","), rss, format(missing, ",")))
    for reference in ("c-relay-bigq", "c-relay", "reference"):
        if reference in means and means[reference][0]:
            for impl in ("ours", "ours-w2"):
                if impl in means:
                    print("  ratio %s / %s: %.2fx" % (impl, reference,
                                                     means[impl][0] / means[reference][0]))


def loadavg() -> str:
    with open("/proc/loadavg") as handle:
        return " ".join(handle.read().split()[:3])


GROWTH_IMPLS = {"ours": "ours", "ours-w2": "ours RELAY_WORKERS=2",
                "c-relay-bigq": "carbon-c-relay", "c-relay": "carbon-c-relay (default queue)",
                "reference": "carbon-relay 1.1.10"}


def append_growth(path: Path, results: list[dict], args: argparse.Namespace) -> None:
    """Each relay's mean lines/s, CPU s and peak RSS as issue 17 growth rows."""
    rows = json.loads(path.read_text()) if path.exists() else []
    label = args.load_label or "%s lines over %s names, %d connection(s), %s values" % (
        format(args.lines, ","), format(args.names, ","), args.connections, args.values)
    if args.protocol != "line":  # a line of its own in the plot: not the line-out rows
        label += ", %s out" % args.protocol
    command = "python bench/" + shlex.join([Path(sys.argv[0]).name] + sys.argv[1:])
    for impl in dict.fromkeys(r["impl"] for r in results):
        runs = [r for r in results if r["impl"] == impl]
        if impl not in GROWTH_IMPLS:
            continue
        name = GROWTH_IMPLS[impl] + ("" if args.protocol == "line" else
                                     " (%s out)" % args.protocol)
        rows.append({"daemon": "relay", "impl": name, "names": args.names,
                     "load": label,
                     "throughput": round(sum(r["lines_per_s"] or 0 for r in runs) / len(runs)),
                     "unit": "lines/s",
                     "cpu_s": round(sum(r["cpu_s"] for r in runs) / len(runs), 2),
                     "peak_rss_mb": max(r["peak_rss_mb"] for r in runs),
                     "measured": time.strftime("%Y-%m-%d", time.gmtime()),
                     "command": command})
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(rows, indent=1) + "\n")


def memory_per_name(count: int, size: int) -> None:
    """Teach our relay's name table ``count`` names (bench-like, 29 characters) through
    its whole-read path with RELAY_HASH_CACHE_SIZE ``size``; print the names it keeps
    (at most two generations of ``size``), the bytes it holds for them and the RSS
    growth."""
    from carbon.relay.chunks import ChunkRouter
    from carbon.relay.index import RouteIndex

    dests = ["127.0.0.1:%d:%s" % (2004 + k, chr(ord("a") + k)) for k in range(3)]
    router = make_router(Settings(RELAY_METHOD="consistent-hashing"), parse_destinations(dests))
    chunks = ChunkRouter(RouteIndex(router, parse_destinations(dests), size), router, size)
    rss0 = rss_kb(os.getpid())
    for start in range(0, count, 2000):
        chunk = b"".join(b"bench.host%03d.metric%09d 0.7362519846152 1700000000\n" % (
            i % 1000, i) for i in range(start, min(count, start + 2000)))
        assert chunks.route(chunk, 0) is not None
    rss1 = rss_kb(os.getpid())
    print("%s names sent, RELAY_HASH_CACHE_SIZE %s: %s names (29 characters) known, "
          "table %.1f MB allocated (%.1f bytes a name), RSS growth %.1f MB (%.1f bytes a "
          "name)" % (format(count, ","), format(size, ","), format(chunks.known, ","),
                     chunks.memory / 1e6, chunks.memory / chunks.known,
                     (rss1 - rss0) / 1024, (rss1 - rss0) * 1024 / chunks.known))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lines", type=int, default=2_000_000)
    parser.add_argument("--names", type=int, default=100_000)
    parser.add_argument("--values", choices=["full", "integers"], default="full",
                        help="full: random full-precision floats (default); integers: "
                             "small integers (tidy values, a labelled extra)")
    parser.add_argument("--growth", help="append each relay's mean to this JSON list")
    parser.add_argument("--load-label", default="",
                        help="short text for --growth rows (default: lines, names, values)")
    parser.add_argument("--memory-per-name", type=int, default=0,
                        help="only measure our name table's bytes per known name")
    parser.add_argument("--connections", type=int, default=4)
    parser.add_argument("--destinations", type=int, default=3)
    parser.add_argument("--replication", type=int, default=1)
    parser.add_argument("--protocol", default="line", choices=["pickle", "line"],
                        help="DESTINATION_PROTOCOL of ours and the reference (carbon-c-relay "
                             "always sends lines)")
    parser.add_argument("--max-queue", type=int, default=0,
                        help="MAX_QUEUE_SIZE; 0 leaves it at the code default (1000)")
    parser.add_argument("--hash-cache", type=int, default=0,
                        help="RELAY_HASH_CACHE_SIZE for ours; 0 leaves it at the code default")
    parser.add_argument("--settle", type=float, default=15.0,
                        help="give up after this many seconds without progress")
    parser.add_argument("--impl", default="ours,ours-w2,reference,c-relay,c-relay-bigq")
    parser.add_argument("--rounds", type=int, default=2,
                        help="run the implementations forwards, then backwards, ...")
    args = parser.parse_args()
    if args.memory_per_name:
        memory_per_name(args.memory_per_name, args.hash_cache or int(
            DEFAULTS["RELAY_HASH_CACHE_SIZE"]))
        return
    load_before = loadavg()
    parts, sent = make_payload(args.lines, args.names, args.connections,
                               args.values == "full")
    impls = args.impl.split(",")
    if crelay_binary() is None and any(i.startswith("c-relay") for i in impls):
        print("carbon-c-relay not found on PATH: skipped", file=sys.stderr)
        impls = [i for i in impls if not i.startswith("c-relay")]
    results = []
    with RunDirs() as dirs:
        for impl in mirrored(impls, args.rounds):
            results.append(run_one(impl, parts, sent, args, dirs))
            print(json.dumps(results[-1]), flush=True)
    print("\n| relay | queue | lines/s end to end | lines lost | relay CPU s | lines per CPU s"
          " | peak RSS MB | misplaced | duplicated |")
    print("|---|---|---|---|---|---|---|---|---|")
    names = {"ours": "ours", "ours-w2": "ours, RELAY_WORKERS = 2", "direct": "no relay (harness)",
             "reference": "carbon-relay.py 1.1.10",
             "c-relay": "carbon-c-relay -w 2", "c-relay-bigq": "carbon-c-relay -w 2"}
    for r in results:
        queue = "-q %s" % format(BIG_QUEUE, ",") if r["impl"] == "c-relay-bigq" else "default"
        # delivered lines per relay CPU second (a relay that drops lines gets no credit)
        per_cpu = r["delivered"] / args.replication / r["cpu_s"] if r["cpu_s"] else 0
        print("| %s | %s | %s | %s | %.1f | %s | %d | %d | %d |" % (
            names[r["impl"]], queue, format(r["lines_per_s"] or 0, ","), format(r["missing"], ","),
            r["cpu_s"], format(int(per_cpu), ","), r["peak_rss_mb"], r["misplaced"],
            r["duplicated"]))
    print_ratios(results, args)
    print("values: %s; load average before %s, after %s" % (args.values, load_before,
                                                            loadavg()))
    if args.growth:
        append_growth(Path(args.growth), results, args)
    if os.environ.get("RELAY_BENCH_JSON"):
        Path(os.environ["RELAY_BENCH_JSON"]).write_text(json.dumps(results, indent=1))
    wrong = [r["impl"] for r in results if r["misplaced"] or r["duplicated"]]
    if wrong:
        sys.exit("points arrived at the wrong destination or duplicated: %s" % ", ".join(wrong))


if __name__ == "__main__":
    main()
