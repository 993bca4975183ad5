"""The carbon daemons never import the render app."""

from __future__ import annotations

import ast

from tests.support import ROOT


def test_carbon_never_imports_webapp():
    offenders = []
    for path in sorted((ROOT / "carbon").rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                names = [node.value] if node.value.startswith("webapp.") else []
            offenders += ["%s:%d %s" % (path.relative_to(ROOT), node.lineno, n)
                          for n in names if n == "webapp" or n.startswith("webapp.")]
    assert offenders == []
