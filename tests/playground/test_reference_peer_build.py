"""The reference peers' interpreter finder and atomic venv build (carbon/playground/
reference_peer.py): real interpreters, real venvs, a real killed build."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from carbon.playground import reference_peer
from carbon.playground.reference_peer import (CARBON_PYTHONS, COMPLETE, PythonNotFound,
                                              build_venv, find_python, python_candidates)

RUNNING = tuple(sys.version_info[:2])
BASE_PYTHON = getattr(sys, "_base_executable", "") or sys.executable


def version_of(python: str) -> tuple[int, int]:
    out = subprocess.run([python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                         capture_output=True, text=True, check=True).stdout
    major, minor = out.split(".")
    return int(major), int(minor)


@pytest.fixture
def bare_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty PATH folder, an empty pyenv root and HOME: nothing to find but what a
    test puts there."""
    path_dir = tmp_path / "path"
    path_dir.mkdir()
    monkeypatch.setenv("PATH", str(path_dir))
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path / "pyenv"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    return path_dir


def test_the_running_python_is_preferred_when_its_version_is_wanted() -> None:
    found = find_python([(3, 8), RUNNING], "test")
    assert version_of(found) == RUNNING


def test_pyenv_versions_are_tried_newest_patch_first(tmp_path: Path, bare_env: Path) -> None:
    root = tmp_path / "pyenv" / "versions"
    for name in ("3.8.9", "3.8.18", "3.8.2", "3.80.1", "3.9.1"):
        (root / name / "bin").mkdir(parents=True)
    got = list(python_candidates([(3, 8)]))
    assert got == [str(root / name / "bin" / "python3.8") for name in ("3.8.18", "3.8.9", "3.8.2")]


def test_an_interpreter_of_the_wrong_version_is_not_trusted(bare_env: Path) -> None:
    """A ``python3.8`` on PATH that is really another version is probed and refused."""
    wanted = (3, 8) if RUNNING != (3, 8) else (3, 7)
    impostor = bare_env / ("python%d.%d" % wanted)
    impostor.symlink_to(BASE_PYTHON)
    assert str(impostor) in list(python_candidates([wanted]))
    with pytest.raises(PythonNotFound) as caught:
        find_python([wanted], "the test peer")
    message = str(caught.value)
    assert "the test peer needs Python %d.%d" % wanted in message
    assert str(impostor) in message  # what was tried
    assert "pyenv install %d.%d" % wanted in message and "apt-get install" in message


def test_a_wanted_version_on_path_is_found_and_resolved(bare_env: Path) -> None:
    """``pythonX.Y`` on PATH (here a link to the running interpreter): the real
    executable behind it is returned (a pyenv shim resolves to its target)."""
    link = bare_env / ("python%d.%d" % RUNNING)
    link.symlink_to(BASE_PYTHON)
    found = find_python([(2, 7), RUNNING], "test")
    assert version_of(found) == RUNNING


