"""mypy (run by tools/test.sh after ruff) holds code to the declared contracts: a stage,
sink or storage backend that does not meet its protocol fails the check."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib

from tests.support import ROOT

GOOD = '''
from carbon.pipeline import Batch, LineBatch, Pipeline, Processor, Sink
from carbon.storage.backend import Capabilities, StorageBackend


class Upper(Processor):
    handles_lines = True

    def process(self, batch: Batch) -> Batch:
        return [(metric.upper(), stamp, value) for metric, stamp, value in batch]

    def process_lines(self, batch: LineBatch) -> Batch | LineBatch:
        return self.process(batch.points())


class Keep(Sink):
    def put_many(self, batch: Batch) -> None:
        pass


class Memory(StorageBackend):
    capabilities = Capabilities(writes_on_create=False)

    def exists(self, metric: str) -> bool:
        return False


Pipeline([Upper()], Keep()).process([("a", 1.0, 2.0)])
'''

BAD = '''
from carbon.pipeline import Batch, Pipeline, Processor
from carbon.storage.backend import Capabilities, StorageBackend


class Count(Processor):
    def process(self, batch: Batch) -> int:  # line 7: not a batch
        return len(batch)


class NoSink:
    def put(self, batch: Batch) -> None:
        pass


class Memory(StorageBackend):
    capabilities = Capabilities(writes_on_create="yes")  # line 17: not a flag

    def exists(self, metric: str) -> str:  # line 19: not a bool
        return metric


Pipeline([Count()], NoSink())  # line 23: no put_many
'''


def _mypy(tmp_path, **files: str) -> subprocess.CompletedProcess[str]:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    env = dict(os.environ, MYPYPATH=str(ROOT))
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"),
         "--strict", "--follow-imports=silent", "--cache-dir", str(tmp_path / "cache"),
         "--no-error-summary", *files],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240)


def test_mypy_fails_on_a_broken_contract_and_passes_a_kept_one(tmp_path):
    run = _mypy(tmp_path, **{"good_use.py": GOOD, "bad_use.py": BAD})
    errors = [line for line in run.stdout.splitlines() if ": error:" in line]
    assert run.returncode == 1, run.stdout + run.stderr
    assert not [line for line in errors if line.startswith("good_use.py")], run.stdout
    found = {(int(line.split(":")[1]), line.rsplit("[", 1)[-1].rstrip("]"))
             for line in errors}
    assert found == {(7, "override"), (17, "arg-type"), (19, "override"), (23, "arg-type")}, \
        run.stdout
    assert 'in supertype "carbon.pipeline.Processor"' in run.stdout
    assert 'in supertype "carbon.storage.backend.StorageBackend"' in run.stdout
    assert '"NoSink"' in run.stdout and '"Sink"' in run.stdout


def test_the_contract_modules_are_checked_strictly():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    strict = [override for override in config["overrides"]
              if override.get("disallow_untyped_defs")]
    assert len(strict) == 1 and strict[0]["disallow_any_generics"]
    modules = set(strict[0]["module"])
    assert {"carbon.pipeline", "carbon.plugins", "carbon.storage.backend",
            "carbon.storage.whisper_backend", "carbon.writer.writer", "carbon.writer.creator",
            "carbon.writer.ratelimit"} <= modules
    relaxed = {module for override in config["overrides"]
               if "disable_error_code" in override for module in override["module"]}
    assert not modules & relaxed
    assert "ignore_errors" not in str(config)  # relaxations are by error code, listed
