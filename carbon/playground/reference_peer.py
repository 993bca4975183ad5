"""The reference peers' venvs: carbon 1.1.10 and whisper 1.1.10, installed on first use.

The playground's ``reference`` subject runs these daemons; the benchmarks and interop
tests use the same venv (bench/common.py, which also builds graphite-web 1.1.10's with
``find_python`` and ``build_venv`` from here). The folder is ``ref-carbon-1.1.10`` under
``CARBON_BENCH_CACHE`` (default ``~/.cache/carbon-bench``).

carbon 1.1.10 does not install or run on Python 3.12+ (its setup.py calls
``ConfigParser.readfp``, its routers import ``imp``), so its venv is made with an older
interpreter, whatever Python runs this code: ``find_python`` is the one place that looks
for one. A venv is built in a temporary sibling folder and renamed into place only when
complete (``build_venv``), so a failed or interrupted build leaves nothing that a later
call would trust.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Callable, Iterator, Sequence

# carbon 1.1.10: newest first; 3.12 dropped ConfigParser.readfp and the imp module.
CARBON_PYTHONS = ((3, 11), (3, 10), (3, 9))
CARBON_REQS = ["setuptools", "wheel", "twisted", "whisper==1.1.10"]
COMPLETE = ".installed"  # written last, before the rename: a venv without it is not trusted


class PythonNotFound(RuntimeError):
    """No interpreter of the wanted versions; the message says what to install."""


def cache_dir() -> Path:
    """Where reference peers are installed (``CARBON_BENCH_CACHE``)."""
    return Path(os.environ.get("CARBON_BENCH_CACHE", Path.home() / ".cache" / "carbon-bench"))


def reference_venv_dir() -> Path:
    """The carbon 1.1.10 venv's folder (it may not exist yet)."""
    return cache_dir() / "ref-carbon-1.1.10"


def _version_text(version: tuple[int, int]) -> str:
    return "%d.%d" % version


def pyenv_roots() -> list[Path]:
    """pyenv's folders: ``$PYENV_ROOT``, then ``~/.pyenv``."""
    roots = [os.environ.get("PYENV_ROOT", ""), str(Path.home() / ".pyenv")]
    seen: list[Path] = []
    for root in filter(None, roots):
        path = Path(root)
        if path not in seen:
            seen.append(path)
    return seen


def _patch_key(path: Path) -> tuple[int, ...]:
    """3.9.18 sorts after 3.9.9 (pyenv version folders, numerically)."""
    parts = []
    for part in path.name.split("."):
        digits = "".join(ch for ch in part if ch.isdigit())
        parts.append(int(digits) if digits else -1)
    return tuple(parts)


def python_candidates(versions: Sequence[tuple[int, int]]) -> Iterator[str]:
    """Interpreters to try, best first: the running one (if its version is wanted), then
    ``pythonX.Y`` on PATH for each wanted version in order, then pyenv's installs of it
    (newest patch release first)."""
    running = tuple(sys.version_info[:2])
    if running in versions:
        yield getattr(sys, "_base_executable", "") or sys.executable
    for version in versions:
        found = shutil.which("python" + _version_text(version))
        if found:
            yield found
    for version in versions:
        text = _version_text(version)
        for root in pyenv_roots():
            folders = [p for p in (root / "versions").glob(text + ".*")
                       if p.name.split(".")[1] == text.split(".")[1]]
            for folder in sorted(folders, key=_patch_key, reverse=True):
                yield str(folder / "bin" / ("python" + text))


def probe_python(candidate: str, versions: Sequence[tuple[int, int]]) -> str | None:
    """The real interpreter behind ``candidate`` (a pyenv shim resolves to its target), if
    it runs, is one of ``versions`` and can make a venv with pip; else None."""
    code = ("import sys, venv, ensurepip; "
            "print('%d.%d' % sys.version_info[:2]); print(sys.executable)")
    try:
        done = subprocess.run([candidate, "-c", code], capture_output=True, text=True,
                              timeout=60, cwd="/")
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = done.stdout.split("\n")
    if done.returncode != 0 or len(lines) < 2:
        return None
    if lines[0] not in {_version_text(v) for v in versions}:
        return None
    return lines[1] or candidate


