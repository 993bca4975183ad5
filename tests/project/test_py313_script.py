"""tools/test-py313.sh's cache key and mirror (the chroot run itself is what tools/test.sh
does under CARBON_SYSTEM_TESTS=1), and tools/test.sh's summary lines."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support import ROOT

SCRIPT = ROOT / "tools" / "test-py313.sh"


def key_of(tools: Path) -> str:
    done = subprocess.run(["bash", str(tools / "test-py313.sh"), "--key"], capture_output=True,
                          text=True, check=True)
    return done.stdout.strip()


def test_the_tree_key_follows_the_package_lists(tmp_path: Path) -> None:
    """Another package in the script's list, or in tools/system-deps.sh (which runs in
    the tree), is another tree: the old one is not reused."""
    tools = tmp_path / "tools"
    tools.mkdir()
    for name in ("test-py313.sh", "system-deps.sh"):
        shutil.copy(ROOT / "tools" / name, tools / name)
    first = key_of(tools)
    assert len(first) == 16 and first == key_of(ROOT / "tools")
    deps = tools / "system-deps.sh"
    deps.write_text(deps.read_text().replace("need+=(npm)", "need+=(npm strace)"))
    second = key_of(tools)
    assert second != first
    script = tools / "test-py313.sh"
    script.write_text(script.read_text().replace("PACKAGES=(ca-certificates ",
                                                 "PACKAGES=(ca-certificates less "))
    assert key_of(tools) not in (first, second)


def test_the_mirror_is_the_one_apt_uses_here() -> None:
    sources = Path("/etc/apt/sources.list.d/debian.sources")
    if not sources.exists():
        pytest.skip("no deb822 debian.sources on this machine")
    wanted = None
    uri = None
    for line in sources.read_text().splitlines():
        if line.startswith("URIs:"):
            uri = line.split()[1]
        elif line.startswith("Suites:") and "security" not in line and uri:
            wanted = uri
            break
    done = subprocess.run(["bash", str(SCRIPT), "--mirror"], capture_output=True, text=True,
                          check=True)
    assert done.stdout.strip() == wanted


def test_summary_lines_name_both_pythons(tmp_path: Path) -> None:
    """The summary tools/test.sh prints: pytest's last line of each log."""
    text = (ROOT / "tools" / "test.sh").read_text()
    start = text.index("summary() {")
    function = text[start:text.index("\n}\n", start) + 3]
    log = tmp_path / "run.log"
    last = "1 failed, 1310 passed, 4 skipped, 2 warnings in 512.30s (0:08:32)"
    log.write_text("....F.\n[100%%]\nFAILED tests/x.py::t - assert 1\n%s\n" % last)
    done = subprocess.run(["bash", "-c", function + 'summary "$1"', "-", str(log)],
                          capture_output=True, text=True, check=True)
    assert done.stdout.strip() == last
    log.write_text("ImportError while loading conftest\n")
    done = subprocess.run(["bash", "-c", function + 'summary "$1"', "-", str(log)],
                          capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "no pytest summary"
