"""Self-metrics shared by all daemons."""

from carbon.instrumentation.stats import Stats

__all__ = ["Stats"]
