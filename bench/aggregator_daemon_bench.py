"""carbon-aggregator side by side with reference carbon-aggregator.py 1.1.10.

The same rules and input for both daemons: N points (default 1,000,000) from M input
names (100,000) into A aggregates (1,000; methods sum, avg, min, max, count and p90
in turn), sent flat out over 4 TCP connections. Aggregates go to a line-protocol sink
in this process that keeps every value, so the two daemons' aggregate values are
compared exactly. Measured: seconds until the daemon has consumed its input (its CPU
time stops growing), points/s, CPU seconds, peak RSS. Checked: the sum, count, min, max
and avg aggregates against the values computed from the input (the count aggregates
say how many points of their groups the daemon received); a daemon that received fewer
points, or aggregated them wrongly, fails the run. The daemons run in A B B A order
(``--rounds``) and run folders are removed only at the end.

    python bench/aggregator_daemon_bench.py [--points 1000000 --names 100000 --aggregates 1000]
"""

from __future__ import annotations

import argparse
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (ROOT, RunDirs, abba, cpu_seconds, free_port, reference_venv,  # noqa: E402
                    rss_kb, stop, wait_port)

FREQ = 10
METHODS = ("sum", "avg", "min", "max", "count", "p90")


class LineSink:
    """Accepts connections and keeps the last value of every metric it is sent."""

    def __init__(self) -> None:
        self.values: dict[str, float] = {}
        self.lines = 0
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self) -> None:
        while True:
            conn, _ = self.server.accept()
            threading.Thread(target=self.read, args=(conn,), daemon=True).start()

    def read(self, conn: socket.socket) -> None:
        tail = b""
        while chunk := conn.recv(1 << 16):
            lines = (tail + chunk).split(b"\n")
            tail = lines.pop()
            for line in lines:
                parts = line.split()
                if len(parts) == 3:
                    self.values[parts[0].decode()] = float(parts[1])
                    self.lines += 1


def make_root(base: Path, program_port: int, sink_port: int, groups: int,
              per_aggregate: bool = False) -> None:
    conf = base / "conf"
    conf.mkdir(parents=True)
    (conf / "storage-schemas.conf").write_text("[all]\npattern = .*\nretentions = 60s:1d\n")
    (conf / "carbon.conf").write_text("\n".join([
        "[aggregator]", "STORAGE_DIR = %s" % (base / "storage"),
        "LINE_RECEIVER_INTERFACE = 127.0.0.1", "LINE_RECEIVER_PORT = %d" % program_port,
        "PICKLE_RECEIVER_INTERFACE = 127.0.0.1", "PICKLE_RECEIVER_PORT = %d" % free_port(),
        "DESTINATIONS = 127.0.0.1:%d" % sink_port, "DESTINATION_PROTOCOL = line",
        "FORWARD_ALL = False", "CARBON_METRIC_INTERVAL = 0", "LOG_AGGREGATOR_MISSES = False",
        "LOG_LISTENER_CONN_SUCCESS = False", "USER = ", ""]))
    # One rule per method; <group> captures make the A aggregates (typical usage: carbon
    # 1.1.10 matches every point against every rule, so 1,000 separate rules would cost
    # it 1,000 regex matches a point).
    if per_aggregate:
        rules = "".join("agg.g%04d.%s (%d) = %s in.g%04d.*.%s\n" % (
            g, METHODS[g % len(METHODS)], FREQ, METHODS[g % len(METHODS)], g,
            METHODS[g % len(METHODS)]) for g in range(groups))
    else:
        rules = "".join("agg.<group>.%s (%d) = %s in.<group>.*.%s\n" % (m, FREQ, m, m)
                        for m in METHODS)
    (conf / "aggregation-rules.conf").write_text(rules)
    (conf / "rewrite-rules.conf").write_text("")


def value_of(i: int) -> int:
    """The value of input line ``i``."""
    return (i * 7919) % 1000


