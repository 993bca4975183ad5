"""CHANGELOG.md keeps the Keep a Changelog shape: [Unreleased] first, then dated sections
newest first, each made of the standard change types; a commit a heading names is in the
history."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TYPES = {"Added", "Changed", "Deprecated", "Removed", "Fixed", "Security"}
DATED = re.compile(r"^## (\d{4}-\d{2}-\d{2}) · .+$")


def sections() -> list[tuple[str, list[str]]]:
    text = (ROOT / "CHANGELOG.md").read_text()
    out: list[tuple[str, list[str]]] = []
    for line in text.splitlines():
        if line.startswith("## "):
            out.append((line, []))
        elif out:
            out[-1][1].append(line)
    return out


def test_unreleased_first_then_dated_sections_newest_first() -> None:
    found = sections()
    assert found[0][0] == "## [Unreleased]"
    dates = []
    for heading, _body in found[1:]:
        match = DATED.match(heading)
        assert match, "not a dated section heading: %r" % heading
        dates.append(match.group(1))
    assert len(dates) >= 5
    assert dates == sorted(dates, reverse=True)
    assert dates[-1] == "2026-11-22"   # the first commit's day


def test_each_section_uses_the_standard_change_types() -> None:
    for heading, body in sections():
        types = [line[4:] for line in body if line.startswith("### ")]
        assert types, "%s has no change type" % heading
        assert set(types) <= TYPES, (heading, types)
        assert len(types) == len(set(types)), heading
        entries = [line for line in body if line.startswith("- ")]
        assert entries, heading
        assert not [line for line in body if len(line) > 100], heading


def test_named_commits_are_in_the_history() -> None:
    if not (ROOT / ".git").exists():
        return   # an exported tree: nothing to compare with
    for heading, _body in sections():
        for sha in re.findall(r"`([0-9a-f]{7,40})`", heading):
            probe = subprocess.run(["git", "merge-base", "--is-ancestor", sha, "HEAD"],
                                   cwd=ROOT, capture_output=True)
            assert probe.returncode == 0, "%s: %s is not in HEAD's history" % (heading, sha)
