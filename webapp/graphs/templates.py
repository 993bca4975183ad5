"""Graph templates (graphTemplates.conf) as graphite-web 1.1.10 applies them.

The file's ``[default]`` section replaces the built-in look for every graph; the ``template``
graph option picks another section (a missing key falls back to the default). A graph's own
parameters (bgcolor, fgcolor, colorList ...) win over its template. No file: built-ins only.
"""

from __future__ import annotations

import configparser
import functools
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
    try:
        stat = os.stat(path)
    except OSError:
        return {}
    sections = _sections(path, stat.st_mtime_ns, stat.st_size, stat.st_ino)
    chosen = dict(sections.get('default', ()))
    if name != 'default':
        chosen.update(sections.get(name, ()))
    return {KEYS[key]: value.strip() for key, value in chosen.items() if key in KEYS}


@functools.lru_cache(maxsize=8)
def _sections(path: str, mtime_ns: int, size: int, inode: int) -> dict[str, tuple]:
    """Each section's (key, value) items of the file as it is at ``mtime_ns``/``size``/
    ``inode`` (so an image request parses the file only when it has changed); {} for an
    unreadable or malformed file. Callers must not change the dict."""
    conf = configparser.ConfigParser(interpolation=None)
    try:
        if not conf.read(path):
            return {}
    except configparser.Error:
        return {}
    return {name: tuple(conf.items(name)) for name in conf.sections()}


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
