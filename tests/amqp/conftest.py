"""Session fixture: one private RabbitMQ broker on loopback for the AMQP tests."""

from __future__ import annotations

import os

import pytest

from tests.amqp.broker import Broker, find_server


def _unavailable(message: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail("AMQP tests need RabbitMQ: %s" % message, pytrace=False)
    pytest.skip("AMQP tests need RabbitMQ: %s" % message)


@pytest.fixture(scope="session")
def broker(tmp_path_factory):
    server = find_server()
    if server is None:
        _unavailable("rabbitmq-server not found (tools/system-deps.sh installs it)")
    instance = Broker(tmp_path_factory.mktemp("rabbitmq"), server)
    try:
        instance.start()
    except (OSError, RuntimeError) as exc:
        instance.close()
        _unavailable("could not start %s: %s" % (server, exc))
    yield instance
    instance.close()
