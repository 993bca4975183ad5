"""WSGI entry point for gunicorn/uwsgi: ``gunicorn webapp.wsgi:application``.

The settings file is named by the GRAPHITE_SETTINGS environment variable (graphite-web
``local_settings.py`` syntax); without it the built-in defaults are used.
"""

from __future__ import annotations

import os

from webapp.app import make_app
from webapp.settings import load_settings

application = make_app(load_settings(os.environ.get('GRAPHITE_SETTINGS') or None))
