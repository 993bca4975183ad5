"""The quick cluster test: 3 hosts on 127.0.0.N, write through one relay, read through
any render app, add a 4th host while writes go on, rebalance (with a crash and a
resume), read again: every point present, every metric on its new owner only."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
import whisper

from carbon.cluster.rebalance import Rebalancer, owners, ring
from carbon.cluster.spec import load_cluster
from tests.cluster.clusterutil import (cli, cluster_file, free_ports_option, render,
                                       send_lines)

HOSTS = {"a": "127.0.0.2", "b": "127.0.0.3", "c": "127.0.0.4"}
METRICS = 120
STEP = 60


def names() -> list[str]:
    return ["svc.app%02d.req%03d" % (n % 7, n) for n in range(METRICS)]


def stored(folder: Path) -> dict[str, set[str]]:
    """{host: metric names with a whisper file there}."""
    out: dict[str, set[str]] = {}
    for host in ("a", "b", "c", "d"):
        base = folder / "data" / host / "storage" / "whisper"
        out[host] = {str(p.relative_to(base))[:-4].replace("/", ".")
                     for p in base.rglob("*.wsp")} if base.exists() else set()
    return out


@pytest.fixture
def cluster(tmp_path: Path):
    path = cluster_file(tmp_path, HOSTS)
    started = cli("start", path)
    assert started.returncode == 0, started.stdout + started.stderr
    try:
        yield path
    finally:
        for spec in (tmp_path / "cluster4.toml", path):
            if spec.exists():
                cli("stop", spec)


def test_three_hosts_grow_to_four_without_losing_a_point(cluster: Path) -> None:
    folder = cluster.parent
    spec = load_cluster(str(cluster))
    status = cli("status", cluster)
    assert status.returncode == 0 and status.stdout.count("running") == 12, status.stdout
    a, b, c = (spec.host(n) for n in "abc")
    base = int(time.time()) // STEP * STEP - 400 * STEP
    expected: dict[str, dict[int, float]] = {n: {} for n in names()}

    def write(relay, first: int, count: int) -> None:
        lines = []
        for k in range(first, first + count):
            for i, name in enumerate(names()):
                expected[name][base + k * STEP] = float(i * 100 + k)
                lines.append("%s %d %d\n" % (name, i * 100 + k, base + k * STEP))
        send_lines((relay.address, relay.relay_line_port), lines)

    write(a, 0, 10)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # read through another host's render app
        if render(c.render_address, "svc.*.*") == expected:
            break
        time.sleep(0.5)
    assert render(c.render_address, "svc.*.*") == expected
    placed = stored(folder)
    router = ring(spec)
    for name in names():
        assert [h for h in placed if name in placed[h]] == owners(router, spec, name)

    # A stale local copy (older points only) must not hide the owner's fresher points.
    stale = names()[0]
    owner = owners(router, spec, stale)[0]
    other = next(h for h in "abc" if h != owner)
    path = folder / "data" / other / "storage" / "whisper" / (stale.replace(".", "/") + ".wsp")
    path.parent.mkdir(parents=True, exist_ok=True)
    whisper.create(str(path), [(STEP, 1440)])
    whisper.update_many(str(path), [(base, 0.0), (base + STEP, 1.0)])
    assert render(spec.host(other).render_address, stale)[stale] == expected[stale]
    path.unlink()

    # Grow: a 4th host; a crash after 25 moves, then the command resumes. Writes go on.
    new = folder / "cluster4.toml"
    grown = cli("add-host", cluster, "d", "127.0.0.5", "--out", new, "--dry-run",
                *free_ports_option())
    assert grown.returncode == 0 and "would move" in grown.stdout, grown.stderr
    dry = int(grown.stdout.split("would move ")[1].split()[0])
    assert 0 < dry < METRICS
    old_spec, new_spec = spec, load_cluster(str(new))
    stop = threading.Event()
    written = [10]

    def keep_writing() -> None:
        while not stop.is_set() and written[0] < 390:
            write(b, written[0], 1)
            written[0] += 1
            time.sleep(0.5)
    writer = threading.Thread(target=keep_writing)
    writer.start()
    try:
        crashed = Rebalancer(old_spec, new_spec, crash_after=25).run()
        assert crashed.moves == 25 and not crashed.unverified, crashed
        resumed = cli("rebalance", cluster, new, "--delete", "--rate-files", "200")
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
        assert "(25 already done)" in resumed.stdout, resumed.stdout
        assert "%d unverified" % 0 in resumed.stdout
        for host in "abcd":  # reads are right while writes go on
            settled = base + (written[0] - 1) * STEP  # older rounds have reached the caches
            wanted = {n: {ts for ts in list(expected[n]) if ts < settled} for n in names()}
            got = render(new_spec.host(host).render_address, "svc.*.*")
            assert all(wanted[n] <= set(got[n]) for n in names()), host
    finally:
        stop.set()
        writer.join()
    write(c, written[0], 1)
    new_router = ring(new_spec)
    for host in "abcd":
        deadline = time.monotonic() + 60
        while render(new_spec.host(host).render_address, "svc.*.*") != expected \
                and time.monotonic() < deadline:
            time.sleep(0.5)
        assert render(new_spec.host(host).render_address, "svc.*.*") == expected, host
    placed = stored(folder)
    moved = 0
    for name in names():
        holders = [h for h in placed if name in placed[h]]
        assert holders == owners(new_router, new_spec, name), name
        moved += holders == ["d"]
    assert moved == dry
    assert written[0] > 12
