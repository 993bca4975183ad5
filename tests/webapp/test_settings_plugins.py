"""FUNCTION_PLUGINS adds render functions; settings accepted but unused are named once."""

from __future__ import annotations

import json
import logging
from typing import Any, Callable, Iterator

import pytest

from carbon.config.errors import ConfigError
from tests.webapp.helpers import call
from webapp.app import make_app
from webapp.functions.registry import PIE_FUNCTIONS
from webapp.plugins import RENDER_FUNCTIONS
from webapp.settings import WebSettings, load_settings

PLUGIN = '''
from webapp.functions.registry import Param


def toUpperCase(requestContext, seriesList):
    """Series names in upper case (graphite-web's plugin example)."""
    for series in seriesList:
        series.name = series.name.upper()
    return seriesList


toUpperCase.group = "Custom"


def times(requestContext, seriesList, factor):
    """Each value times an integer factor; the schema makes the factor checked."""
    for series in seriesList:
        series.name = "times(%s,%d)" % (series.name, factor)
        for i, value in enumerate(series):
            if value is not None:
                series[i] = value * factor
    return seriesList


times.params = [Param("seriesList", "seriesList", required=True),
                Param("factor", "integer", required=True)]


def pieFirst(requestContext, series):
    return series[0]


SeriesFunctions = {"pluginUpper": toUpperCase, "pluginTimes": times}
PieFunctions = {"pluginFirst": pieFirst}
'''


@pytest.fixture
def plugin_module(tmp_path: Any, monkeypatch: Any) -> Iterator[str]:
    (tmp_path / "my_render_plugin.py").write_text(PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "my_render_plugin"
    for name in ("pluginUpper", "pluginTimes"):
        RENDER_FUNCTIONS.discard(name)
    PIE_FUNCTIONS.discard("pluginFirst")


def render(app: Any, target: str) -> tuple[int, Any]:
    status, _headers, body = call(app, "/render", {"target": target, "format": "json",
                                                   "from": "-1h"})
    return status, (json.loads(body) if status == 200 else body.decode())


def test_function_plugins_add_render_functions(
        plugin_module: str, whisper_tree: str,
        make_web_settings: Callable[..., WebSettings]) -> None:
    app = make_app(make_web_settings(WHISPER_DIR=whisper_tree, FUNCTION_PLUGINS=[plugin_module],
                                     ENFORCE_INPUT_VALIDATION=True))
    try:
        status, series = render(app, "pluginUpper(servers.web1.cpu)")
        assert status == 200 and [s["target"] for s in series] == ["SERVERS.WEB1.CPU"]
        _, plain = render(app, "servers.web1.cpu")
        status, doubled = render(app, "pluginTimes(servers.web1.cpu,2)")
        assert status == 200 and doubled[0]["target"] == "times(servers.web1.cpu,2)"
        assert [v * 2 if v is not None else None for v, _t in plain[0]["datapoints"]] == \
            [v for v, _t in doubled[0]["datapoints"]]
        status, error = render(app, "pluginTimes(servers.web1.cpu,'x')")
        assert status == 400 and "factor" in error
        assert RENDER_FUNCTIONS.get("pluginUpper").group == "Custom"
        assert "pluginFirst" in PIE_FUNCTIONS
    finally:
        app.close()


def test_function_plugin_that_cannot_be_imported_stops_start_up(
        make_web_settings: Callable[..., WebSettings]) -> None:
    with pytest.raises(ConfigError) as err:
        make_app(make_web_settings(FUNCTION_PLUGINS=["no_such_plugin_module"]))
    assert "FUNCTION_PLUGINS" in str(err.value) and "no_such_plugin_module" in str(err.value)


def test_unused_graphite_web_settings_are_named_in_one_warning(tmp_path: Any,
                                                              caplog: Any) -> None:
    path = tmp_path / "local_settings.py"
    path.write_text("STORAGE_DIR = %r\nCARBONLINK_HOSTS = []\nSECRET_KEY = 'x'\n"
                    "STORAGE_FINDERS = ['graphite.finders.standard.StandardFinder']\n"
                    "TAGDB_REDIS_HOST = 'localhost'\nREMOTE_STORE_MERGE_RESULTS = True\n"
                    % str(tmp_path))
    settings = load_settings(str(path), environ={})
    assert settings.ignored == ["REMOTE_STORE_MERGE_RESULTS", "SECRET_KEY", "STORAGE_FINDERS",
                                "TAGDB_REDIS_HOST"]
    with caplog.at_level(logging.WARNING, logger="webapp"):
        app = make_app(settings)
        app.close()
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert all(key in warnings[0] for key in settings.ignored)


def test_graphite_root_and_storage_dir_from_the_environment(tmp_path: Any) -> None:
    path = tmp_path / "local_settings.py"
    path.write_text("CARBONLINK_HOSTS = []\n")
    settings = load_settings(str(path), environ={"GRAPHITE_ROOT": str(tmp_path)})
    assert settings.WHISPER_DIR == str(tmp_path / "storage" / "whisper")
    settings = load_settings(str(path), environ={"GRAPHITE_ROOT": str(tmp_path),
                                                 "GRAPHITE_STORAGE_DIR": str(tmp_path / "s")})
    assert settings.WHISPER_DIR == str(tmp_path / "s" / "whisper")
    assert load_settings(str(path), environ={}).STORAGE_DIR == "/opt/graphite/storage"
