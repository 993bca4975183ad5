"""``carbon.util``: the reference module name tools import (carbonate: parseDestinations).

Faces over our own modules: destination strings are parsed by
:mod:`carbon.relay.destinations` (``(host, port, instance)`` tuples, equal to the
reference's), tagged names by :mod:`carbon.tags`.
"""

from __future__ import annotations

from carbon.relay.destinations import (Destination, parse_destination, parse_destinations,
                                       parseDestination, parseDestinations)
from carbon.tags import TaggedSeries

__all__ = ["Destination", "TaggedSeries", "parseDestination", "parseDestinations",
           "parse_destination", "parse_destinations"]
