"""The relay's destinations from settings: one DestinationClient each, with its spool
(``STORAGE_DIR/relay-spool/<program>-<instance>/<destination>``) and its TLS options.

Every setting the clients depend on is checked when their ``ClientSetConfig`` is built,
so a bad one is reported as a ConfigError naming the key before anything connects.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Callable

from carbon.config.errors import ConfigError
from carbon.relay.client import ClientConfig, DestinationClient
from carbon.relay.connection import tls_options
from carbon.relay.destinations import Destination, parse_destinations
from carbon.relay.spool import Spool
from carbon.relay.wire import encoder_for

__all__ = ["spool_directory", "configured_destinations", "checked_destinations",
           "ClientSetConfig", "make_clients"]


def spool_directory(settings: Any) -> str:
    """``STORAGE_DIR/relay-spool/<program>-<instance>``: one per daemon instance."""
    storage = settings.get("STORAGE_DIR")
    if not storage:
        raise ConfigError("STORAGE_DIR must be set: the relay spools undeliverable "
                          "datapoints under it", key="STORAGE_DIR")
    program = settings.get("program") or "carbon-relay"
    instance = settings.get("instance") or "a"
    return os.path.join(storage, "relay-spool", "%s-%s" % (program, instance))


def configured_destinations(settings: Any,
                            destinations: list[Destination] | None = None) -> list[Destination]:
    """DESTINATIONS parsed (or ``destinations`` as given); ConfigError if none or bad."""
    if destinations is None:
        try:
            destinations = parse_destinations(settings.DESTINATIONS or [])
        except ValueError as exc:
            raise ConfigError(str(exc), settings.get("config_file"),
                              key="DESTINATIONS") from None
    return checked_destinations(destinations, settings.get("config_file"))


def checked_destinations(destinations: list[Any], config_file: str | None) -> list[Destination]:
    """``destinations`` as Destinations; ConfigError (naming ``config_file``) if none."""
    if not destinations:
        raise ConfigError("DESTINATIONS is empty: the relay has nowhere to send",
                          config_file, key="DESTINATIONS")
    return [Destination(*d) for d in destinations]


def _check_settings(settings: Any) -> str:
    """DESTINATION_PROTOCOL and DESTINATION_TRANSPORT checked; returns the transport."""
    try:
        encoder_for(settings.DESTINATION_PROTOCOL)
    except ValueError as exc:
        raise ConfigError(str(exc), settings.get("config_file"),
                          key="DESTINATION_PROTOCOL") from None
    transport = settings.get("DESTINATION_TRANSPORT") or "none"
    if transport not in ("none", "ssl"):
        raise ConfigError("DESTINATION_TRANSPORT must be none or ssl, not %r" % transport,
                          settings.get("config_file"), key="DESTINATION_TRANSPORT")
    return transport  # DESTINATION_POOL_REPLICAS: the config loader warns (NOT_IMPLEMENTED)


@dataclass(frozen=True)
class ClientSetConfig:
    """What the set of destination clients reads of carbon.conf, checked and built once
    (``from_settings``; ConfigError naming the key at fault)."""

    client: ClientConfig  # each client's
    tls: bool  # DESTINATION_TRANSPORT = ssl
    ssl_ca: str | None  # DESTINATION_SSL_CA
    spool_max_bytes: int  # SPOOL_MAX_BYTES

    @classmethod
    def from_settings(cls, settings: Any) -> ClientSetConfig:
        transport = _check_settings(settings)
        return cls(client=ClientConfig.from_settings(settings), tls=transport == "ssl",
                   ssl_ca=settings.get("DESTINATION_SSL_CA"),
                   spool_max_bytes=int(settings["SPOOL_MAX_BYTES"]))


def make_clients(destinations: list[Destination], config: ClientSetConfig, stats: Any,
                 flow: Any, reactor: Any, log: Any, spool_dir: str,
                 schedule_flush: Callable[[], None],
                 state_changed: Callable[[DestinationClient, bool], None] | None = None,
                 **client_options: Any) -> dict[Destination, DestinationClient]:
    """One DestinationClient per destination, in order; ``client_options`` (spill_after,
    headroom, initial_delay, max_delay) go to each client."""
    clients: dict[Destination, DestinationClient] = {}
    for dest in destinations:
        if dest in clients:
            raise ConfigError("destination %s is listed twice" % (dest,), key="DESTINATIONS")
        spool = Spool(os.path.join(spool_dir, dest.stat_name.replace("/", "_")),
                      config.spool_max_bytes, config.client.protocol)
        clients[dest] = DestinationClient(
            dest, config.client, stats, flow, reactor, log, spool, schedule_flush,
            tls=tls_options(config.ssl_ca, dest.host) if config.tls else None,
            state_changed=state_changed, **client_options)
    return clients
