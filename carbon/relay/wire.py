"""DESTINATION_PROTOCOL: the encoder a relay sends with and the decoder of each protocol.

* ``pickle`` (the default): messages of at most MAX_DATAPOINTS_PER_MESSAGE points in
  carbon 1.1.10's framing (:mod:`carbon.formats.pickled`).
* ``line``: ``metric value timestamp\\r\\n`` per point (:mod:`carbon.formats.plaintext`).

The decoders convert spooled data written under another protocol and serve the test
and benchmark sinks.
"""

from __future__ import annotations

from typing import Callable

from carbon.batch import Batch
from carbon.formats.pickled import decode_pickle_stream, encode_pickle
from carbon.formats.plaintext import decode_line_stream, encode_line

# encode(points, max_per_message) -> (payload, messages, points_encoded)
Encoder = Callable[[Batch, int], tuple[bytes, int, int]]

ENCODERS: dict[str, Encoder] = {"pickle": encode_pickle, "line": encode_line}
DECODERS = {"pickle": decode_pickle_stream, "line": decode_line_stream}


def encoder_for(protocol: str) -> Encoder:
    """The encoder of a DESTINATION_PROTOCOL; ValueError naming the known ones."""
    try:
        return ENCODERS[protocol]
    except KeyError:
        raise ValueError("DESTINATION_PROTOCOL must be one of %s. Invalid value: '%s'"
                         % (", ".join(sorted(ENCODERS)), protocol)) from None
