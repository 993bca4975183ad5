"""The render app's plugin registries (the carbon daemons never import the render app).

``RENDER_FUNCTIONS`` maps a render function's name to its ``RenderFunction`` (and
``PIE_FUNCTIONS`` a pieMode's). The
built-in ones are registered by importing ``webapp.functions`` on first lookup; a
package adds its own through the ``carbon.render_functions`` entry point group, and a
settings file through FUNCTION_PLUGINS (``webapp.functions.plugins``).
"""

from __future__ import annotations

from carbon.plugins import Registry

RENDER_FUNCTIONS = Registry("render function", "carbon.render_functions",
                            ("webapp.functions",))
# pieMode's functions (graphite-web's PieFunctions), for the pie graphs and /functions
PIE_FUNCTIONS = Registry("pie function", "carbon.pie_functions", ("webapp.functions",))
