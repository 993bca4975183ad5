"""The user errors of a render request (HTTP 400), and graphite-web's message for them."""

from __future__ import annotations


class InputError(ValueError):
    """A user error in a target: unknown function, bad arguments (HTTP 400)."""


class InputParameterError(ValueError):
    """A render function was called with arguments it cannot accept (HTTP 400)."""


INPUT_ERRORS = (InputError, InputParameterError)


def format_input_error(err: Exception, targets: list[str]) -> str:
    """graphite-web's message for a 400: ``Invalid parameters (...); targets: "..."``."""
    msg = 'Invalid parameters (%s)' % err
    if targets:
        msg += '; targets: "%s"' % ', '.join(targets)
    return msg
