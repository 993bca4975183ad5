"""tools/relay_check.py: carbon-c-relay -t style routing check."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

from carbon.relay.routing_dry_run import main

ROOT = Path(__file__).parents[2]
VECTORS = json.loads((ROOT / "tests" / "data" / "hashing-vectors.json").read_text())


def test_short_output_matches_reference_vectors():
    case = VECTORS["cases"][4]
    names = [n for n in case["routes"] if n and n.split()[0] == n]  # one token a line
    out = io.StringIO()
    status = main(["--destinations", ",".join(case["destinations"]),
                   "--method", case["router"], "--hash-type", case["hash_type"],
                   "--replication", str(case["replication_factor"]), "--short"],
                  stdin=io.StringIO("\n".join(names) + "\n\n# comment\n"), stdout=out)
    assert status == 0
    lines = out.getvalue().splitlines()
    assert len(lines) == len(names)
    for line in lines:
        name, dests = line.split("\t")
        assert dests.split(",") == case["routes"][name]


def test_config_and_rules_through_the_script(tmp_path):
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "carbon.conf").write_text(
        "[relay]\nRELAY_METHOD = rules\n"
        "DESTINATIONS = 127.0.0.1:2004:a, 127.0.0.1:2104:b\n"
        "[relay:b]\nDESTINATIONS = 127.0.0.1:2004:a\n")
    (conf / "relay-rules.conf").write_text(
        "[web]\npattern = ^web\\.\ndestinations = 127.0.0.1:2104:b\ncontinue = true\n"
        "[default]\ndefault = true\ndestinations = 127.0.0.1:2004:a\n")
    script = [sys.executable, str(ROOT / "tools" / "relay_check.py"),
              "--config", str(conf / "carbon.conf")]
    env = {"GRAPHITE_ROOT": str(tmp_path), "PATH": "/usr/bin:/bin"}
    result = subprocess.run(script, input="web.host1.cpu 1 1700000000\ndb.load\n",
                            capture_output=True, text=True, env=env, timeout=30)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "# rules (2 rules) -> 127.0.0.1:2004:a, 127.0.0.1:2104:b",
        "web.host1.cpu",
        "    match [web] pattern ^web\\. (continue)",
        "    match [default] default",
        "    -> 127.0.0.1:2104:b",
        "    -> 127.0.0.1:2004:a",
        "db.load",
        "    match [default] default",
        "    -> 127.0.0.1:2004:a",
    ]
    # Instance b has only destination a: rule web's destination is reported skipped.
    result = subprocess.run(script + ["--instance", "b"], input="web.x\n", capture_output=True,
                            text=True, env=env, timeout=30)
    assert "127.0.0.1:2104:b (not in DESTINATIONS: skipped)" in result.stdout
    assert result.stdout.rstrip().endswith("-> 127.0.0.1:2004:a")


def test_errors_are_reported_without_traceback(tmp_path):
    err = io.StringIO()
    sys_stderr, sys.stderr = sys.stderr, err
    try:
        status = main(["--destinations", "127.0.0.1:2004", "--rules",
                       str(tmp_path / "missing.conf")], stdin=io.StringIO(""),
                      stdout=io.StringIO())
        assert status == 2 and "missing.conf" in err.getvalue()
        assert main(["--method", "consistent-hashing"], stdin=io.StringIO(""),
                    stdout=io.StringIO()) == 2
        assert "no DESTINATIONS" in err.getvalue()
    finally:
        sys.stderr = sys_stderr
