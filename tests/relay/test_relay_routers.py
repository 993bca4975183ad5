"""carbon.routers: every router against the reference vectors, rules files, the LRU."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from carbon.config.errors import ConfigError
from carbon.config.settings import Settings
from carbon.plugins import ROUTERS
from carbon.relay.destinations import Destination, parse_destination, parse_destinations
from carbon.routers import (AggregatedConsistentHashingRouter, ConsistentHashingRouter,
                            FastAggregatedHashingRouter, RelayRulesRouter, load_relay_rules,
                            make_router)

VECTORS = json.loads((Path(__file__).parents[1] / "data" / "hashing-vectors.json").read_text())
CASES = VECTORS["cases"]


def _settings(case: dict, **extra) -> Settings:
    values = dict(RELAY_METHOD=case["router"], ROUTER_HASH_TYPE=case["hash_type"],
                  REPLICATION_FACTOR=case["replication_factor"],
                  DIVERSE_REPLICAS=case["diverse_replicas"], DESTINATIONS=case["destinations"])
    values.update(extra)
    return Settings(**values)


@pytest.mark.parametrize("case", CASES, ids=lambda c: "%s-%s-%dd-r%d-%s" % (
    c["router"], c["hash_type"], len(c["destinations"]), c["replication_factor"],
    "div" if c["diverse_replicas"] else "nodiv"))
def test_every_vector_route(case):
    router = make_router(_settings(case))
    assert len(case["routes"]) == 200
    for name, expected in case["routes"].items():
        assert [str(d) for d in router.get_destinations(name)] == expected, name
    # The batch API agrees with the per-name answer.
    batch = [(name, 1.0, 2.0) for name in case["routes"]]
    for dest, points in router.route_batch(batch).items():
        for name, _, _ in points:
            assert str(dest) in case["routes"][name]
    assert sum(len(p) for p in router.route_batch(batch).values()) == sum(
        len(v) for v in case["routes"].values())


def test_aggregated_routers_equal_hashing_for_unaggregated_names():
    class NoAggregates:
        def get_aggregate_metric(self, name):
            return None

    for case in CASES:
        router_name = {"consistent-hashing": "aggregated-consistent-hashing",
                       "fast-hashing": "fast-aggregated-hashing"}[case["router"]]
        settings = _settings(case, RELAY_METHOD=router_name)
        router = make_router(settings, aggregation_rules=NoAggregates())
        for name, expected in list(case["routes"].items())[:50]:
            assert [str(d) for d in router.get_destinations(name)] == expected


def test_aggregated_router_follows_the_aggregate_name():
    case = CASES[4]  # ten destinations, replication 3

    class SumByHost:
        def get_aggregate_metric(self, name):
            parts = name.split(".")
            return "agg.%s.sum" % parts[1] if parts[0] == "hosts" else None

    plain = make_router(_settings(case, RELAY_METHOD="consistent-hashing"))
    agg = AggregatedConsistentHashingRouter(_settings(case), aggregation_rules=SumByHost())
    for dest in parse_destinations(case["destinations"]):
        agg.add_destination(dest)
    assert agg.get_destinations("hosts.web1.cpu") == plain.get_destinations("agg.web1.sum")
    assert agg.get_destinations("other.x") == plain.get_destinations("other.x")

    class RuleList:  # the reference RuleManager shape: .rules with get_aggregate_metric
        def __init__(self, *rules):
            self.rules = rules

    class Rule:
        def __init__(self, out):
            self.out = out

        def get_aggregate_metric(self, name):
            return self.out

    two = AggregatedConsistentHashingRouter(_settings(case),
                                            aggregation_rules=RuleList(Rule("a.x"), Rule("b.y")))
    for dest in parse_destinations(case["destinations"]):
        two.add_destination(dest)
    expected = list(dict.fromkeys(plain.get_destinations("a.x") + plain.get_destinations("b.y")))
    assert list(two.get_destinations("anything")) == expected

    fast = FastAggregatedHashingRouter(_settings(CASES[-1]), aggregation_rules=SumByHost())
    assert fast.hash_router.ring.hash_type == "mmh3_ch"


def test_aggregated_router_reads_and_follows_the_rules_file(tmp_path):
    import os

    rules = tmp_path / "aggregation-rules.conf"
    settings = _settings(CASES[4], RELAY_METHOD="aggregated-consistent-hashing")
    settings["aggregation-rules"] = str(rules)
    router = make_router(settings)  # a missing file means no rules, as in the reference
    plain = make_router(_settings(CASES[4]))
    assert router.get_destinations("hosts.web1.cpu") == plain.get_destinations("hosts.web1.cpu")
    rules.write_text("agg.<host>.sum (60) = sum hosts.<host>.*\n")
    assert router.check_rules() is None
    assert router.get_destinations("hosts.web1.cpu") == plain.get_destinations("agg.web1.sum")
    rules.write_text("agg.<host>.avg (60) = avg hosts.<host>.*\n")
    os.utime(rules, (1, 1))  # a different mtime even within one clock tick
    assert router.check_rules() is None
    assert router.get_destinations("hosts.web1.cpu") == plain.get_destinations("agg.web1.avg")
    rules.write_text("broken line\n")
    os.utime(rules, (2, 2))
    assert router.check_rules() is not None  # error reported, old rules kept
    assert router.get_destinations("hosts.web1.cpu") == plain.get_destinations("agg.web1.avg")


def test_replication_and_diverse_replicas():
    dests = ["10.0.0.1:2004:a", "10.0.0.1:2104:b", "10.0.0.2:2004:a", "10.0.0.2:2104:b"]
    diverse = make_router(Settings(RELAY_METHOD="consistent-hashing", REPLICATION_FACTOR=2,
                                   DESTINATIONS=dests))
    plain = make_router(Settings(RELAY_METHOD="consistent-hashing", REPLICATION_FACTOR=2,
                                 DIVERSE_REPLICAS=False, DESTINATIONS=dests))
    same_host = 0
    for i in range(300):
        name = "m.%d" % i
        picked = diverse.get_destinations(name)
        assert len(picked) == 2 and picked[0].host != picked[1].host
        other = plain.get_destinations(name)
        assert len(set(other)) == 2
        same_host += other[0].host == other[1].host
    assert same_host > 0  # without DIVERSE_REPLICAS both replicas may share a host
    everyone = make_router(Settings(RELAY_METHOD="consistent-hashing", REPLICATION_FACTOR=9,
                                    DIVERSE_REPLICAS=False, DESTINATIONS=dests))
    assert sorted(everyone.get_destinations("x")) == sorted(parse_destinations(dests))
    single = make_router(Settings(RELAY_METHOD="consistent-hashing", REPLICATION_FACTOR=3,
                                  DIVERSE_REPLICAS=False, DESTINATIONS=["h:1:a"]))
    assert single.get_destinations("x") == (Destination("h", 1, "a"),)


def test_crelay_hash_types_through_the_router():
    for hash_type in ("crelay_carbon_ch", "crelay_fnv1a_ch", "jump_fnv1a_ch"):
        # carbon_ch ignores the port: same-host destinations need instances to differ.
        dests = (["127.0.0.1:2003:a", "127.0.0.1:2103:b", "127.0.0.2:2003"]
                 if hash_type == "crelay_carbon_ch"
                 else ["127.0.0.1:2003", "127.0.0.1:2103", "127.0.0.2:2003"])
        router = make_router(Settings(RELAY_METHOD="consistent-hashing",
                                      ROUTER_HASH_TYPE=hash_type, REPLICATION_FACTOR=2,
                                      DIVERSE_REPLICAS=False, DESTINATIONS=dests))
        seen = set()
        for i in range(300):
            picked = router.get_destinations("metric.%d" % i)
            assert len(picked) == 2 and len(set(picked)) == 2
            seen.update(picked)
        assert seen == set(parse_destinations(dests))
    with pytest.raises(ConfigError, match="ROUTER_HASH_TYPE"):
        make_router(Settings(RELAY_METHOD="consistent-hashing", ROUTER_HASH_TYPE="nope",
                             DESTINATIONS=dests))
    with pytest.raises(ConfigError, match="RELAY_METHOD"):
        make_router(Settings(RELAY_METHOD="magic", DESTINATIONS=dests))


def test_routers_registered_under_reference_names():
    assert set(ROUTERS.names()) >= {"rules", "consistent-hashing", "fast-hashing",
                                    "aggregated-consistent-hashing", "fast-aggregated-hashing"}


def test_lru_cache_is_bounded_and_cleared_on_changes():
    router = make_router(Settings(RELAY_METHOD="consistent-hashing", RELAY_HASH_CACHE_SIZE=10,
                                  DESTINATIONS=["h1:1:a", "h2:1:b"]))
    for i in range(100):
        router.get_destinations("name.%d" % i)
    assert router.cached_names == 10
    before = router.get_destinations("name.99")
    router.remove_destination(("h1", 1, "a"))
    assert router.cached_names == 0
    assert router.get_destinations("name.99") == (Destination("h2", 1, "b"),)
    router.add_destination(("h1", 1, "a"))
    assert router.get_destinations("name.99") == before
    with pytest.raises(ValueError, match="already configured"):
        router.addDestination(("h1", 9, "a"))
    uncached = make_router(Settings(RELAY_METHOD="consistent-hashing", RELAY_HASH_CACHE_SIZE=0,
                                    DESTINATIONS=["h1:1:a", "h2:1:b"]))
    assert uncached.route_batch([("x", 1.0, 1.0)]) == {
        uncached.get_destinations("x")[0]: [("x", 1.0, 1.0)]}


def test_key_function(tmp_path):
    module = tmp_path / "keys.py"
    module.write_text("def key(name):\n    return name.rsplit('.', 1)[0]\n")
    router = ConsistentHashingRouter(Settings(REPLICATION_FACTOR=1))
    for dest in parse_destinations(["h%d:1:%d" % (i, i) for i in range(5)]):
        router.addDestination(dest)
    router.setKeyFunctionFromModule("%s:key" % module)
    for i in range(50):
        assert router.getDestinations("host%d.cpu.user" % i) == router.getDestinations(
            "host%d.cpu.system" % i)


# -- relay-rules.conf ----------------------------------------------------------------

RULES = """\
# comment
[default]
default = true
destinations = 127.0.0.1:2004:a

