"""Built-in render functions; importing this package registers all of them.

``webapp.plugins.RENDER_FUNCTIONS`` imports it lazily on first lookup.  Pie functions
live in ``webapp.plugins.PIE_FUNCTIONS``.
"""

from webapp.functions import (  # noqa: F401  (imported for registration)
    alias, calculate, combine, filter_series, graph, grouping, holtwinters, pie, sorting, special,
    timefuncs, transform,
)
