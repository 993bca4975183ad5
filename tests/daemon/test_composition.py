"""Every daemon's composition declares its receivers (issue 27): the list says what
carbon.conf asks for, in the order the daemon opens them, and nothing else; ``start``
opens exactly that list. The components below the daemons take frozen configs built
once from Settings, never the Settings themselves."""

from __future__ import annotations

import dataclasses
import inspect
import signal
import socket
import time
from pathlib import Path
from typing import Any

import pytest
from twisted.internet import defer, task

from carbon.aggregator.buffers import BufferManager
from carbon.aggregator.processor import AggregationConfig, AggregationProcessor
from carbon.config.defaults import DEFAULTS
from carbon.config.errors import ConfigError
from carbon.config.settings import Settings
from carbon.daemon.aggregator import AggregatorCacheDaemon, AggregatorDaemon
from carbon.daemon.base import Daemon
from carbon.daemon.cache import CacheDaemon
from carbon.daemon.manhole import listen_manhole, manhole_factory
from carbon.daemon.relay import RelayDaemon
from carbon.daemon.relay_workers import worker_settings
from carbon.logs import MemoryLog
from carbon.playground.ports import free_port
from carbon.receivers.amqp import (AMQPListener, AMQPListenerFactory, AMQPMetricListener,
                                   start_amqp_listener)
from carbon.receivers.context import ReceiverConfig, ReceiverContext
from carbon.receivers.handoff import HandOffPort
from carbon.receivers.limits import ConnectionLimit
from carbon.receivers.listeners import listen
from carbon.receivers.protocols import (LineReceiver, PickleReceiver, ReceiverFactory,
                                        UDPReceiver)
from carbon.relay.client import DestinationClient
from carbon.relay.client_set import make_clients
from carbon.relay.sink import RelaySink
from tests.relay.harness import run_reactor
from tests.support import CarbonInstance, carbonlink, port_open, send_tcp, wait_for

DAEMONS: list[type[Daemon]] = [CacheDaemon, RelayDaemon, AggregatorDaemon,
                               AggregatorCacheDaemon]
CACHES = (CacheDaemon, AggregatorCacheDaemon)
LINE = ("line", "0.0.0.0", 2003)
PICKLE = ("pickle", "0.0.0.0", 2004)
QUERY = ("carbonlink", "0.0.0.0", 7002)


def daemon_settings(tmp_path: Path, **overrides: Any) -> Settings:
    """What any of the four daemons needs to be built (not started) in ``tmp_path``."""
    conf = tmp_path / "conf"
    conf.mkdir(exist_ok=True)
    (conf / "storage-schemas.conf").write_text("[default]\npattern = .*\nretentions = 60s:1d\n")
    settings = Settings(CONF_DIR=str(conf), STORAGE_DIR=str(tmp_path / "storage"),
                        LOCAL_DATA_DIR=str(tmp_path / "storage" / "whisper"),
                        DESTINATIONS=["127.0.0.1:1:a"], RELAY_METHOD="consistent-hashing",
                        CACHE_JOURNAL=False,
                        program="carbon-test", instance="a")
    settings.update(overrides)
    return settings


def listed(daemon: Daemon) -> list[tuple[str, str, int]]:
    return [(spec.kind, spec.interface, spec.port) for spec in daemon.composition.receivers]


def build(daemon_class: type[Daemon], settings: Settings) -> Daemon:
    daemon = daemon_class(settings, MemoryLog(), reactor=None)
    if isinstance(daemon, CacheDaemon):
        daemon.database.close()
    return daemon


CASES = [
    # (carbon.conf, receivers of carbon-relay and carbon-aggregator; the caches list
    #  carbonlink first)
    ({}, [LINE, PICKLE]),
    ({"LINE_RECEIVER_PORT": 0, "ENABLE_UDP_LISTENER": True, "UDP_RECEIVER_PORT": 2103,
      "UDP_RECEIVER_INTERFACE": "127.0.0.2"},
     [PICKLE, ("udp", "127.0.0.2", 2103)]),
    ({"UDP_RECEIVER_PORT": 2103}, [LINE, PICKLE]),  # UDP off unless ENABLE_UDP_LISTENER
    ({"PICKLE_RECEIVER_PORT": 0, "LINE_RECEIVER_INTERFACE": "127.0.0.3",
      "LINE_RECEIVER_PORT": 2203, "ENABLE_MANHOLE": True, "MANHOLE_PORT": 2222,
      "ENABLE_AMQP": True, "AMQP_HOST": "broker.example", "AMQP_PORT": 5673},
     [("line", "127.0.0.3", 2203), ("manhole", "127.0.0.1", 2222),
      ("amqp", "broker.example", 5673)]),
]


