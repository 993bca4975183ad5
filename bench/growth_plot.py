"""Draw issue 17's "cost as the work grows" plots from docs/data/growth/*.json.

Each file is a JSON list of rows {"daemon", "impl", "names", "load", "throughput", "unit",
"cpu_s", "peak_rss_mb", "measured", "command"} (the benches append them). One PNG per
daemon, docs/img/growth-<daemon>.png: throughput (left) and peak RSS (right) against the
number of names, log x (log y for throughput), one line per implementation (ours solid,
references dashed, a floor dotted; a hollow marker is a rate measured over a run stopped
early). The load of each point is in its row (and in docs/performance.md's tables): a
bench may use a lighter load for its largest name counts. Missing or empty files are skipped; a row
without a number is left out, and so is one marked ``"plot": false`` (kept in the data,
e.g. measured under conditions a later row replaced). Rows with a ``"curve"`` name form
one line per implementation and curve, whatever their loads.

    python bench/growth_plot.py [--data docs/data/growth] [--out docs/img]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DAEMONS = ("relay", "cache", "render")


def read_rows(path: Path) -> list[dict]:
    """The usable rows of one growth file (none if it is missing or unreadable)."""
    try:
        rows = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        if path.exists():
            print("skipping %s: %s" % (path, exc), file=sys.stderr)
        return []
    if not isinstance(rows, list):
        return []
    usable = []
    for row in rows:
        try:
            failed = "FAILED" in str(row.get("load", ""))
            if row.get("plot", True) is False:
                continue
            if float(row["names"]) > 0 and float(row["throughput"]) >= 0 and not failed:
                usable.append(row)
        except (KeyError, TypeError, ValueError):
            continue
    return usable


def request_of(row: dict) -> str:
    """What a row measured, without its run details (the load's text up to its first ", ")."""
    return str(row.get("load", "")).split(", ")[0].strip()


def series(rows: list[dict]) -> dict[str, list[dict]]:
    """Rows grouped by implementation, each group sorted by names; for a repeated name
    count the latest measurement wins. Where an implementation measured the same request
    at several name counts and more than one request (the render app's sumSeries,
    groupByNode and raw rows), each request is a line of its own; loads named per size (the
    relay's "4M lines over 1M names") stay one line."""
    counts: dict[str, dict[str, set[float]]] = {}
    for row in rows:
        if row.get("curve"):
            continue
        by_request = counts.setdefault(str(row["impl"]), {})
        by_request.setdefault(request_of(row), set()).add(float(row["names"]))
    split = {impl for impl, by_request in counts.items()
             if len(by_request) > 1 and any(len(n) > 1 for n in by_request.values())}
    groups: dict[str, dict[float, dict]] = {}
    for row in rows:
        key = str(row["impl"])
        if row.get("curve"):
            key = "%s: %s" % (key, row["curve"])
        elif key in split:
            key = "%s: %s" % (key, request_of(row))
        by_names = groups.setdefault(key, {})
        names = float(row["names"])
        if names not in by_names or str(row.get("measured", "")) >= str(
                by_names[names].get("measured", "")):
            by_names[names] = row
    return {key: [by_names[n] for n in sorted(by_names)] for key, by_names in groups.items()}


def draw(daemon: str, rows: list[dict], out: Path) -> Path:
    """One PNG for ``daemon``: throughput and peak RSS against names."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = series(rows)
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.8))
    units = sorted({str(row.get("unit", "")) for row in rows})
    for impl, points in sorted(groups.items(), key=lambda item: not item[0].startswith("ours")):
        style = "-" if impl.startswith("ours") else ":" if "floor" in impl else "--"
        names = [float(row["names"]) for row in points]
        line = left.plot(names, [float(row["throughput"]) for row in points], style,
                         marker="o", label=impl)[0]
        early = [row for row in points if "stopped early" in str(row.get("load", ""))]
        if early:  # a rate so far: hollow
            left.plot([float(row["names"]) for row in early],
                      [float(row["throughput"]) for row in early], "o", markersize=9,
                      markerfacecolor="white", color=line.get_color())
        memory = [(float(row["names"]), float(row["peak_rss_mb"])) for row in points
                  if row.get("peak_rss_mb") is not None]
        if memory:
            right.plot(*zip(*memory, strict=True), style, marker="o", label=impl,
                       color=line.get_color())
    left.set_title("%s: throughput" % daemon)
    left.set_ylabel(" / ".join(units) or "throughput")
    right.set_title("%s: peak RSS" % daemon)
    right.set_ylabel("MB")
    left.set_yscale("log")  # rates span orders of magnitude between daemons and loads
    right.set_ylim(bottom=0)
    for axis in (left, right):
        axis.set_xscale("log")
        axis.set_xlabel("names")
        axis.grid(True, which="both", alpha=0.3)
    left.legend(fontsize="small")
    fig.tight_layout()
    out.mkdir(parents=True, exist_ok=True)
    target = out / ("growth-%s.png" % daemon)
    fig.savefig(target, dpi=100)
    plt.close(fig)
    return target


def main(argv: list[str] | None = None) -> list[Path]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=ROOT / "docs" / "data" / "growth")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "img")
    args = parser.parse_args(argv)
    drawn = []
    for daemon in DAEMONS:
        rows = [row for row in read_rows(args.data / ("%s.json" % daemon))
                if row.get("daemon", daemon) == daemon]
        if not rows:
            print("%s: no rows, no plot" % daemon)
            continue
        drawn.append(draw(daemon, rows, args.out))
        print("%s: %d rows -> %s" % (daemon, len(rows), drawn[-1]))
    return drawn


if __name__ == "__main__":
    main()
