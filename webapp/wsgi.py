"""WSGI entry point for gunicorn/uwsgi: ``gunicorn webapp.wsgi:application``.

The settings file is named by the GRAPHITE_SETTINGS environment variable (graphite-web
``local_settings.py`` syntax); without it the built-in defaults are used. Importing it
also tunes the process for rendering (``webapp.process_tuning``).
"""

from __future__ import annotations

import os

from webapp.process_tuning import freeze_startup_objects, keep_large_buffers
from webapp.app import make_app
from webapp.settings import load_settings

keep_large_buffers()
application = make_app(load_settings(os.environ.get('GRAPHITE_SETTINGS') or None))
freeze_startup_objects()
