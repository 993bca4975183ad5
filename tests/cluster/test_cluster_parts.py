"""The cluster's parts on their own: the cluster file, the merge, the rebalancing router."""

from __future__ import annotations

import fcntl
import json
import sys
import threading
import time
from pathlib import Path

import numpy
import pytest
import whisper

from carbon.cluster import generate
from carbon.cluster.agent import shuffled, unshuffled
from carbon.cluster.merge import (POINT, archives, fill_file, from_segments, records, segments,
                                  verify)
from carbon.cluster.rebalance import Rates, estimate, owners, plan, ring
from carbon.cluster.router import RebalancingRouter
from carbon.cluster.spec import load_cluster
from carbon.config.errors import ConfigError
from carbon.config.settings import Settings
from carbon.relay.destinations import parse_destination
from tests.cluster.carbonate_tools import carbonate_path

GOOD = """
[cluster]
root = "data"
[ring]
replication_factor = 2
[hosts.a]
address = "127.0.0.2"
caches = ["a", "b"]
[hosts.b]
address = "127.0.0.3"
ports = { render = 9090 }
"""


def test_cluster_file_and_generated_configs(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text(GOOD)
    spec = load_cluster(str(path))
    assert [str(d) for d in spec.destinations()] == [
        "127.0.0.2:2104:a", "127.0.0.2:2204:b", "127.0.0.3:2104:a"]
    a = spec.host("a")
    folder = Path(generate.write_host(spec, a))
    conf = (folder / "carbon.conf").read_text()
    assert "[cache:b]\nLINE_RECEIVER_PORT = 2203\nPICKLE_RECEIVER_PORT = 2204" in conf
    assert "DESTINATIONS = 127.0.0.2:2104:a, 127.0.0.2:2204:b, 127.0.0.3:2104:a" in conf
    assert "REPLICATION_FACTOR = 2" in conf
    assert conf.count("WHISPER_LOCK_WRITES = True") == 2  # [cache] and [relay]
    web: dict = {}
    exec((folder / "local_settings.py").read_text(), web)  # noqa: S102 - our own output
    assert web["CARBONLINK_HOSTS"] == ["127.0.0.2:7102:a", "127.0.0.2:7202:b"]
    assert web["CLUSTER_SERVERS"] == ["127.0.0.3:9090"]
    from carbon.config.loader import load_settings
    relay = load_settings("carbon-relay", "a", str(folder / "carbon.conf"),
                          graphite_root=str(tmp_path))
    assert relay.RELAY_METHOD == "consistent-hashing" and relay.REPLICATION_FACTOR == 2
    cache = load_settings("carbon-cache", "b", str(folder / "carbon.conf"),
                          graphite_root=str(tmp_path))
    assert cache.WHISPER_LOCK_WRITES is True


@pytest.mark.parametrize("text, key", [
    (GOOD.replace('address = "127.0.0.3"', 'address = "nowhere"'), "hosts.b.address"),
    (GOOD.replace("replication_factor = 2", "replication_factor = 3"),
     "ring.replication_factor"),
    (GOOD.replace("render = 9090", "rendr = 9090"), "hosts.b.ports.rendr"),
    (GOOD.replace("render = 9090", "relay_line = 2103"), "hosts.b"),
    (GOOD + "[hashes]\n", "hashes"),
    (GOOD.replace("[ring]", '[ring]\nhash_type = "md7"'), "ring.hash_type"),
    (GOOD.replace("[ring]", '[ring]\nhash_type = "fnv1a_ch"'), "hosts.b.caches"),
])
def test_bad_cluster_files_name_file_and_key(tmp_path: Path, text: str, key: str) -> None:
    path = tmp_path / "c.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_cluster(str(path))
    assert err.value.key == key and str(path) in str(err.value)


def _file(path: Path, points: list[tuple[int, float]]) -> None:
    whisper.create(str(path), [(60, 300), (600, 100)], xFilesFactor=0)
    whisper.update_many(str(path), points)


def _points(path: Path, start: int, end: int, now: int | None = None) -> dict[int, float]:
    (first, _, step), values = whisper.fetch(str(path), start, end, now)
    return {first + i * step: v for i, v in enumerate(values) if v is not None}


def test_merge_fills_gaps_in_every_archive_and_new_points_win(tmp_path: Path) -> None:
    now = int(time.time()) // 60 * 60
    old = [(now - 60 * k, 1.0) for k in range(10, 200)]
    new = [(now - 60 * k, 2.0) for k in range(0, 40)]
    _file(tmp_path / "old.wsp", old)
    _file(tmp_path / "new.wsp", new)
    result = fill_file(str(tmp_path / "new.wsp"), (tmp_path / "old.wsp").read_bytes(), now)
    assert result.verified and not result.created and result.filled > 150
    got = _points(tmp_path / "new.wsp", now - 299 * 60, now, now)
    assert {ts for ts, _ in old + new} <= set(got)
    assert all(got[ts] == 2.0 for ts, _ in new) and got[now - 60 * 150] == 1.0
    coarse = whisper.fetch(str(tmp_path / "new.wsp"), now - 1000 * 60, now - 100 * 60, now)
    assert coarse[0][2] == 600 and sum(v is not None for v in coarse[1]) >= 9
    # Into a missing file: the old copy is taken as it is.
    created = fill_file(str(tmp_path / "x" / "fresh.wsp"), (tmp_path / "old.wsp").read_bytes())
    assert created.created and created.verified
    assert (tmp_path / "x" / "fresh.wsp").read_bytes() == (tmp_path / "old.wsp").read_bytes()


def test_sparse_transfer_keeps_every_point_and_the_slot_layout(tmp_path: Path) -> None:
    """Only the header, each archive's first record and the records inside retention
    travel (records as byte columns); a file created from them reads like the source
    and later writes land in the same slots."""
    now = int(time.time()) // 60 * 60
    old = tmp_path / "old.wsp"
    _file(old, [(now - 60 * k, float(k) + 0.25) for k in range(3, 40)])
    first = archives(old.read_bytes())[0]
    empty = int(numpy.flatnonzero(records(old.read_bytes(), first)["t"] == 0)[5])
    with open(old, "r+b") as handle:  # an expired point in an empty slot must not travel
        handle.seek(first.offset + empty * 12)
        handle.write(whisper.struct.pack("!Ld", now - 60 * 400, 9.0))
    data = old.read_bytes()
    parts = segments(data, now)
    payload = b"".join(shuffled(memoryview(data)[o:o + n]) for o, n in parts)
    assert len(payload) < len(data) // 4
    image = from_segments(len(data), parts, unshuffled(payload, parts))
    assert image[:40] == data[:40] and image != data  # the expired record stayed behind
    created = fill_file(str(tmp_path / "new" / "m.wsp"), image, now, parts)
    assert created.created and created.verified and created.source_points == 37
    for path in (old, tmp_path / "new" / "m.wsp"):
        whisper.update_many(str(path), [(now, 1.5)])
    assert _points(tmp_path / "new" / "m.wsp", now - 299 * 60, now, now) == \
        _points(old, now - 299 * 60, now, now)
    with pytest.raises(ValueError):
        from_segments(len(data), parts, payload[:-1])


def test_merge_against_carbonate_whisper_fill(tmp_path: Path) -> None:
    """Ours: the old copy fills every gap and never replaces a point the new owner has.
    carbonate's fill_archives fills the same gaps but also overwrites the new owner's
    first point after each gap (its fetch range ends on that point)."""
    sys.path.insert(0, str(carbonate_path()))
    try:
        from carbonate.fill import fill_archives
    finally:
        sys.path.pop(0)
    now = int(time.time()) // 60 * 60
    old = [(now - 60 * k, float(k)) for k in range(5, 250, 2)]
    new = [(now - 60 * k, -float(k)) for k in range(0, 120, 3)]
    for name in ("old", "ours", "theirs"):
        _file(tmp_path / (name + ".wsp"), old if name == "old" else new)
    fill_file(str(tmp_path / "ours.wsp"), (tmp_path / "old.wsp").read_bytes(), now)
    fill_archives(str(tmp_path / "old.wsp"), str(tmp_path / "theirs.wsp"), now)
    expected = dict(old)
    expected.update(new)
    ours = _points(tmp_path / "ours.wsp", now - 290 * 60, now, now)
    theirs = _points(tmp_path / "theirs.wsp", now - 290 * 60, now, now)
    assert ours == expected
    assert set(theirs) == set(expected)
    overwritten = [ts for ts in theirs if theirs[ts] != expected[ts]]
    assert overwritten and all(ts in dict(new) for ts in overwritten)


def _merge_in_thread(target: Path, source: bytes, now: int) -> tuple[threading.Thread, list]:
    results: list = []

    def merge() -> None:
        results.append(fill_file(str(target), source, now))
    thread = threading.Thread(target=merge)
    thread.start()
    return thread, results


def test_merge_waits_for_the_cache_holding_the_file(tmp_path: Path) -> None:
    """A cache that has just created the file (header only, as under an update limit)
    holds WHISPER_LOCK_WRITES's lock while it writes its first point: the merge waits for
    it, then places the old copy's points from the slot that point took."""
    now = int(time.time()) // 60 * 60
    old = [(now - 60 * k, 1.0 + k / 7) for k in range(5, 50)]
    _file(tmp_path / "old.wsp", old)
    target = tmp_path / "new.wsp"
    whisper.create(str(target), [(60, 300), (600, 100)], xFilesFactor=0)
    with open(target, "r+b") as cache:
        fcntl.flock(cache.fileno(), fcntl.LOCK_EX)
        thread, results = _merge_in_thread(target, (tmp_path / "old.wsp").read_bytes(), now)
        thread.join(0.3)
        assert thread.is_alive()
        whisper.update_many(str(target), [(now, 2.0)])
        fcntl.flock(cache.fileno(), fcntl.LOCK_UN)
    thread.join(10)
    assert results and results[0].verified
    assert _points(target, now - 299 * 60, now, now) == dict(old + [(now, 2.0)])


def test_merge_waits_for_a_file_being_created(tmp_path: Path) -> None:
    """The cache has opened the file but not written its header yet (zero bytes): the
    merge waits for the header instead of failing the batch."""
    now = int(time.time()) // 60 * 60
    old = [(now - 60 * k, 3.5) for k in range(1, 30)]
    _file(tmp_path / "old.wsp", old)
    whisper.create(str(tmp_path / "empty.wsp"), [(60, 300), (600, 100)], xFilesFactor=0)
    target = tmp_path / "new.wsp"
    target.touch()
    thread, results = _merge_in_thread(target, (tmp_path / "old.wsp").read_bytes(), now)
    thread.join(0.3)
    assert thread.is_alive() and not results
    target.write_bytes((tmp_path / "empty.wsp").read_bytes())
    thread.join(10)
    assert results and results[0].verified and not results[0].created
    assert _points(target, now - 299 * 60, now, now) == dict(old)


def test_points_away_from_their_slot_count_as_missing_and_are_mended(tmp_path: Path) -> None:
    """Records placed from another first slot than the file's (the race two unlocked
    writers of an empty archive can run) are not readable: verification says so, and a
    merge writes them where whisper reads them."""
    now = int(time.time()) // 60 * 60
    old = [(now - 60 * k, float(k)) for k in range(3, 40)]
    _file(tmp_path / "old.wsp", old)
    target = tmp_path / "new.wsp"
    _file(target, [(now, -1.0)])  # the cache's point: first slot holds `now`
    first = archives(target.read_bytes())[0]
    low = min(ts for ts, _ in old)
    with open(target, "r+b") as handle:  # the old points placed from `low` instead
        for ts, value in old[:-1]:  # (the oldest's slot is the cache's point's)
            handle.seek(first.offset + (ts - low) // 60 % first.points * POINT.size)
            handle.write(POINT.pack(ts, value))
    source = (tmp_path / "old.wsp").read_bytes()
    before = verify(target.read_bytes(), source, now)
    assert not before.verified and before.present_points < before.source_points
    assert fill_file(str(target), source, now).verified
    got = _points(target, now - 299 * 60, now, now)
    assert got == dict(old + [(now, -1.0)])


def test_router_double_writes_until_moved(tmp_path: Path) -> None:
    old = ["127.0.0.2:2004:a", "127.0.0.3:2004:a"]
    new = old + ["127.0.0.4:2004:a"]
    moved = tmp_path / "moved.txt"
    state = tmp_path / "state.json"
    state.write_text(json.dumps({"old": old, "new": new, "moved": str(moved)}))
    router = RebalancingRouter(Settings(REBALANCE_STATE=str(state)))
    names = ["m.%d" % n for n in range(300)]
    changed = [n for n in names if len(router.get_destinations(n)) == 2]
    assert 50 < len(changed) < 150
    assert all(router.get_destinations(n)[0].host == "127.0.0.4" for n in changed)
    moved.write_text("".join(n + "\n" for n in changed[:10]) + changed[10])  # a torn line
    assert router.check_rules() is None
    assert [len(router.get_destinations(n)) for n in changed[:11]] == [1] * 10 + [2]
    # DESTINATIONS (the relay's clients, DYNAMIC_ROUTER) are a set; the rings place
    placed = [router.get_destinations(n) for n in names]
    for dest in new:
        router.addDestination(parse_destination(dest))
    assert router.count_destinations() == 3 and router.has_destination(("127.0.0.4", 2004, "a"))
    generation = router.generation
    router.remove_destination(("127.0.0.4", 2004, "a"))
    assert router.count_destinations() == 2 and not router.hasDestination(
        ("127.0.0.4", 2004, "a")) and router.generation == generation + 1
    assert [router.get_destinations(n) for n in names] == placed


def test_plan_and_dry_run_estimate(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text(GOOD.replace("replication_factor = 2", "replication_factor = 1"))
    old = load_cluster(str(path))
    path4 = tmp_path / "c4.toml"
    path4.write_text(path.read_text() + '[hosts.c]\naddress = "127.0.0.4"\n')
    new = load_cluster(str(path4))
    names = ["m.%d" % n for n in range(400)]
    old_ring, new_ring = ring(old), ring(new)
    listings = {h.name: [(n, 1000) for n in names if owners(old_ring, old, n) == [h.name]]
                for h in old.hosts}
    listings["a"].append(("carbon.agents.a-a.cpuUsage", 1000))  # not placed by the ring
    moves = plan(old, new, listings)
    assert {m.name for m in moves} == {n for n in names if owners(new_ring, new, n) == ["c"]}
    assert all(m.targets == ["c"] and m.delete == [m.source] for m in moves)
    summary = estimate(moves, Rates(bytes_per_second=10000, files_per_second=1000))
    assert summary["bytes"] == 1000 * len(moves) and summary["seconds"] == len(moves) / 10


def test_cli_reports_bad_files_and_stopped_hosts(tmp_path: Path) -> None:
    from tests.cluster.clusterutil import cli
    bad = tmp_path / "bad.toml"
    bad.write_text(GOOD.replace("replication_factor = 2", "replication_factor = x"))
    answer = cli("status", bad)
    assert answer.returncode == 2 and str(bad) in answer.stderr and "TOML" in answer.stderr
    good = tmp_path / "c.toml"
    good.write_text(GOOD)
    answer = cli("status", good, "--host", "b")
    assert answer.returncode == 1 and answer.stdout.count("stopped") == 4
    assert cli("status", good, "--host", "zz").returncode == 2
