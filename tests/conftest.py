"""Suite-wide pytest setup: the one switch for slow real-system tests.

Tests marked ``@pytest.mark.system`` boot real systems (a container engine, a booted
systemd in a container, a Debian chroot with another Python, a live carbon 1.1.10 host to
upgrade). They run only when ``CARBON_SYSTEM_TESTS=1``, which ``.ci/run`` sets; elsewhere
they are skipped with that reason.
"""

from __future__ import annotations

import os

import pytest

SYSTEM_SWITCH = "CARBON_SYSTEM_TESTS"


def system_tests_on() -> bool:
    return os.environ.get(SYSTEM_SWITCH, "").lower() in ("1", "true", "yes")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "system: a slow real-system test, run only when %s=1" % SYSTEM_SWITCH)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if system_tests_on():
        return
    skip = pytest.mark.skip(reason="real-system test: set %s=1 to run it" % SYSTEM_SWITCH)
    for item in items:
        if item.get_closest_marker("system") is not None:
            item.add_marker(skip)
