"""Settings of the render app: graphite-web's names, loaded once from a Python file.

The file uses the same syntax as graphite-web's ``local_settings.py`` (plain Python
assignments of UPPERCASE names), so an existing one can be reused. Nothing is
global: :func:`load_settings` returns a :class:`WebSettings` that is passed to
:func:`webapp.app.make_app`.
"""

from __future__ import annotations

import difflib
import ipaddress
import logging
import os
from typing import Any

from carbon.config.errors import ConfigError
from carbon.relay.destinations import parse_destination

log = logging.getLogger("webapp")

WEBAPP_VERSION = "1.1.10"

DEFAULTS: dict[str, Any] = dict(
    GRAPHITE_ROOT="",                # default: $GRAPHITE_ROOT or /opt/graphite
    STORAGE_DIR="",                  # default: $GRAPHITE_STORAGE_DIR or GRAPHITE_ROOT/storage
    WHISPER_DIR="",                  # default: STORAGE_DIR/whisper
    TIME_ZONE="UTC",
    DEFAULT_XFILES_FACTOR=0,
    DEFAULT_CACHE_DURATION=60,
    URL_PREFIX="",
    # carbonlink (queries to carbon-cache instances)
    CARBONLINK_HOSTS=["127.0.0.1:7002"],
    CARBONLINK_TIMEOUT=1.0,
    CARBONLINK_HASHING_TYPE="carbon_ch",
    CARBONLINK_RETRY_DELAY=15,
    CARBONLINK_PICKLE_PROTOCOL=2,
    CARBON_METRIC_PREFIX="carbon",
    REPLICATION_FACTOR=1,
    # federation
    CLUSTER_SERVERS=[],
    REMOTE_FIND_TIMEOUT=None,
    REMOTE_FETCH_TIMEOUT=None,
    FIND_TIMEOUT=None,               # default: REMOTE_FIND_TIMEOUT or 3.0
    FETCH_TIMEOUT=None,              # default: REMOTE_FETCH_TIMEOUT or 6.0
    REMOTE_RETRY_DELAY=60.0,
    REMOTE_EXCLUDE_LOCAL=False,
    REMOTE_STORE_FORWARD_HEADERS=[],
    REMOTE_STORE_USE_POST=False,
    INTRACLUSTER_HTTPS=False,
    MAX_FETCH_RETRIES=2,
    POOL_MAX_WORKERS=10,
    FAILED_HOSTS_HEADER="X-Graphite-Failed-Hosts",
    # finds
    METRICS_FIND_WARNING_THRESHOLD=float("inf"),
    METRICS_FIND_FAILURE_THRESHOLD=float("inf"),
    # tags
    TAGDB="graphite.tags.localdatabase.LocalDatabaseTagDB",
    TAGDB_SQLITE_PATH="",            # default: STORAGE_DIR/graphite.db (graphite-web's DB)
    TAGDB_CACHE_DURATION=60,
    TAGDB_AUTOCOMPLETE_LIMIT=100,
    # rendering
    ENFORCE_INPUT_VALIDATION=False,
    FUNCTION_PLUGINS=[],             # modules exporting SeriesFunctions / PieFunctions
    CPU_SLOTS=1,                     # requests running Python work at once (0 = no limit)
    # bounded work per request (webapp/limits.py, docs/webapp.md)
    MAX_REQUEST_BYTES=2621440,       # body size (Django's DATA_UPLOAD_MAX_MEMORY_SIZE); 413
    RENDER_MAX_DATAPOINTS=5000000,   # datapoints one render request may read; 400
    FIND_MAX_ENTRIES=1000000,        # directory entries one find may read; 400
    MAX_REQUEST_SECONDS=60,          # evaluation time of one render request; 400
    CLIENT_REQUEST_TIMEOUT=30,       # seconds to send a whole request; 408
    WRITE_ALLOWED_ADDRESSES=[],      # addresses/networks that may write tags and events
    WRITE_TOKEN="",                  # or: writing needs "Authorization: Bearer <token>"
    GRAPHTEMPLATES_CONF="",          # default: CONF_DIR/graphTemplates.conf (graph templates)
    LOG_LEVEL="INFO",
)