def test_carbon_gets_a_python_it_runs_on() -> None:
    """On any machine that can run the reference tests: carbon 1.1.10's interpreter is
    older than 3.12 (its setup.py calls ConfigParser.readfp, its routers import imp),
    whatever Python runs this test (3.13 in the Debian 13 pass)."""
    try:
        found = find_python(CARBON_PYTHONS, "carbon 1.1.10")
    except PythonNotFound as exc:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            raise
        pytest.skip(str(exc))
    assert (3, 9) <= version_of(found) < (3, 12)
    code = "import imp, configparser; configparser.ConfigParser.readfp"
    done = subprocess.run([found, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def script_installer(body: str):
    """An install step writing ``bin/probe`` with the new venv's interpreter in its
    shebang, as pip writes console scripts."""
    def install(python: Path) -> None:
        probe = python.parent / "probe"
        probe.write_text("#!%s\n%s" % (python, textwrap.dedent(body)))
        probe.chmod(0o755)
    return install


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


def test_a_venv_is_renamed_into_place_complete_with_its_scripts_pointing_at_it(
        tmp_path: Path) -> None:
    target = tmp_path / "peer"
    build_venv(target, BASE_PYTHON, script_installer("import sys; print(sys.prefix)\n"),
               with_pip=False)
    assert (target / COMPLETE).exists()
    assert leftovers(tmp_path) == []
    out = subprocess.run([str(target / "bin" / "probe")], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert Path(out) == target
    assert ".building" not in (target / "pyvenv.cfg").read_text()
    assert ".building" not in (target / "bin" / "activate").read_text()


def test_a_failed_build_leaves_nothing_and_the_old_venv_untouched(tmp_path: Path) -> None:
    target = tmp_path / "peer"

    def broken(python: Path) -> None:
        subprocess.run([str(python), "-c", "raise SystemExit(3)"], check=True)

    with pytest.raises(subprocess.CalledProcessError):
        build_venv(target, BASE_PYTHON, broken, with_pip=False)
    assert not target.exists() and leftovers(tmp_path) == []
    build_venv(target, BASE_PYTHON, script_installer("print('one')\n"), with_pip=False)
    with pytest.raises(subprocess.CalledProcessError):
        build_venv(target, BASE_PYTHON, broken, with_pip=False)
    out = subprocess.run([str(target / "bin" / "probe")], capture_output=True, text=True)
    assert out.stdout == "one\n" and leftovers(tmp_path) == []


def test_a_half_made_folder_is_replaced_not_trusted(tmp_path: Path) -> None:
    """What an older build left in place without its completion mark is rebuilt."""
    target = tmp_path / "peer"
    (target / "bin").mkdir(parents=True)
    (target / "bin" / "carbon-cache.py").write_text("half made\n")
    assert not reference_peer.venv_usable(target)
    build_venv(target, BASE_PYTHON, script_installer("print('whole')\n"), with_pip=False)
    assert reference_peer.venv_usable(target)
    assert not (target / "bin" / "carbon-cache.py").exists()


def test_a_killed_build_is_not_trusted_and_its_folder_is_swept(tmp_path: Path) -> None:
    """kill -9 in the middle of the install step: the venv is not there, so the next
    call builds it (and removes the dead build's folder)."""
    target = tmp_path / "peer"
    started = tmp_path / "started"
    code = textwrap.dedent("""
        import sys, time
        from pathlib import Path
        from carbon.playground.reference_peer import build_venv
        def install(python):
            Path(sys.argv[2]).write_text("x")
            time.sleep(60)
        build_venv(Path(sys.argv[1]), sys.argv[3], install, with_pip=False)
    """)
    child = subprocess.Popen([sys.executable, "-c", code, str(target), str(started), BASE_PYTHON],
                             cwd=str(Path(reference_peer.__file__).parents[2]))
    try:
        deadline = time.monotonic() + 60
        while not started.exists():
            assert child.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.wait(30)
    assert not target.exists()
    assert any(".building-%d" % child.pid in name for name in leftovers(tmp_path))
    build_venv(target, BASE_PYTHON, script_installer("print('ok')\n"), with_pip=False)
    assert reference_peer.venv_usable(target)
    assert leftovers(tmp_path) == []


def test_playground_names_what_to_install_when_no_python_fits(
        tmp_path: Path, bare_env: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    """The shipped playground's reference subject without a usable interpreter: exit 2
    and a message saying what to install, no traceback, nothing left in the cache."""
    from carbon.playground.cli import main
    monkeypatch.setattr(reference_peer, "CARBON_PYTHONS", ((2, 1),))
    monkeypatch.setenv("CARBON_BENCH_CACHE", str(tmp_path / "cache"))
    scenario = tmp_path / "s.toml"
    scenario.write_text('[scenario]\nname = "x"\nsubjects = ["ours", "reference"]\n'
                        '[load]\nmetrics = 10\nrate = 10\nduration = 1\n'
                        '[sweep]\ndisk = ["none"]\n')
    assert main([str(scenario), "--out", str(tmp_path / "report")]) == 2
    err = capsys.readouterr().err
    assert "carbon 1.1.10 needs Python 2.1" in err and "pyenv install 2.1" in err
    assert not (tmp_path / "cache" / "ref-carbon-1.1.10").exists()
