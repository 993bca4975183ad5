"""The layering docs/architecture.md states, read from the doc and checked on every import.

The doc's "Layers" section is a numbered list, lowest layer first; each item names its
modules and packages in backquotes. A module belongs to the layer of the most specific
name that covers it (``webapp.render.evaluator`` before ``webapp.render``), and may import
only from its own layer and the ones before it. Every import counts, also one inside a
function. Besides, nothing under carbon/ names webapp, not even as a string.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import NamedTuple

import pytest

from tests.support import ROOT

PACKAGES = ("carbon", "webapp")


class Layer(NamedTuple):
    number: int
    name: str
    modules: tuple[str, ...]


def read_layers(doc: Path) -> list[Layer]:
    """The numbered list under the doc's "## Layers" heading."""
    text = doc.read_text()
    match = re.search(r"^## Layers\n(.*?)(?=^## )", text, re.S | re.M)
    assert match, "%s has no '## Layers' section" % doc
    layers: list[Layer] = []
    for item in re.split(r"^(?=\d+\. )", match.group(1), flags=re.M):
        head = re.match(r"(\d+)\. \*\*([^*]+)\*\*", item)
        if head is None:
            continue
        names = tuple(re.findall(r"`([A-Za-z_][\w.]*)`", item))
        layers.append(Layer(int(head.group(1)), head.group(2), names))
    assert [layer.number for layer in layers] == list(range(1, len(layers) + 1)), \
        "the layers in %s are not numbered 1, 2, 3, ..." % doc
    return layers


def module_names(root: Path) -> dict[str, Path]:
    """Dotted name -> file of every module under the packages."""
    found: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(parts)] = path
    return found


def layer_of(module: str, layers: list[Layer]) -> Layer | None:
    """The layer whose most specific name covers ``module``."""
    best: tuple[int, Layer] | None = None
    for layer in layers:
        for name in layer.modules:
            if module == name or module.startswith(name + "."):
                if best is None or len(name) > best[0]:
                    best = (len(name), layer)
    return best[1] if best else None


def imports(path: Path, modules: dict[str, Path]) -> list[tuple[int, str]]:
    """(line, module of ours) for every import in ``path``; ``from a import b`` counts
    as a.b where b is a module."""
    tree = ast.parse(path.read_text(), str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = ["%s.%s" % (node.module, alias.name) if "%s.%s" % (node.module, alias.name)
                     in modules else node.module for alias in node.names]
        else:
            continue
        for name in names:
            while name and name not in modules:
                name = name.rpartition(".")[0]
            if name:
                found.append((node.lineno, name))
    return found


def violations(root: Path, doc: Path) -> list[str]:
    """One line per import that goes up (or names a module no layer covers)."""
    layers = read_layers(doc)
    modules = module_names(root)
    out = []
    for module, path in modules.items():
        here = layer_of(module, layers)
        where = path.relative_to(root)
        if here is None:
            out.append("%s: module %s is in no layer of %s" % (where, module, doc.name))
            continue
        for line, target in imports(path, modules):
            there = layer_of(target, layers)
            if there is not None and there.number > here.number:
                out.append("%s:%d imports %s (layer %d, %s) from layer %d (%s): a layer "
                           "imports only its own and lower layers (%s)"
                           % (where, line, target, there.number, there.name, here.number,
                              here.name, doc.name))
    return sorted(set(out))


def carbon_names_webapp(root: Path) -> list[str]:
    """Imports of webapp, or strings naming a webapp module, under carbon/."""
    offenders = []
    for path in sorted((root / "carbon").rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                names = [node.value] if node.value.startswith("webapp.") else []
            offenders += ["%s:%d %s: carbon never imports webapp"
                          % (path.relative_to(root), node.lineno, n)
                          for n in names if n == "webapp" or n.startswith("webapp.")]
    return offenders


def test_every_import_follows_the_documented_layers() -> None:
    assert violations(ROOT, ROOT / "docs" / "architecture.md") == []


def test_carbon_never_imports_webapp() -> None:
    assert carbon_names_webapp(ROOT) == []


def test_the_doc_lists_the_layers_in_order() -> None:
    layers = read_layers(ROOT / "docs" / "architecture.md")
    assert len(layers) >= 6
    first_webapp = min(layer.number for layer in layers
                       if any(name.startswith("webapp") for name in layer.modules))
    assert all(not name.startswith("webapp") for layer in layers[:first_webapp - 1]
               for name in layer.modules)  # the render app is above every carbon layer
    assert all(not name.startswith("carbon") for layer in layers[first_webapp - 1:]
               for name in layer.modules)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A small tree with the two packages and a doc of three layers."""
    files = {
        "carbon/__init__.py": "",
        "carbon/base.py": "import os\n",
        "carbon/sink.py": "from carbon import base\n",
        "carbon/daemon/__init__.py": "",
        "carbon/daemon/run.py": "from carbon.sink import x\nimport carbon.base\n",
        "webapp/__init__.py": "",
        "webapp/view.py": "from carbon.daemon import run\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "architecture.md").write_text(
        "# A\n\n## Layers\n\nLowest first.\n\n"
        "1. **base**: `carbon`, `carbon.base`\n"
        "2. **stages**: `carbon.sink`,\n   `carbon.daemon`\n"
        "3. **render app**: `webapp`\n\n## Next\n")
    return tmp_path


def test_the_check_passes_a_tree_that_follows_its_layers(tree: Path) -> None:
    assert violations(tree, tree / "docs" / "architecture.md") == []
    assert carbon_names_webapp(tree) == []


def test_an_upward_import_fails_naming_file_line_and_rule(tree: Path) -> None:
    (tree / "carbon" / "base.py").write_text(
        "import os\n\n\ndef later():\n    from carbon.daemon.run import main\n")
    assert violations(tree, tree / "docs" / "architecture.md") == [
        "carbon/base.py:5 imports carbon.daemon.run (layer 2, stages) from layer 1 (base): "
        "a layer imports only its own and lower layers (architecture.md)"]


def test_a_module_in_no_layer_and_carbon_naming_webapp_fail(tree: Path) -> None:
    doc = tree / "docs" / "architecture.md"
    doc.write_text(doc.read_text().replace("`carbon`, ", ""))
    (tree / "carbon" / "base.py").write_text("PLUGINS = ('webapp.view',)\n")
    assert violations(tree, doc) == [
        "carbon/__init__.py: module carbon is in no layer of architecture.md"]
    assert carbon_names_webapp(tree) == [
        "carbon/base.py:1 webapp.view: carbon never imports webapp"]