_LIST_KEYS = {k for k, v in DEFAULTS.items() if isinstance(v, list)}
_BOOL_KEYS = {k for k, v in DEFAULTS.items() if isinstance(v, bool)}
_NUMBER_KEYS = {"CARBONLINK_TIMEOUT", "CARBONLINK_RETRY_DELAY", "REMOTE_RETRY_DELAY",
                "REMOTE_FIND_TIMEOUT", "REMOTE_FETCH_TIMEOUT", "FIND_TIMEOUT", "FETCH_TIMEOUT",
                "DEFAULT_XFILES_FACTOR", "DEFAULT_CACHE_DURATION", "REPLICATION_FACTOR",
                "MAX_FETCH_RETRIES", "POOL_MAX_WORKERS", "TAGDB_CACHE_DURATION",
                "TAGDB_AUTOCOMPLETE_LIMIT", "METRICS_FIND_WARNING_THRESHOLD",
                "METRICS_FIND_FAILURE_THRESHOLD", "CARBONLINK_PICKLE_PROTOCOL", "CPU_SLOTS",
                "MAX_REQUEST_BYTES", "RENDER_MAX_DATAPOINTS", "FIND_MAX_ENTRIES",
                "MAX_REQUEST_SECONDS", "CLIENT_REQUEST_TIMEOUT"}
# graphite-web keys that are accepted and not used; a settings file that sets any of
# them gets one warning naming them (``WebSettings.ignored``).
_IGNORED = {"SECRET_KEY", "DATABASES", "MEMCACHE_HOSTS", "CACHES", "LOG_DIR", "DEBUG",
            "ALLOWED_HOSTS", "USE_WORKER_POOL", "REMOTE_STORE_MERGE_RESULTS", "STORAGE_FINDERS",
            "FIND_CACHE_DURATION", "FIND_TOLERANCE", "LOG_RENDERING_PERFORMANCE",
            "LOG_CACHE_PERFORMANCE", "CONF_DIR", "CONTENT_DIR", "INDEX_FILE",
            "LOG_ROTATION", "LOG_ROTATION_COUNT", "LOG_FILE_INFO", "LOG_FILE_EXCEPTION",
            "LOG_FILE_CACHE", "LOG_FILE_RENDERING", "STANDARD_DIRS", "CERES_DIR", "RRD_DIR",
            "REMOTE_BUFFER_SIZE", "DASHBOARD_CONF",
            "MAX_TAG_LENGTH", "TAGDB_REDIS_HOST", "TAGDB_REDIS_PORT", "TAGDB_REDIS_DB",
            "TAGDB_HTTP_URL", "TAGDB_HTTP_USER", "TAGDB_HTTP_PASSWORD", "TAGDB_HTTP_AUTOCOMPLETE",
            "CARBONLINK_HASHING_KEYFUNC", "DEFAULT_CACHE_POLICY",
            # the rest of graphite-web 1.1.10's settings.py and local_settings.py.example
            # (tests/interop/test_graphite_web_setting_names.py): Django, accounts, LDAP,
            # e-mail, dashboard, static files, remote rendering, RRD, and render options
            # this app does not have (LEGEND_MAX_ITEMS: the legendMaxItems parameter;
            # RENDER_TRIM_RECENT_IN_AGGREGATE, STORE_FAIL_ON_ERROR, UTF8_METRICS ...)
            "ALLOW_ANONYMOUS_CLI", "AUTHENTICATION_BACKENDS",
            "AUTOCOMPRESS_GAPS_IN_DERIVATIVE_FUNCTIONS", "AUTO_REFRESH_INTERVAL",
            "DASHBOARD_REQUIRE_AUTHENTICATION", "DASHBOARD_REQUIRE_EDIT_GROUP",
            "DASHBOARD_REQUIRE_PERMISSIONS", "DATE_FORMAT", "DOCUMENTATION_URL",
            "DOCUMENTATION_VERSION", "EMAIL_BACKEND", "EMAIL_HOST", "EMAIL_HOST_PASSWORD",
            "EMAIL_HOST_USER", "EMAIL_PORT", "EMAIL_USE_TLS", "FLUSHRRDCACHED",
            "GRAPHITE_WEB_APP_SETTINGS_LOADED", "INPUT_VALIDATION_SOURCE_ID_HEADERS",
            "JAVASCRIPT_DEBUG", "LDAP_BASE_PASS", "LDAP_BASE_USER", "LDAP_PORT",
            "LDAP_SEARCH_BASE", "LDAP_SERVER", "LDAP_URI", "LDAP_USER_DN_TEMPLATE",
            "LDAP_USER_QUERY", "LDAP_USE_TLS", "LEGEND_MAX_ITEMS", "LOGIN_URL",
            "LOG_INFO_PERFORMANCE", "MEMCACHE_KEY_PREFIX", "MEMCACHE_OPTIONS", "MIDDLEWARE",
            "REMOTE_RENDERING", "REMOTE_RENDER_CONNECT_TIMEOUT", "REMOTE_USER_BACKEND",
            "REMOTE_USER_MIDDLEWARE", "RENDERING_HOSTS", "RENDER_TRIM_RECENT_IN_AGGREGATE",
            "RRD_CF", "SETTINGS_MODULE", "STATICFILES_DIRS", "STATIC_ROOT", "STATIC_URL",
            "STORE_FAIL_ON_ERROR", "TAGDB_REDIS_PASSWORD", "USE_LDAP_AUTH",
            "USE_REMOTE_USER_AUTHENTICATION", "USE_TZ", "UTF8_METRICS", "WEBAPP_DIR",
            "WEBAPP_VERSION", "WEB_DIR", "WHITELIST_FILE"}


