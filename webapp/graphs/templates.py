"""Graph templates (graphTemplates.conf) as graphite-web 1.1.10 applies them.

The file's ``[default]`` section replaces the built-in look for every graph; the ``template``
graph option picks another section (a missing key falls back to the default). A graph's own
parameters (bgcolor, fgcolor, colorList ...) win over its template. No file: built-ins only.
"""

from __future__ import annotations

import configparser
import os
from typing import Any, Optional

# template key -> graph parameter it supplies a default for
KEYS = {'background': 'bgcolor', 'foreground': 'fgcolor', 'majorline': 'majorGridLineColor',
        'minorline': 'minorGridLineColor', 'linecolors': 'colorList', 'fontname': 'fontName',
        'fontsize': 'fontSize', 'fontbold': 'fontBold', 'fontitalic': 'fontItalic'}


def templates_path(settings: Any) -> str:
    """GRAPHTEMPLATES_CONF, else graphite-web's CONF_DIR/graphTemplates.conf."""
    configured = settings.get('GRAPHTEMPLATES_CONF') or ''
    if configured:
        return configured
    return os.path.join(settings.get('CONF_DIR') or '/opt/graphite/conf', 'graphTemplates.conf')


def template_values(path: Optional[str], name: str = 'default') -> dict[str, str]:
    """Graph parameters the template ``name`` of the file at ``path`` supplies."""
    if not path:
        return {}
    conf = configparser.ConfigParser(interpolation=None)
    try:
        if not conf.read(path):
            return {}
    except configparser.Error:
        return {}
    chosen: dict[str, str] = dict(conf.items('default')) if conf.has_section('default') else {}
    if name != 'default' and conf.has_section(name):
        chosen.update(conf.items(name))
    return {KEYS[key]: value.strip() for key, value in chosen.items() if key in KEYS}


def apply_template(params: dict[str, Any], path: Optional[str]) -> dict[str, Any]:
    """``params`` with its template's values filled in where the graph gives none."""
    values = template_values(path, str(params.get('template') or 'default'))
    if not values:
        return params
    merged = dict(params)
    for key, value in values.items():
        if merged.get(key) in (None, ''):
            merged[key] = value.replace(' ', '') if key == 'colorList' else value
    return merged
