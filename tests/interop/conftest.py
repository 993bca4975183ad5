"""SKIP_REFERENCE=1 skips the tests that run the reference (a developer's opt-out, as in
tests/amqp; CI never sets it)."""

from __future__ import annotations

import os

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get("SKIP_REFERENCE") != "1":
        return
    skip = pytest.mark.skip(reason="SKIP_REFERENCE=1")
    for item in items:
        if "tests/interop/" in str(item.fspath).replace(os.sep, "/"):
            item.add_marker(skip)