class WebSettings(dict):
    """A dict of settings with attribute access (``settings.WHISPER_DIR``)."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None

    def __setattr__(self, name: str, value: Any) -> None:
        self[name] = value


def parse_host(host: str) -> tuple[str, int, str | None]:
    """A CARBONLINK_HOSTS entry ``"host:port[:instance]"`` (IPv6 as ``[addr]:port``) ->
    (server, port, instance). graphite-web's parseHost is carbon's parseDestination, so
    this is ours (``carbon.relay.destinations``): a cache is keyed on the hash ring
    exactly as the relay keys it (``"h:7002:"`` has instance ``''``, as in both)."""
    try:
        return parse_destination(host)
    except ValueError:
        raise ValueError("invalid host %r (want host:port[:instance], a port from 1 to "
                         "65535)" % host) from None


def make_settings(path: str | None = None, environ: Any = None,
                  **overrides: Any) -> WebSettings:
    """Defaults, then ``overrides``; derived paths and timeouts filled in, values checked.

    ``environ`` (default: none) supplies GRAPHITE_ROOT / GRAPHITE_STORAGE_DIR when the
    settings do not, as graphite-web and the carbon daemons read them.
    ``settings.ignored`` lists the graphite-web keys given that this app does not use.
    """
    settings = WebSettings({k: (list(v) if isinstance(v, list) else v)
                            for k, v in DEFAULTS.items()})
    ignored = []
    for key, value in overrides.items():
        if key in _IGNORED:
            ignored.append(key)
        elif key not in DEFAULTS:
            hint = difflib.get_close_matches(key, list(DEFAULTS), n=1, cutoff=0.7)
            if hint:
                raise ConfigError("unknown setting (did you mean %s?)" % hint[0], path, key=key)
        settings[key] = value
    settings.ignored = sorted(ignored)
    env = environ or {}
    if not settings.GRAPHITE_ROOT:
        settings.GRAPHITE_ROOT = env.get("GRAPHITE_ROOT") or "/opt/graphite"
    if not settings.STORAGE_DIR:
        settings.STORAGE_DIR = env.get("GRAPHITE_STORAGE_DIR") or os.path.join(
            settings.GRAPHITE_ROOT, "storage")
    _check(settings, path)
    return settings


def ignored_warning(settings: WebSettings) -> str | None:
    """The one warning line naming the accepted-but-unused settings, or None."""
    if not settings.get("ignored"):
        return None
    return ("settings accepted but not used by this render app (graphite-web features it "
            "does not have): %s" % ", ".join(settings.ignored))


def _check(settings: WebSettings, path: str | None) -> None:
    for key in _LIST_KEYS:
        value = settings[key]
        if isinstance(value, str):
            value = [v.strip() for v in value.split(",") if v.strip()]
        if not isinstance(value, (list, tuple)):
            raise ConfigError("must be a list, got %r" % (value,), path, key=key)
        settings[key] = list(value)
    for key in _NUMBER_KEYS:
        value = settings[key]
        if value is None and key in ("REMOTE_FIND_TIMEOUT", "REMOTE_FETCH_TIMEOUT",
                                     "FIND_TIMEOUT", "FETCH_TIMEOUT"):
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            try:
                settings[key] = float(value)
            except (TypeError, ValueError):
                raise ConfigError("must be a number, got %r" % (value,), path, key=key) from None
    for key in _BOOL_KEYS:
        settings[key] = bool(settings[key])
    for host in settings.CARBONLINK_HOSTS:
        try:
            parse_host(host)
        except ValueError as err:
            raise ConfigError(str(err), path, key="CARBONLINK_HOSTS") from None
    for network in settings.WRITE_ALLOWED_ADDRESSES:
        try:
            ipaddress.ip_network(str(network).strip(), strict=False)
        except ValueError as err:
            raise ConfigError(str(err), path, key="WRITE_ALLOWED_ADDRESSES") from None
    if settings.CARBONLINK_HASHING_TYPE not in ("carbon_ch", "fnv1a_ch", "mmh3_ch"):
        raise ConfigError("unknown hashing type %r" % settings.CARBONLINK_HASHING_TYPE,
                          path, key="CARBONLINK_HASHING_TYPE")
    if not settings.WHISPER_DIR:
        settings.WHISPER_DIR = os.path.join(settings.STORAGE_DIR, "whisper")
    settings.WHISPER_DIR = os.path.normpath(settings.WHISPER_DIR)
    if not settings.TAGDB_SQLITE_PATH:
        settings.TAGDB_SQLITE_PATH = os.path.join(settings.STORAGE_DIR, "graphite.db")
    settings.FIND_TIMEOUT = float(settings.FIND_TIMEOUT or settings.REMOTE_FIND_TIMEOUT or 3.0)
    settings.FETCH_TIMEOUT = float(settings.FETCH_TIMEOUT or settings.REMOTE_FETCH_TIMEOUT
                                   or 6.0)
    try:
        from zoneinfo import ZoneInfo
        ZoneInfo(settings.TIME_ZONE)
    except Exception:
        raise ConfigError("unknown time zone %r" % settings.TIME_ZONE, path,
                          key="TIME_ZONE") from None


def load_settings(path: str | None = None, environ: Any = None,
                  **overrides: Any) -> WebSettings:
    """Read a graphite-web style Python settings file (UPPERCASE assignments).

    ``overrides`` win over the file. A syntax or runtime error in the file is
    reported as a :class:`ConfigError` naming the file and line. ``environ`` defaults
    to ``os.environ`` (GRAPHITE_ROOT, GRAPHITE_STORAGE_DIR).
    """
    values: dict[str, Any] = {}
    if path:
        try:
            with open(path, encoding="utf-8") as f:
                source = f.read()
        except OSError as err:
            raise ConfigError("cannot read settings: %s" % err.strerror, path) from None
        namespace: dict[str, Any] = {"__file__": os.path.abspath(path),
                                     "__name__": "local_settings"}
        try:
            exec(compile(source, path, "exec"), namespace)  # noqa: S102 (operator's config)
        except SyntaxError as err:
            raise ConfigError("syntax error: %s" % err.msg, path, err.lineno) from None
        except Exception as err:
            line = _error_line(err, path)
            raise ConfigError("%s: %s" % (type(err).__name__, err), path, line) from None
        values = {k: v for k, v in namespace.items() if k.isupper() and not k.startswith("_")}
    values.update(overrides)
    return make_settings(path, os.environ if environ is None else environ, **values)


def _error_line(err: BaseException, path: str) -> int | None:
    tb = err.__traceback__
    line = None
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == path:
            line = tb.tb_lineno
        tb = tb.tb_next
    return line
