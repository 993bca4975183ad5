"""Configuration: carbon.conf, storage schemas, lists and rules files."""

from carbon.config.errors import ConfigError
from carbon.config.settings import Settings

__all__ = ["ConfigError", "Settings"]
