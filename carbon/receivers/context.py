"""State shared by every receiver connection of one daemon, and what they read of
carbon.conf (``ReceiverConfig``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from carbon.config.errors import ConfigError
from carbon.config.settings import Settings
from carbon.instrumentation.stats import Stats
from carbon.keepalive import KeepAlive
from carbon.logs import CarbonLog, IntervalLog
from carbon.pipeline import Pipeline
from carbon.flow import FlowControl
from carbon.receivers.limits import ConnectionLimit, LimitConfig


@dataclass(frozen=True)
class ReceiverConfig:
    """What the receiver connections read of carbon.conf, built once per daemon
    (``from_settings``); the defaults are carbon.config.defaults'."""

    max_length: int  # LINE_RECEIVER_MAX_LENGTH
    pickle_max_length: int  # PICKLE_RECEIVER_MAX_LENGTH
    insecure_unpickler: bool  # USE_INSECURE_UNPICKLER
    resolution: int  # MIN_TIMESTAMP_RESOLUTION (0: none)
    idle_timeout: float | None  # METRIC_CLIENT_IDLE_TIMEOUT (None: none)
    keepalive: KeepAlive  # TCP_KEEPALIVE, TCP_KEEPIDLE/KEEPINTVL/KEEPCNT
    log_success: bool  # LOG_LISTENER_CONN_SUCCESS
    log_lost: bool  # LOG_LISTENER_CONN_LOST
    limit: LimitConfig  # MAX_RECEIVER_CONNECTIONS, RECEIVER_FD_RESERVE

    @classmethod
    def from_settings(cls, settings: Settings) -> ReceiverConfig:
        return cls(
            max_length=int(settings["LINE_RECEIVER_MAX_LENGTH"]),
            pickle_max_length=int(settings["PICKLE_RECEIVER_MAX_LENGTH"]),
            insecure_unpickler=bool(settings["USE_INSECURE_UNPICKLER"]),
            resolution=int(settings["MIN_TIMESTAMP_RESOLUTION"] or 0),
            idle_timeout=idle_timeout(settings),
            keepalive=KeepAlive.from_settings(settings),
            log_success=bool(settings["LOG_LISTENER_CONN_SUCCESS"]),
            log_lost=bool(settings["LOG_LISTENER_CONN_LOST"]),
            limit=LimitConfig.from_settings(settings))


def idle_timeout(settings: Settings) -> float | None:
    """METRIC_CLIENT_IDLE_TIMEOUT in seconds; None (unset, or carbon.conf's example
    ``None``): connections never time out. Anything else is a ConfigError naming the key
    (carbon 1.1.10 takes the text and fails on every connection)."""
    value = settings["METRIC_CLIENT_IDLE_TIMEOUT"]
    if value is None or value == "None":
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ConfigError("METRIC_CLIENT_IDLE_TIMEOUT must be a number of seconds, not %r"
                          % (value,), settings.get("config_file"),
                          key="METRIC_CLIENT_IDLE_TIMEOUT") from None


class ReceiverContext:
    """Configuration, pipeline, stats, flow control, logs and live connections.

    Built once per daemon and handed to every receiver factory; no globals.
    """

    def __init__(self, config: ReceiverConfig, pipeline: Pipeline, stats: Stats,
                 flow: FlowControl, log: CarbonLog) -> None:
        self.config = config
        self.pipeline = pipeline
        self.stats = stats
        self.flow = flow
        self.log = log
        self.connections: set[Any] = set()
        self.limit = ConnectionLimit(config.limit, log.listener)
        # hand_off(conn, kind, factory): set by a daemon that spreads inbound TCP
        # connections over worker processes ("line" or "pickle"; see listeners).
        self.hand_off: Any = None
        self.bad_lines = IntervalLog(log.listener, "invalid lines received")
        self.bad_pickles = IntervalLog(log.listener, "invalid pickles received")
        self.failed_batches = IntervalLog(log.listener, "batches failed in the pipeline")
        self.max_length = config.max_length
        self.resolution = config.resolution
        # Bytes a TCP receiver asks for in one read (0 keeps Twisted's 64 KiB); a daemon
        # whose stages take whole reads may ask for more: fewer calls a line.
        self.read_size = 0
        self.opened = 0  # receiver connections opened so far

    def admit(self) -> bool:
        """May one more receiver connection open? (counted and logged when not)."""
        return self.limit.admit(len(self.connections))

    def connection_opened(self, protocol: Any) -> None:
        self.connections.add(protocol)
        self.opened += 1
        self.flow.register(protocol.transport)

    def connection_closed(self, protocol: Any) -> None:
        self.connections.discard(protocol)
        self.flow.unregister(protocol.transport)

    def flush_logs(self) -> None:
        self.bad_lines.flush()
        self.bad_pickles.flush()
        self.failed_batches.flush()
        self.limit.flush(len(self.connections))