[web]
pattern = ^servers\\.web
destinations = 127.0.0.1:2104:b, 127.0.0.1:2204:c
continue = true

[web-more]
pattern = WEB
destinations = 127.0.0.1:2204:c, [::1]:2304:d

[ignored]
default = false
destinations = 127.0.0.1:2004:a
"""


def _rules_router(tmp_path, text=RULES, destinations=None):
    path = tmp_path / "relay-rules.conf"
    path.write_text(text)
    settings = Settings(RELAY_METHOD="rules", DESTINATIONS=destinations or [
        "127.0.0.1:2004:a", "127.0.0.1:2104:b", "127.0.0.1:2204:c", "[::1]:2304:d"])
    settings["relay-rules"] = str(path)
    return make_router(settings)


def test_rules_router(tmp_path):
    router = _rules_router(tmp_path)
    assert isinstance(router, RelayRulesRouter)
    assert [r.name for r in router.rules] == ["web", "web-more", "default"]
    assert [str(d) for d in router.get_destinations("servers.web01.cpu")] == [
        "127.0.0.1:2104:b", "127.0.0.1:2204:c", "[::1]:2304:d"]
    assert [str(d) for d in router.get_destinations("x.Web.y")] == [
        "127.0.0.1:2204:c", "[::1]:2304:d"]  # case-insensitive search; no continue
    assert [str(d) for d in router.get_destinations("db.load")] == ["127.0.0.1:2004:a"]
    # Destinations not in DESTINATIONS are never used, and reported.
    partial = _rules_router(tmp_path, destinations=["127.0.0.1:2004:a", "127.0.0.1:2204:c"])
    assert [str(d) for d in partial.get_destinations("servers.web01")] == ["127.0.0.1:2204:c"]
    assert [str(d) for d in partial.unknown_rule_destinations()] == [
        "127.0.0.1:2104:b", "[::1]:2304:d"]


@pytest.mark.parametrize("text, line, message", [
    ("[a]\npattern = x\n", 1, "does not define a 'destinations' list"),
    ("[a]\npattern = x\ndefault = true\ndestinations = h:1\n", 1, "both 'pattern' and 'default'"),
    ("[a]\npattern = x\ndestinations = h:1\n", None, "No default rule defined"),
    ("[d]\ndefault = true\ndestinations = h:1\n[e]\ndefault = true\ndestinations = h:1\n", 5,
     "Only one default rule"),
    ("[d]\ndefault = true\ndestinations = h:1\n[r]\npattern = ([\ndestinations = h:1\n", 5,
     "invalid regular expression"),
    ("[d]\ndefault = true\ndestinations = h:1, nocolon\n", 3, "Invalid destination"),
    ("[d]\ndefault = maybe\ndestinations = h:1\n", 2, "invalid boolean"),
    ("[d]\ndefault = true\ndestinations = h:1\n[d]\ndefault = true\ndestinations = h:1\n", 4,
     "already defined"),
])
def test_rules_errors_name_file_and_line(tmp_path, text, line, message):
    path = tmp_path / "relay-rules.conf"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message) as info:
        load_relay_rules(str(path))
    assert info.value.path == str(path)
    assert info.value.line == line
    assert str(path) in str(info.value)


def test_missing_rules_file(tmp_path):
    with pytest.raises(ConfigError, match="cannot read"):
        load_relay_rules(str(tmp_path / "absent.conf"))


# -- destination strings ----------------------------------------------------------------

def test_parse_destination():
    assert parse_destination("127.0.0.1:2004:a") == ("127.0.0.1", 2004, "a")
    assert parse_destination(" host.example:2004 ") == ("host.example", 2004, None)
    assert parse_destination("[::1]:2004:a") == ("::1", 2004, "a")
    assert parse_destination("[fe80::1%eth0]:2004") == ("fe80::1%eth0", 2004, None)
    dest = parse_destination("[::1]:2004:a")
    assert str(dest) == "[::1]:2004:a" and dest.stat_name == "::1:2004:a"
    assert parse_destination("10.0.0.1:2004").stat_name == "10_0_0_1:2004:None"
    assert parse_destinations(["a:1:x, b:2", "c:3"]) == [("a", 1, "x"), ("b", 2, None),
                                                         ("c", 3, None)]
    for bad in ("nocolon", "host:port", "[::1]2004", ":2004", "h:0", "h:70000"):
        with pytest.raises(ValueError, match="Invalid destination"):
            parse_destination(bad)