def expected_aggregates(points: int, groups: int) -> dict[str, float]:
    """The sum, count, min, max and avg aggregates the input must produce (p90 is left to
    the comparison between the two daemons)."""
    values: dict[int, list[int]] = {}
    for i in range(points):
        values.setdefault(i % groups, []).append(value_of(i))
    out = {}
    for group, found in values.items():
        method = METHODS[group % len(METHODS)]
        name = "agg.g%04d.%s" % (group, method)
        if method == "sum":
            out[name] = float(sum(found))
        elif method == "count":
            out[name] = float(len(found))
        elif method == "min":
            out[name] = float(min(found))
        elif method == "max":
            out[name] = float(max(found))
        elif method == "avg":
            out[name] = float(sum(found)) / len(found)
    return out


def check_values(got: dict[str, float], expected: dict[str, float]) -> tuple[int, int, int]:
    """(points received by the count groups, points sent to them, wrong aggregates)."""
    received = sent = wrong = 0
    for name, value in expected.items():
        have = got.get(name)
        if name.endswith(".count"):
            sent += int(value)
            received += int(have or 0)
        if have is None or abs(have - value) > 1e-9 * max(1.0, abs(value)):
            wrong += 1
    return received, sent, wrong


def payload(points: int, names: int, groups: int, stamp: int, parts: int) -> list[bytes]:
    per_group = names // groups
    rows = ["in.g%04d.n%05d.%s %d %d\n" % (i % groups, i // groups % per_group,
                                          METHODS[i % groups % len(METHODS)],
                                          value_of(i), stamp)
            for i in range(points)]
    size = -(-len(rows) // parts)
    return ["".join(rows[k * size:(k + 1) * size]).encode() for k in range(parts)]


def start(impl: str, base: Path) -> subprocess.Popen:
    env = {"GRAPHITE_ROOT": str(base), "PATH": "/usr/bin:/bin"}
    conf = str(base / "conf" / "carbon.conf")
    if impl == "reference":
        venv = reference_venv()
        cmd = [str(venv / "bin" / "python"), str(venv / "bin" / "carbon-aggregator.py"),
               "--config", conf, "--nodaemon", "start"]
    else:
        env["PYTHONPATH"] = str(ROOT)
        cmd = [sys.executable, "-m", "carbon.daemon", "carbon-aggregator", "--config", conf,
               "--nodaemon", "start"]
    return subprocess.Popen(cmd, stdout=open(base / "daemon.log", "w"),
                            stderr=subprocess.STDOUT, env=env, cwd=str(base))


def run(impl: str, args: argparse.Namespace, dirs: RunDirs) -> dict:
    base = dirs.new("aggbench-")
    sink = LineSink()
    port = free_port()
    make_root(base, port, sink.port, args.aggregates, args.rule_per_aggregate)
    proc = start(impl, base)
    try:
        wait_port(port, proc)
        now = time.time()
        stamp = int(now - now % FREQ) - FREQ  # the previous interval: emitted on the next tick
        parts = payload(args.points, args.names, args.aggregates, stamp, 4)
        cpu0 = cpu_seconds(proc.pid)
        started = time.monotonic()
        senders = [threading.Thread(target=lambda p=p: socket.create_connection(
            ("127.0.0.1", port)).sendall(p)) for p in parts]
        for t in senders:
            t.start()
        for t in senders:
            t.join()
        # input is consumed when the daemon's CPU stops growing
        last_cpu, last_change, peak = cpu_seconds(proc.pid), time.monotonic(), 0
        while time.monotonic() - last_change < 1.0:
            if time.monotonic() - started > args.timeout:
                return {"impl": impl, "seconds": float("inf"), "points_s": 0.0,
                        "cpu_s": cpu_seconds(proc.pid) - cpu0,
                        "peak_rss_mb": rss_kb(proc.pid, "VmHWM") / 1024, "values": {},
                        "unfinished": True}
            time.sleep(0.05)
            cpu = cpu_seconds(proc.pid)
            peak = max(peak, rss_kb(proc.pid, "VmHWM"))
            if cpu - last_cpu > 0.02:
                last_cpu, last_change = cpu, time.monotonic()
        elapsed = last_change - started
        cpu_used = last_cpu - cpu0
        # aggregates may be emitted early and again when complete: wait until the sink has
        # been quiet for a whole period after every name arrived
        deadline = time.monotonic() + 6 * FREQ
        seen, quiet_since = -1, time.monotonic()
        while time.monotonic() < deadline:
            time.sleep(0.2)
            if sink.lines != seen:
                seen, quiet_since = sink.lines, time.monotonic()
            elif len(sink.values) >= args.aggregates and \
                    time.monotonic() - quiet_since > FREQ + 1:
                break
        return {"impl": impl, "seconds": elapsed, "points_s": args.points / elapsed,
                "cpu_s": cpu_used, "peak_rss_mb": peak / 1024, "values": dict(sink.values)}
    finally:
        stop(proc)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=1_000_000)
    parser.add_argument("--names", type=int, default=100_000)
    parser.add_argument("--aggregates", type=int, default=1000)
    parser.add_argument("--rule-per-aggregate", action="store_true",
                        help="one rule per aggregate instead of one rule per method")
    parser.add_argument("--timeout", type=float, default=300,
                        help="give up on a daemon that has not consumed its input by then")
    parser.add_argument("--rounds", type=int, default=2,
                        help="runs of each daemon, alternating: reference ours ours reference")
    args = parser.parse_args()
    expected = expected_aggregates(args.points, args.aggregates)
    results = []
    with RunDirs() as dirs:
        for impl in abba("reference", "ours", args.rounds):
            result = run(impl, args, dirs)
            result["received"], result["sent"], result["wrong"] = check_values(
                result["values"], expected)
            results.append(result)
    print("| implementation | points/s | seconds | CPU s | peak RSS MB | aggregates received |"
          " points received (count groups) | wrong aggregates |")
    print("|---|---|---|---|---|---|---|---|")
    for r in results:
        if r.get("unfinished"):
            print("| %s | < %s | > %.0f (gave up) | - | %.0f | - | - | - |" % (
                r["impl"], format(int(args.points / args.timeout), ","), args.timeout,
                r["peak_rss_mb"]))
            continue
        print("| %s | %s | %.2f | %.2f | %.0f | %d | %s of %s | %d |" % (
            r["impl"], format(int(r["points_s"]), ","), r["seconds"], r["cpu_s"],
            r["peak_rss_mb"], len(r["values"]), format(r["received"], ","),
            format(r["sent"], ","), r["wrong"]))
    finished = [r for r in results if not r.get("unfinished")]
    ref = [r for r in finished if r["impl"] == "reference"]
    ours = [r for r in finished if r["impl"] == "ours"]
    if ref and ours:
        same = all(_same(a["values"], b["values"]) for a in ref for b in ours)
        if not same:
            a, b = ref[0]["values"], ours[0]["values"]
            diffs = [(k, a.get(k), b.get(k)) for k in sorted(set(a) | set(b))
                     if a.get(k) != b.get(k)]
            print("%d differing aggregates, e.g. %s" % (len(diffs), diffs[:8]))
        rate = sum(r["points_s"] for r in ours) / sum(r["points_s"] for r in ref)
        print("\nratio ours/reference points/s (mean over %d runs each): %.1fx; identical "
              "aggregate values: %s" % (len(ours), rate, same))
    failed = [r["impl"] for r in finished if r["wrong"]]
    if failed:
        sys.exit("aggregates that do not match the input: %s" % ", ".join(failed))


def _same(a: dict[str, float], b: dict[str, float]) -> bool:
    return a.keys() == b.keys() and all(
        abs(a[k] - b[k]) <= 1e-9 * max(1.0, abs(a[k])) for k in a)


if __name__ == "__main__":
    main()