@pytest.mark.parametrize("daemon_class", DAEMONS, ids=lambda c: c.__name__)
@pytest.mark.parametrize("conf, expected", CASES, ids=["default", "udp", "udp-off", "more"])
def test_composition_lists_the_receivers_carbon_conf_asks_for(tmp_path, daemon_class, conf,
                                                              expected):
    daemon = build(daemon_class, daemon_settings(tmp_path, **conf))
    query = [QUERY] if daemon_class in CACHES else []
    assert listed(daemon) == query + expected


@pytest.mark.parametrize("daemon_class", CACHES, ids=lambda c: c.__name__)
def test_a_cache_without_query_port_lists_no_carbonlink(tmp_path, daemon_class):
    daemon = build(daemon_class, daemon_settings(tmp_path, CACHE_QUERY_PORT=0))
    assert listed(daemon) == [LINE, PICKLE]


def test_receiver_options_are_typed_and_built_from_settings(tmp_path):
    daemon = build(RelayDaemon, daemon_settings(
        tmp_path, ENABLE_AMQP=True, AMQP_EXCHANGE="metrics", BIND_PATTERNS="a.#, b.*",
        ENABLE_MANHOLE=True, MANHOLE_USER="admin"))
    by_kind = {spec.kind: spec for spec in daemon.composition.receivers}
    amqp = by_kind["amqp"].options
    assert type(amqp).__name__ == "AMQPConfig"
    assert (amqp.exchange, amqp.bind_patterns) == ("metrics", ("a.#", "b.*"))
    assert by_kind["manhole"].options.user == "admin"
    assert by_kind["line"].backlog == DEFAULTS["LINE_RECEIVER_BACKLOG"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        by_kind["line"].port = 1  # type: ignore[misc]


def test_a_relay_worker_lists_no_receiver(tmp_path):
    """RELAY_WORKERS: a worker serves the connections its master hands over."""
    settings = daemon_settings(tmp_path, ENABLE_UDP_LISTENER=True, ENABLE_AMQP=True)
    daemon = build(RelayDaemon, worker_settings(settings, 1))
    assert listed(daemon) == []


def test_start_opens_what_the_list_says_in_its_order(tmp_path):
    line, udp = free_port(), free_port(socket.SOCK_DGRAM)
    settings = daemon_settings(tmp_path, LINE_RECEIVER_INTERFACE="127.0.0.1",
                               LINE_RECEIVER_PORT=line, PICKLE_RECEIVER_PORT=0,
                               ENABLE_UDP_LISTENER=True, UDP_RECEIVER_INTERFACE="127.0.0.1",
                               UDP_RECEIVER_PORT=udp, SHUTDOWN_FLUSH_TIMEOUT=0.5,
                               CARBON_METRIC_INTERVAL=0, TCP_KEEPIDLE=17)

    @defer.inlineCallbacks
    def body(reactor: Any) -> Any:
        daemon = RelayDaemon(settings, MemoryLog(), reactor)
        daemon.start()
        opened = [(port.getHost().type, port.getHost().port) for port in daemon.ports]
        sender = socket.create_connection(("127.0.0.1", line))
        for _ in range(200):
            if daemon.receivers.connections:
                break
            yield task.deferLater(reactor, 0.01, lambda: None)
        # the receiver's side of the connection has TCP_KEEPALIVE and TCP_KEEPIDLE
        handle = next(iter(daemon.receivers.connections)).transport.getHandle()
        keepalive = (handle.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE),
                     handle.getsockopt(socket.SOL_TCP, socket.TCP_KEEPIDLE))
        sender.close()
        yield daemon.shutdown()
        return daemon, opened, keepalive

    daemon, opened, keepalive = run_reactor(body)
    assert listed(daemon) == [("line", "127.0.0.1", line), ("udp", "127.0.0.1", udp)]
    assert opened == [("TCP", line), ("UDP", udp)]
    assert keepalive == (1, 17)


