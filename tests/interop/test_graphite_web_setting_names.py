"""Every setting graphite-web 1.1.10 knows is accepted in the render app's settings file.

An operator upgrading to graphite-render keeps their local_settings.py (docs/upgrading.md).
The names graphite-web 1.1.10 itself defines (its settings.py, and the commented ones of
its local_settings.py.example) must not stop our app as a misspelling, and those it does
not use are named in its one start-up warning rather than silently dropped.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

from tests.interop.reference import web_venv
from tests.support import ROOT
from webapp.settings import DEFAULTS, load_settings

sys.path.insert(0, str(ROOT / "bench"))
from common import reference_package_dir  # noqa: E402


def graphite_web_names() -> set[str]:
    package = reference_package_dir("graphite", web_venv())
    tree = ast.parse((package / "settings.py").read_text())
    names = {target.id for node in tree.body if isinstance(node, ast.Assign)
             for target in node.targets
             if isinstance(target, ast.Name) and target.id.isupper()}
    example = (package / "local_settings.py.example").read_text()
    names |= set(re.findall(r"^#?\s*([A-Z][A-Z0-9_]+)\s*=", example, re.M))
    return names


def test_every_graphite_web_setting_is_accepted_and_named(tmp_path: Path) -> None:
    names = graphite_web_names()
    assert {"CARBONLINK_HOSTS", "REMOTE_RENDER_CONNECT_TIMEOUT", "USE_LDAP_AUTH"} <= names
    unused = sorted(names - set(DEFAULTS))
    path = tmp_path / "local_settings.py"
    path.write_text("".join("%s = None\n" % name for name in unused))
    settings = load_settings(str(path), environ={})
    assert sorted(set(unused) - set(settings.ignored)) == []