def find_python(versions: Sequence[tuple[int, int]], purpose: str) -> str:
    """An interpreter of one of ``versions`` (preference order) able to make venvs: the
    running one, else ``pythonX.Y`` on PATH, else pyenv's (``$PYENV_ROOT`` or ``~/.pyenv``).
    Raises PythonNotFound saying what to install."""
    tried: list[str] = []
    for candidate in python_candidates(versions):
        if candidate in tried:
            continue
        tried.append(candidate)
        found = probe_python(candidate, versions)
        if found:
            return found
    wanted = " or ".join(_version_text(v) for v in versions)
    newest = _version_text(versions[0])
    raise PythonNotFound(
        "%s needs Python %s, and none was found (running Python %s; tried: %s). Install "
        "one: on Debian 12 `apt-get install python%s-venv` where that version is packaged, "
        "elsewhere pyenv (`pyenv install %s`, found under $PYENV_ROOT or ~/.pyenv)."
        % (purpose, wanted, _version_text((sys.version_info[0], sys.version_info[1])),
           ", ".join(tried) or "no candidates", newest, newest))


def _retarget(folder: Path, old: str, new: str) -> None:
    """Scripts pip wrote under ``folder/bin`` name the build folder (shebangs, activate),
    and so does pyvenv.cfg's ``command``: point them at the final one."""
    old_bytes, new_bytes = old.encode(), new.encode()
    for path in [folder / "pyvenv.cfg", *(folder / "bin").iterdir()]:
        if path.is_symlink() or not path.is_file():
            continue
        data = path.read_bytes()
        if old_bytes in data:
            path.write_bytes(data.replace(old_bytes, new_bytes))


def venv_usable(venv: Path) -> bool:
    """Complete (built to the end) and its interpreter is still there."""
    return (venv / COMPLETE).exists() and os.path.exists(venv / "bin" / "python")


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _sweep_dead_builds(venv: Path) -> None:
    """Remove build folders of ``venv`` whose process is gone (a killed build)."""
    prefix = ".%s.building-" % venv.name
    for path in venv.parent.glob(prefix + "*"):
        pid = path.name[len(prefix):]
        if pid.isdigit() and not _pid_alive(int(pid)):
            shutil.rmtree(path, ignore_errors=True)


def build_venv(venv: Path, python: str, install: Callable[[Path], None],
               with_pip: bool = True) -> Path:
    """Make ``venv`` with ``python``, running ``install(python_of_the_new_venv)`` in it,
    in a temporary sibling folder renamed into place only when every step succeeded.
    A failure leaves no folder behind (and an old venv at ``venv`` untouched until then);
    if another process put a complete venv in place meanwhile, that one is kept."""
    venv.parent.mkdir(parents=True, exist_ok=True)
    _sweep_dead_builds(venv)
    building = venv.parent / (".%s.building-%d" % (venv.name, os.getpid()))
    shutil.rmtree(building, ignore_errors=True)
    try:
        command = [python, "-m", "venv", "--prompt", venv.name, str(building)]
        if not with_pip:
            command.insert(3, "--without-pip")
        subprocess.run(command, check=True)
        install(building / "bin" / "python")
        _retarget(building, str(building), str(venv))
        (building / COMPLETE).write_text("python %s\n" % python)
        if venv.exists() or venv.is_symlink():
            if venv_usable(venv):
                return venv  # another process finished first
            stale = venv.parent / (".%s.stale-%d" % (venv.name, os.getpid()))
            os.rename(venv, stale)
            shutil.rmtree(stale, ignore_errors=True)
        try:
            os.rename(building, venv)
        except OSError:
            if not venv_usable(venv):
                raise
        return venv
    finally:
        shutil.rmtree(building, ignore_errors=True)


def _adopt_legacy(venv: Path) -> bool:
    """A carbon venv made before the completion mark: kept (and marked) if its own
    Python imports carbon's routers and whisper, i.e. it is whole and on a Python carbon
    1.1.10 runs on."""
    python = venv / "bin" / "python"
    if not (venv / "bin" / "carbon-cache.py").exists() or not os.path.exists(python):
        return False
    done = subprocess.run([str(python), "-c", "import carbon.routers, whisper"],
                          capture_output=True, cwd="/")
    if done.returncode != 0:
        return False
    (venv / COMPLETE).write_text("adopted\n")
    return True


def reference_venv() -> Path:
    """A venv with carbon 1.1.10 and whisper 1.1.10 on a Python carbon 1.1.10 supports
    (made on first use; raises PythonNotFound saying what to install)."""
    venv = reference_venv_dir()
    if venv_usable(venv) or _adopt_legacy(venv):
        return venv
    python = find_python(CARBON_PYTHONS, "carbon 1.1.10")

    def install(venv_python: Path) -> None:
        pip = [str(venv_python), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
        subprocess.run(pip + CARBON_REQS, check=True)
        env = dict(os.environ, GRAPHITE_NO_PREFIX="True", USE_SETUPTOOLS="1")
        subprocess.run(pip + ["--no-build-isolation", "carbon==1.1.10"], check=True, env=env)

    return build_venv(venv, python, install)