# The components a daemon composes: each takes a frozen config (or plain values), never
# the Settings (carbon.conf compatibility faces such as carbon.routers keep theirs).
COMPONENTS = [ReceiverContext, ConnectionLimit, LineReceiver, PickleReceiver, UDPReceiver,
              ReceiverFactory, HandOffPort, listen, AMQPListener, AMQPListenerFactory,
              AMQPMetricListener, start_amqp_listener, listen_manhole, manhole_factory,
              RelaySink, DestinationClient, make_clients, AggregationProcessor,
              BufferManager]


@pytest.mark.parametrize("component", COMPONENTS, ids=lambda c: c.__qualname__)
def test_components_take_no_settings(component):
    signature = inspect.signature(component)
    for name, parameter in signature.parameters.items():
        assert name != "settings", "%s takes settings" % component.__qualname__
        assert "Settings" not in str(parameter.annotation), \
            "%s: %s is a Settings" % (component.__qualname__, name)


def test_configs_take_their_defaults_from_defaults():
    receiver = ReceiverConfig.from_settings(Settings())
    assert receiver.max_length == DEFAULTS["LINE_RECEIVER_MAX_LENGTH"]
    assert receiver.pickle_max_length == DEFAULTS["PICKLE_RECEIVER_MAX_LENGTH"]
    assert receiver.limit.fd_reserve == DEFAULTS["RECEIVER_FD_RESERVE"]
    assert receiver.keepalive.options == (("TCP_KEEPIDLE", DEFAULTS["TCP_KEEPIDLE"]),
                                          ("TCP_KEEPINTVL", DEFAULTS["TCP_KEEPINTVL"]),
                                          ("TCP_KEEPCNT", DEFAULTS["TCP_KEEPCNT"]))
    aggregation = AggregationConfig.from_settings(Settings(FORWARD_ALL=False))
    assert aggregation == AggregationConfig(forward_all=False,
                                            log_misses=DEFAULTS["LOG_AGGREGATOR_MISSES"])
    with pytest.raises(dataclasses.FrozenInstanceError):
        receiver.max_length = 1  # type: ignore[misc]



def test_a_cache_keeps_carbonlink_open_past_its_receivers(tmp_path):
    """carbonlink is the sink's listener (listed first, opened by the sink's start, closed
    once the cache drained): during the shutdown drain the line port is closed while
    carbonlink still answers for the points not yet written."""
    instance = CarbonInstance(tmp_path, MAX_UPDATES_PER_SECOND=1,
                              MAX_UPDATES_PER_SECOND_ON_SHUTDOWN=4)
    metrics = ["drain.m%d" % i for i in range(24)]
    instance.start_foreground()
    try:
        now = int(time.time()) // 60 * 60
        send_tcp(instance.line_port, b"".join(b"%s 1 %d\n" % (m.encode(), now)
                                              for m in metrics))

        def cached() -> int:
            answer = carbonlink(instance.query_port, {"type": "cache-query-bulk",
                                                      "metrics": metrics})
            return sum(len(points) for points in answer["datapointsByMetric"].values())

        wait_for(lambda: cached() >= len(metrics) - 2, what="points in the cache")
        assert instance.proc is not None
        instance.proc.send_signal(signal.SIGTERM)
        wait_for(lambda: not port_open(instance.line_port), what="the line port to close")
        assert instance.proc.poll() is None, "drained already: nothing shows the order"
        assert cached() > 0  # carbonlink answers while the cache drains
        assert instance.proc.wait(60) == 0
    finally:
        instance.kill()


def test_idle_timeout_is_seconds_or_none_and_a_bad_one_names_the_key():
    assert ReceiverConfig.from_settings(Settings()).idle_timeout is None
    assert ReceiverConfig.from_settings(Settings(METRIC_CLIENT_IDLE_TIMEOUT=90)).idle_timeout \
        == 90.0
    assert ReceiverConfig.from_settings(
        Settings(METRIC_CLIENT_IDLE_TIMEOUT="None")).idle_timeout is None
    with pytest.raises(ConfigError, match="METRIC_CLIENT_IDLE_TIMEOUT") as error:
        ReceiverConfig.from_settings(Settings(METRIC_CLIENT_IDLE_TIMEOUT="soon",
                                              config_file="/etc/carbon/carbon.conf"))
    assert "/etc/carbon/carbon.conf" in str(error.value) and "'soon'" in str(error.value)
