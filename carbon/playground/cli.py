"""``carbon-playground SCENARIO [--quick] [--out DIR]``: run a sweep, write the report."""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from carbon.playground.cgroup_io import io_throttle_status
from carbon.playground.reference_peer import PythonNotFound, reference_venv
from carbon.playground.report import write_report
from carbon.playground.runner import run_sweep
from carbon.playground.scenario import ScenarioError, load_scenario

REPORTS_DIR = "playground-reports"
REPORTS_ENV = "CARBON_PLAYGROUND_REPORTS"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="carbon-playground", description=__doc__)
    parser.add_argument("scenario", help="scenario file (TOML)")
    form = parser.add_mutually_exclusive_group()
    form.add_argument("--quick", action="store_true", help="the scenario's quick form")
    form.add_argument("--long", action="store_true",
                      help="the scenario's long form (the study as published, hours)")
    parser.add_argument("--out", help="report folder (default: %s/<name>-<time>, a folder "
                        "git ignores; or $%s/<name>-<time>)" % (REPORTS_DIR, REPORTS_ENV))
    parser.add_argument("--keep", action="store_true",
                        help="keep the daemons' folders (configs, logs, whisper files)")
    parser.add_argument("--check", action="store_true", help="check the scenario and exit")
    parser.add_argument("--set", action="append", default=[], metavar="TABLE.KEY=VALUE",
                        help="override a scenario value (TOML syntax), e.g. load.duration=60"
                        " or 'sweep.disk=[\"hdd\"]'")
    args = parser.parse_args(argv)
    try:
        scenario = load_scenario(args.scenario, quick=args.quick, overrides=args.set,
                                 long=args.long)
    except ScenarioError as exc:
        print("error: %s" % exc, file=sys.stderr)
        return 2
    usable, why = io_throttle_status(tempfile.gettempdir())
    throttle = ("usable (%s), not used: the disk profiles are emulated" % why if usable
                else "not available here: %s" % why)
    runs = scenario.runs()
    if args.check:
        print("%s: %d sweep points, %d runs (a point repeated to measure the noise)"
              % (args.scenario, len(scenario.points()), len(runs)))
        print("real disk throttle (cgroup v2 io.max): %s" % throttle)
        return 0
    name = scenario.settings.name or Path(args.scenario).stem
    out = Path(args.out) if args.out else default_out(name)
    reference = None
    if "reference" in scenario.settings.subjects:
        try:
            reference = reference_venv()
        except (PythonNotFound, subprocess.CalledProcessError, OSError) as exc:
            print("error: the reference subject (carbon 1.1.10) could not be installed: %s"
                  % exc, file=sys.stderr)
            return 2
    shutil.rmtree(out / "plots", ignore_errors=True)  # plots of an earlier run
    shutil.rmtree(out / "profiles", ignore_errors=True)
    workdir = Path(tempfile.mkdtemp(prefix="carbon-playground-"))
    rows: list[dict] = []
    meta = {"command": " ".join(["carbon-playground"] + (argv or sys.argv[1:])),
            "points_planned": len(runs), "status": "running",
            "real_throttle": throttle}
    stop = threading.Event()

    def on_row(row: dict) -> None:
        rows.append(row)
        write_report(out, scenario, rows, dict(meta, status="running: %d of %d points" % (
            len(rows), meta["points_planned"])))

    # Ctrl-C (also when started in the background, where SIGINT is inherited ignored)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    status = "complete"
    try:
        run_sweep(scenario, workdir, reference, on_row, stop)
    except KeyboardInterrupt:
        stop.set()
        status = "interrupted by Ctrl-C after %d of %d points" % (len(rows),
                                                                  meta["points_planned"])
    except (RuntimeError, OSError) as exc:  # a daemon that would not start, a full disk
        status = "stopped after %d of %d points: %s" % (len(rows), meta["points_planned"],
                                                         exc)
        print("error: %s" % exc, file=sys.stderr)
    finally:
        signal.signal(signal.SIGINT, previous)
        _copy_profiles(workdir, out)
        if args.keep:
            print("daemon folders kept in %s" % workdir, file=sys.stderr)
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    index = write_report(out, scenario, rows, dict(meta, status=status))
    if scenario.quick:
        print("smoke test (--quick): too short to tune from; the full form gives figures to "
              "act on")
    print("report: %s" % index)
    if status == "complete":
        return 0
    return 130 if status.startswith("interrupted") else 1


def default_out(name: str) -> Path:
    """Where a report goes without --out: under $CARBON_PLAYGROUND_REPORTS when set,
    otherwise under ./playground-reports, which .gitignore ignores wherever it is."""
    root = Path(os.environ.get(REPORTS_ENV) or REPORTS_DIR)
    return root / ("%s-%s" % (name, time.strftime("%Y%m%d-%H%M%S")))


def _copy_profiles(workdir: Path, out: Path) -> None:
    """py-spy flame graphs and cProfile summaries into the report's profiles/ folder."""
    import pstats

    found = list(workdir.glob("*/profile-*.svg")) + list(workdir.glob("*/*/cprofile.out"))
    if not found:
        return
    target = out / "profiles"
    target.mkdir(parents=True, exist_ok=True)
    for path in found:
        if path.suffix == ".svg":
            shutil.copy(path, target / ("%s-%s" % (path.parent.name, path.name)))
            continue
        name = "%s-%s.txt" % (path.parent.parent.name, path.parent.name)
        with open(target / name, "w") as handle:
            try:
                stats = pstats.Stats(str(path), stream=handle)
            except (ValueError, EOFError, TypeError):  # twistd's profiler writes text
                handle.write(path.read_text(errors="replace"))
                continue
            stats.sort_stats("tottime").print_stats(40)


if __name__ == "__main__":
    sys.exit(main())
