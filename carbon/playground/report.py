"""The report folder: results.json, results.md, index.html (opens from disk) and plots."""

from __future__ import annotations

import html
import json
import math
import os
import platform
import time
from pathlib import Path
from typing import Any

from carbon.playground.scenario import REPEAT, Scenario

COLUMNS = [
    ("label", "sweep point", "%s"),
    ("cpu_percent", "CPU %", "%.0f"),
    ("committed_per_s", "committed/s", "%.0f"),
    ("update_ops_per_s", "update ops/s", "%.0f"),
    ("points_per_update", "points/update", "%.1f"),
    ("peak_cache_size", "peak cache", "%.0f"),
    ("final_cache_size", "final cache", "%.0f"),
    ("peak_rss_mb", "peak RSS MB", "%.0f"),
    ("bytes_written", "bytes written", "%s"),
    ("sent", "sent", "%d"),
    ("points_lost", "points lost", "%d"),
    ("cache_overflow", "dropped (cache full)", "%d"),
    ("time_to_disk", "all on disk after s", "%.1f"),
]


def _cell(row: dict, key: str, fmt: str) -> str:
    value = row.get(key)
    if value is None:
        return "never" if key == "time_to_disk" else "-"
    if key == "bytes_written":
        return _size(value)
    return fmt % value


def _size(value: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(value) < 1024 or unit == "GiB":
            return ("%.0f %s" if unit == "B" else "%.1f %s") % (value, unit)
        value /= 1024.0
    return str(value)


def within_bounds(row: dict, scenario: Scenario) -> list[str]:
    """Why a row is outside the scenario's bounds (empty: inside)."""
    bounds, why = scenario.bounds, []
    if bounds.cpu_percent and row["cpu_percent"] > bounds.cpu_percent:
        why.append("CPU %.0f%% > %.0f%%" % (row["cpu_percent"], bounds.cpu_percent))
    if bounds.rss_mb and row["peak_rss_mb"] > bounds.rss_mb:
        why.append("RSS %.0f MB > %.0f MB" % (row["peak_rss_mb"], bounds.rss_mb))
    if bounds.writes_per_second and row["writes_per_s"] > bounds.writes_per_second:
        why.append("%.0f writes/s > %.0f" % (row["writes_per_s"], bounds.writes_per_second))
    if row["points_lost"] and not scenario.settings.allow_drops:
        why.append("%d points lost" % row["points_lost"])
    if row.get("killed"):
        why.append("killed after stop_timeout: %s" % ", ".join(row["killed"]))
    return why


TICK = 0.01  # seconds: /proc's CPU clock tick, the CPU figure's resolution


def _base(point: dict) -> dict:
    """A point without its repeat mark: the setting that ran."""
    return {key: value for key, value in point.items() if key != REPEAT}


def _settings_of(rows: list[dict]) -> list[list[dict]]:
    """The group's rows by setting (a repeated point's runs together), in run order."""
    out: list[list[dict]] = []
    for row in rows:
        for runs in out:
            if _base(runs[0]["point"]) == _base(row["point"]):
                runs.append(row)
                break
        else:
            out.append([row])
    return out


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def noise(rows: list[dict]) -> dict | None:
    """The run-to-run noise of one (disk, subject) group, from its repeated point: the
    spread (max - min) of committed points/s and of CPU % between the runs, each at least
    what the measurement resolves (one point over the load window; one /proc clock tick
    over the measured window). None when no point of the group ran twice."""
    repeated = [runs for runs in _settings_of(rows) if len(runs) > 1]
    if not repeated:
        return None
    runs = repeated[0]
    committed = [row["committed_per_s"] for row in runs]
    cpu = [row["cpu_percent"] for row in runs]
    load_s = min(max(row.get("load_seconds") or 0.0, 1e-3) for row in runs)
    active_s = min(max(row.get("active_seconds") or 0.0, 1e-3) for row in runs)
    return {"label": _base_label(runs[0]["label"]), "runs": len(runs),
            "committed_per_s": committed, "cpu_percent": cpu,
            "committed_spread": max(max(committed) - min(committed), 1.0 / load_s),
            "cpu_spread": max(max(cpu) - min(cpu), 100.0 * TICK / active_s)}


def _base_label(label: str) -> str:
    return label.split(" (run ", 1)[0]


def conf_lines(point: dict) -> str:
    """The carbon.conf lines that set a point's swept keys (empty: only the disk or the
    subject differed)."""
    keys = [(key, value) for key, value in point.items()
            if key not in ("disk", "subject", REPEAT)]
    if not keys:
        return ""
    return "\n".join(["[cache]"] + ["%s = %s" % (key, value) for key, value in keys])


def recommendations(rows: list[dict], scenario: Scenario) -> list[dict]:
    """Per disk profile and subject (the environment, not a knob): the setting that
    commits the most points/s within the bounds, or at the same rate uses the least CPU,
    made only where it beats every other setting by more than the measured run-to-run
    noise; each with its paragraph (the numbers it used), the carbon.conf lines to copy
    and the noise."""
    groups: dict[tuple[str, str], list[dict]] = {}
    for row in rows:
        groups.setdefault((row["disk"], row["subject"]), []).append(row)
    out = []
    for (disk, subject), group in groups.items():
        found = noise(group)
        text, point = _recommend_group(group, scenario, found)
        out.append({"disk": disk, "subject": subject, "text": text,
                    "point": point, "conf": conf_lines(point) if point else "",
                    "noise": found})
    return out


def recommend(rows: list[dict], scenario: Scenario) -> str:
    """:func:`recommendations` as one paragraph (prefixed per group when there are several)."""
    if not rows:
        return "No sweep point finished, so there is nothing to recommend."
    found = recommendations(rows, scenario)
    if len(found) == 1:
        return found[0]["text"]
    return " ".join("On disk %s (%s): %s" % (item["disk"], item["subject"], item["text"])
                    for item in found)


def _summary(runs: list[dict]) -> dict:
    """One setting's figures: the mean over its runs (the bounds apply to every run)."""
    first = runs[0]
    return {"label": _base_label(first["label"]), "point": _base(first["point"]),
            "runs": runs,
            "committed_per_s": _mean([row["committed_per_s"] for row in runs]),
            "cpu_percent": _mean([row["cpu_percent"] for row in runs]),
            "sent_per_s": _mean([row["sent_per_s"] for row in runs]),
            "points_per_update": _mean([row["points_per_update"] for row in runs]),
            "peak_cache_size": max(row["peak_cache_size"] for row in runs),
            "peak_rss_mb": max(row["peak_rss_mb"] for row in runs),
            "time_to_disk": (None if any(row["time_to_disk"] is None for row in runs)
                             else max(row["time_to_disk"] for row in runs))}


def _recommend_group(rows: list[dict], scenario: Scenario,
                     found: dict | None) -> tuple[str, dict | None]:
    settings = [_summary(runs) for runs in _settings_of(rows)]
    if len(settings) == 1:
        return ("Only one setting ran here (%s), so there is nothing to compare."
                % settings[0]["label"], None)
    why = {item["label"]: sorted({reason for row in item["runs"]
                                  for reason in within_bounds(row, scenario)})
           for item in settings}
    inside = [item for item in settings if not why[item["label"]]]
    excluded = "; ".join("%s (%s)" % (label, ", ".join(reasons))
                         for label, reasons in why.items() if reasons)
    if not inside:
        return ("No sweep point stayed within the scenario's bounds (%s). Loosen the bounds "
                "or lower the load." % excluded, None)
    if found is None and len(inside) > 1:
        return ("No recommendation: the run-to-run noise was not measured (scenario.repeats "
                "= 1), so no difference between the points can be told from chance. Set "
                "repeats = 2 or more.", None)
    tail = " Outside the bounds: %s." % excluded if excluded else ""
    if len(inside) == 1:   # the others broke a bound: no noise to beat
        only = inside[0]
        return ("Recommended: %s, the only setting within the scenario's bounds. It committed "
                "%.1f points/s (%.0f sent/s) at %.2f%% CPU." % (
                    only["label"], only["committed_per_s"], only["sent_per_s"],
                    only["cpu_percent"]) + tail, only["point"])
    assert found is not None
    rate_noise, cpu_noise = found["committed_spread"], found["cpu_spread"]
    measured = ("run-to-run noise, measured by running %s %d times: %.1f points/s committed "
                "(%s) and %.2f%% CPU (%s)" % (
                    found["label"], found["runs"], rate_noise,
                    ", ".join("%.1f" % v for v in found["committed_per_s"]), cpu_noise,
                    ", ".join("%.2f" % v for v in found["cpu_percent"])))

    def beats(a: dict, b: dict) -> bool:
        gap = a["committed_per_s"] - b["committed_per_s"]
        if gap > rate_noise:
            return True
        return abs(gap) <= rate_noise and b["cpu_percent"] - a["cpu_percent"] > cpu_noise

    winners = [a for a in inside if all(beats(a, b) for b in inside if b is not a)]
    if not winners:
        best = max(inside, key=lambda item: item["committed_per_s"])
        ties = [item for item in inside if item is not best and
                not beats(best, item)]
        return ("No recommendation: no setting beats every other by more than the %s. %s "
                "committed the most, %.1f points/s at %.2f%% CPU, but %s came within the noise "
                "(on committed points/s and on CPU), so the sweep does not tell them apart: "
                "keep what you run, or measure longer (a longer load, more repeats)."
                % (measured, best["label"], best["committed_per_s"], best["cpu_percent"],
                   ", ".join("%s (%.1f points/s at %.2f%% CPU)" % (
                       item["label"], item["committed_per_s"], item["cpu_percent"])
                       for item in ties)) + tail, None)
    best = winners[0]
    others = [item for item in inside if item is not best]
    runner_up = max(others, key=lambda item: item["committed_per_s"])
    text = ("Recommended: %s. It committed %.1f points/s (%.0f sent/s) at %.2f%% CPU, with "
            "%.1f points per update, a peak cache of %.0f points and %.0f MB peak RSS"
            % (best["label"], best["committed_per_s"], best["sent_per_s"],
               best["cpu_percent"], best["points_per_update"], best["peak_cache_size"],
               best["peak_rss_mb"]))
    if best["time_to_disk"] is not None:
        text += "; every point was on disk %.1f s after the load ended" % best["time_to_disk"]
    text += (". The next best, %s, committed %.1f points/s at %.2f%% CPU; the %s, so the "
             "difference is more than noise." % (
                 runner_up["label"], runner_up["committed_per_s"],
                 runner_up["cpu_percent"], measured))
    worst = min(settings, key=lambda item: item["committed_per_s"])
    if worst is not best and worst is not runner_up:
        text += (" The slowest point, %s, committed %.1f points/s (%.0f%% of the best) and "
                 "its cache peaked at %.0f points." % (
                     worst["label"], worst["committed_per_s"],
                     100.0 * worst["committed_per_s"] / max(best["committed_per_s"], 1e-9),
                     worst["peak_cache_size"]))
    return text + tail, best["point"]


def load_as_run(scenario: Scenario, rows: list[dict], planned: int | None = None) -> str:
    """The load that actually ran (this form's settings and the measured figures), not the
    scenario's full form."""
    load = scenario.load
    points = len({json.dumps(_base(row["point"]), sort_keys=True) for row in rows})
    repeats = len(rows) - points
    if not rows:
        return ("Load as run: nothing finished yet (%s planned)." % (planned or 0))
    seconds = [row.get("load_seconds") or 0.0 for row in rows]
    rates = [row["sent_per_s"] for row in rows]
    names = sorted({row.get("metrics", 0) for row in rows})
    asked = ("flat out" if not load.rate else "%g points/s asked%s" % (
        load.rate, "" if load.shape == "steady" else " (%s)" % load.shape))
    text = ("Load as run: %d run(s) (%d sweep point(s)%s) of %s s of load each (measured %.1f "
            "to %.1f s), %s metric(s) (%s configured), %d connection(s), %s, %s; measured "
            "%.0f to %.0f points/s sent, %d points a run on average, a point per metric "
            "every %d s." % (
                len(rows), points, " + %d repeat(s) of a point to measure the noise"
                % repeats if repeats else "", "%g" % load.duration if load.duration else
                "%d points" % load.points, min(seconds), max(seconds),
                " to ".join("%d" % n for n in names), load.metrics, load.connections,
                load.protocol, asked, min(rates), max(rates),
                _mean([row["sent"] for row in rows]), load.step))
    if planned is not None and planned != len(rows):
        text += " %d of %d planned runs finished." % (len(rows), planned)
    return text


def smoke_note(scenario: Scenario, rows: list[dict]) -> str:
    """What a --quick report is (empty for the other forms)."""
    if not scenario.quick:
        return ""
    return ("SMOKE TEST (--quick): a few seconds of load a point (%g s) on %d metric(s), to "
            "check that the daemons, the load, the measurements and this report work. Its "
            "figures are too short to tune from; run the full form (without --quick) for "
            "numbers to act on." % (scenario.load.duration, scenario.load.metrics))


def markdown_table(rows: list[dict]) -> str:
    head = "| " + " | ".join(title for _key, title, _fmt in COLUMNS) + " |"
    rule = "|" + "|".join("---" for _ in COLUMNS) + "|"
    body = ["| " + " | ".join(_cell(row, key, fmt) for key, _title, fmt in COLUMNS) + " |"
            for row in rows]
    return "\n".join([head, rule] + body)


def _emulation_note(rows: list[dict], meta: dict) -> str:
    emulated = sorted({row["disk"] for row in rows if row["disk_emulated"]})
    throttle = (" Real disk throttle (cgroup v2 io.max): %s." % meta["real_throttle"]
                if meta.get("real_throttle") else "")
    if not emulated:
        return "Disk: the real disk of this machine (no emulation)." + throttle
    return ("Disk: EMULATED for %s (the emulated-disk storage backend: whisper files on the "
            "real disk, each update and create then blocked for the I/O time of the modelled "
            "device, for carbon 1.1.10 through the same model added to its database plugins); "
            "rows with disk = none use the real disk." % ", ".join(emulated)) + throttle


def write_report(outdir: Path, scenario: Scenario, rows: list[dict], meta: dict) -> Path:
    """Write (or rewrite) the whole report folder; returns index.html."""
    rows = sorted(rows, key=lambda row: row["index"])  # a hup sweep finishes out of order
    outdir.mkdir(parents=True, exist_ok=True)
    plots = outdir / "plots"
    plots.mkdir(exist_ok=True)
    images = draw_plots(plots, rows)
    recommendation = recommend(rows, scenario)
    advice = recommendations(rows, scenario) if rows else []
    conf = [item for item in advice if item["conf"]]
    meta = dict(meta, written=time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
                machine="%s, %d CPUs, Python %s" % (platform.platform(), os.cpu_count() or 0,
                                                    platform.python_version()))
    smoke = smoke_note(scenario, rows)
    as_run = load_as_run(scenario, rows, meta.get("points_planned"))
    disk_note, files = _emulation_note(rows, meta), files_note(rows, scenario)
    document = {"scenario": scenario.settings.name or Path(scenario.path).stem,
                "scenario_file": os.path.basename(scenario.path), "quick": scenario.quick,
                "long": scenario.long, "meta": meta, "disk_note": disk_note,
                "smoke_test": scenario.quick, "smoke_note": smoke,
                "load_as_run": as_run,
                "recommendation": recommendation, "recommendations": advice,
                "rows": rows, "plots": images,
                "files_note": files,
                "profiles": sorted(path.name for path in (outdir / "profiles").glob("*"))}
    (outdir / "results.json").write_text(json.dumps(document, indent=1, default=str))
    title = "Playground report: %s%s" % (document["scenario"],
                                         " (--quick: smoke test)" if scenario.quick else
                                         " (--long)" if scenario.long else "")
    status = meta.get("status", "complete")
    md = ["# " + title, ""]
    if smoke:
        md += ["**%s**" % smoke, ""]
    md += [_description(scenario), "", as_run, "",
           "Status: %s. %s" % (status, meta.get("written")), "", disk_note, "",
           markdown_table(rows), ""]
    probed = [row for row in rows if row.get("render_requests")]
    if probed:
        md += ["Render app while loading: " + "; ".join(
            "%s: %d requests, median %.0f ms, max %.0f ms, %d errors" % (
                row["label"], row["render_requests"], row["render_p50_ms"],
                row["render_max_ms"], row["render_errors"]) for row in probed), ""]
    killed = ["%s (%s)" % (row["label"], ", ".join(row["killed"])) for row in rows
              if row.get("killed")]
    if killed:
        md += ["WARNING: killed after stop_timeout (%.0f s), so their points lost count what "
               "the kill cut off: %s." % (scenario.settings.stop_timeout, "; ".join(killed)),
               ""]
    if files:
        md += [files, ""]
    md += ["## Recommendation", "", recommendation, ""]
    for item in conf:
        md += ["carbon.conf%s:" % _where(item, advice), "", "```ini", item["conf"], "```", ""]
    (outdir / "results.md").write_text("\n".join(md))
    (outdir / "index.html").write_text(_html(title, scenario, document, rows, images))
    return outdir / "index.html"


def _description(scenario: Scenario) -> str:
    """The scenario file's description, which describes its full form."""
    text = scenario.settings.description
    if scenario.quick and text:
        return "Scenario (its full form; this run is the --quick form): " + text
    return text


def _where(item: dict, advice: list[dict]) -> str:
    return " for disk %s (%s)" % (item["disk"], item["subject"]) if len(advice) > 1 else ""


def files_note(rows: list[dict], scenario: Scenario) -> str:
    """For loads of new names (no warm-up): how long until every file existed."""
    if scenario.settings.warmup or scenario.settings.precreate:
        return ""
    parts = []
    for row in rows:
        if row.get("all_files_after_s") is not None:
            when = "every file after %.1f s" % row["all_files_after_s"]
        elif row.get("dropped_creates"):
            when = ("the points of %d names waiting for a create were dropped "
                    "(droppedCreates): their files come only with their next points"
                    % row["dropped_creates"])
        elif row.get("all_files_projected_s"):
            when = "every file after %s at that pace (projected)" % _duration(
                row["all_files_projected_s"])
        else:
            when = "no file created"
        parts.append("%s: %d of %d files before the stop, %.0f creates a minute, %s" % (
            row["label"], row.get("files_before_stop", 0), row.get("metrics", 0),
            row.get("creates_per_minute", 0.0), when))
    return "New files (from the load's start): " + "; ".join(parts) + "."


def _duration(seconds: float) -> str:
    if seconds < 120:
        return "%.0f s" % seconds
    if seconds < 7200:
        return "%.1f min" % (seconds / 60.0)
    if seconds < 172800:
        return "%.1f h" % (seconds / 3600.0)
    return "%.1f days" % (seconds / 86400.0)


def _html(title: str, scenario: Scenario, document: dict, rows: list[dict],
          images: dict[str, list[str]]) -> str:
    esc = html.escape
    head = "".join("<th>%s</th>" % esc(title) for _key, title, _fmt in COLUMNS)
    body = "".join("<tr>%s</tr>" % "".join("<td>%s</td>" % esc(_cell(row, key, fmt))
                                           for key, _title, fmt in COLUMNS) for row in rows)
    sweep = "".join('<figure><img src="%s" alt="%s"><figcaption>%s</figcaption></figure>'
                    % (esc(path), esc(path), esc(path)) for path in images.get("sweep", []))
    points = "".join('<figure><img src="%s" alt="%s"><figcaption>%s</figcaption></figure>'
                     % (esc(path), esc(row["label"]), esc(row["label"]))
                     for row, path in zip(rows, images.get("points", []), strict=False))
    return """<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>{title}</title>
<style>
body {{ font-family: sans-serif; margin: 1.5em; }}
table {{ border-collapse: collapse; font-size: 0.9em; }}
td, th {{ border: 1px solid #bbb; padding: 0.2em 0.5em; text-align: right; }}
td:first-child, th:first-child {{ text-align: left; }}
.note {{ background: #fff4d6; padding: 0.5em; border-left: 4px solid #e0a000; }}
figure {{ display: inline-block; margin: 0.5em; }}
img {{ max-width: 100%; }}
</style></head><body>
<h1>{title}</h1>
{smoke}<p>{description}</p>
<p id="load-as-run">{load}</p>
<p>Status: {status}. Written {written}. Machine: {machine}.</p>
<p class="note">{disk}</p>
<h2>Results</h2>
<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>
{files}
<h2>Recommendation</h2>
<p id="recommendation">{recommendation}</p>
{conf}
<h2>Across the sweep</h2>
{sweep}
<h2>Each sweep point over time</h2>
{points}
{profiles}
<p>Raw numbers: <a href="results.json">results.json</a>, <a href="results.md">results.md</a>.
</p>
</body></html>
""".format(title=esc(title), description=esc(_description(scenario)),
           smoke='<p class="note" id="smoke-test"><strong>%s</strong></p>\n' % esc(
               document["smoke_note"]) if document["smoke_note"] else "",
           load=esc(document["load_as_run"]),
           conf="".join("<p>carbon.conf%s:</p><pre>%s</pre>" % (
               esc(_where(item, document["recommendations"])), esc(item["conf"]))
               for item in document["recommendations"] if item["conf"]),
           status=esc(document["meta"].get("status", "complete")),
           written=esc(document["meta"]["written"]), machine=esc(document["meta"]["machine"]),
           disk=esc(document["disk_note"]), head=head, body=body,
           files="<p>%s</p>" % esc(document["files_note"]) if document["files_note"] else "",
           recommendation=esc(document["recommendation"]), sweep=sweep, points=points,
           profiles=_profile_links(document.get("profiles", [])))


def _profile_links(names: list[str]) -> str:
    if not names:
        return ""
    items = "".join('<li><a href="profiles/%s">%s</a></li>' % (html.escape(name),
                                                               html.escape(name))
                    for name in names)
    return "<h2>Profiles (where each daemon spent its CPU)</h2><ul>%s</ul>" % items


def _relative(series: list, t0: float, span: tuple[float, float] | None = None
              ) -> tuple[list[float], list[float]]:
    """(seconds since ``t0``, values), only the samples inside ``span`` when given."""
    if span is not None:
        series = [point for point in series if span[0] <= point[0] <= span[1]]
    return [point[0] - t0 for point in series], [point[1] for point in series]


def _span(row: dict) -> tuple[float, float]:
    """A point's own time: from shortly before its load until it stopped (in a hup
    sweep the series run on through the stack's later points)."""
    series = row["series"]
    end = series.get("end")
    if end is None:  # rows written before "end" was recorded
        end = series["load_end"] + (row.get("time_to_disk") or 0.0)
    return series["t0"] - 2.0, end + 0.5


def draw_plots(folder: Path, rows: list[dict]) -> dict[str, list[str]]:
    """One PNG per sweep point (five panels over time) and small multiples across the
    sweep; paths relative to the report folder."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    out: dict[str, list[str]] = {"points": [], "sweep": []}
    for row in rows:
        name = "point-%02d.png" % row["index"]
        if not (folder / name).exists():  # drawn once: the report is rewritten per row
            _point_plot(pyplot, row, folder / name)
        out["points"].append("plots/" + name)
    if rows:
        for name, draw in (("sweep-committed.png", _multiples_committed),
                           ("sweep-cache.png", _multiples_cache),
                           ("sweep-bars.png", _bars)):
            draw(pyplot, rows, folder / name)
            out["sweep"].append("plots/" + name)
    return out


def _point_plot(pyplot: Any, row: dict, path: Path) -> None:
    series = row["series"]
    t0 = series["t0"]
    span = _span(row)
    fig, axes = pyplot.subplots(5, 1, figsize=(7, 11), sharex=True)
    ax = axes[0]
    ax.plot(*_relative(series["received"], t0, span), label="received/s")
    ax.plot(*_relative(series["committed"], t0, span), label="committed/s")
    ax.axhline(row["sent_per_s"], color="grey", linestyle=":", label="sent/s")
    ax.set_ylabel("points/s")
    ax.legend(loc="best", fontsize="small")
    axes[1].plot(*_relative(series["cache_size"], t0, span), color="tab:red")
    axes[1].set_ylabel("cache size")
    ax = axes[2]
    ax.plot(*_relative(series["update_ops"], t0, span), label="update ops/s")
    ax.set_ylabel("update ops/s")
    twin = ax.twinx()
    twin.plot(*_relative(series["points_per_update"], t0, span), color="tab:green",
              label="points/update")
    twin.set_ylabel("points/update")
    for label, points in series["cpu"].items():
        axes[3].plot(*_relative(points, t0, span), label=label)
    axes[3].set_ylabel("CPU % (one core)")
    axes[3].legend(loc="best", fontsize="small")
    for label, points in series["rss"].items():
        axes[4].plot(*_relative(points, t0, span), label=label)
    axes[4].set_ylabel("RSS MB")
    axes[4].set_xlabel("seconds since the load started")
    for ax in axes:
        ax.axvline(series["load_end"] - t0, color="grey", linestyle="--", linewidth=0.8)
        ax.grid(alpha=0.3)
    fig.suptitle(row["label"], fontsize="medium")
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    pyplot.close(fig)


def _short(row: dict) -> str:
    """The point's values only (``sorted / inf / hdd / ours``): titles of small plots."""
    return " / ".join(str(value) for value in _base(row["point"]).values()) + (
        " (run %d)" % row["point"][REPEAT] if row["point"].get(REPEAT) else "")


def _grid(pyplot: Any, count: int) -> tuple[Any, list]:
    cols = min(count, 3)
    lines = math.ceil(count / cols)
    fig, axes = pyplot.subplots(lines, cols, figsize=(4 * cols, 2.8 * lines), sharex=True,
                                sharey=True, squeeze=False)
    flat = [ax for line in axes for ax in line]
    for ax in flat[count:]:
        ax.set_visible(False)
    return fig, flat


def _multiples_committed(pyplot: Any, rows: list[dict], path: Path) -> None:
    fig, axes = _grid(pyplot, len(rows))
    for ax, row in zip(axes, rows, strict=False):
        t0, span = row["series"]["t0"], _span(row)
        ax.plot(*_relative(row["series"]["received"], t0, span), label="received/s")
        ax.plot(*_relative(row["series"]["committed"], t0, span), label="committed/s")
        ax.set_title(_short(row), fontsize="x-small")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize="x-small")
    fig.suptitle("received vs committed points/s", fontsize="medium")
    fig.tight_layout()
    fig.savefig(path, dpi=70)
    pyplot.close(fig)


def _multiples_cache(pyplot: Any, rows: list[dict], path: Path) -> None:
    fig, axes = _grid(pyplot, len(rows))
    for ax, row in zip(axes, rows, strict=False):
        ax.plot(*_relative(row["series"]["cache_size"], row["series"]["t0"], _span(row)),
                color="tab:red")
        ax.set_title(_short(row), fontsize="x-small")
        ax.grid(alpha=0.3)
    fig.suptitle("cache size (points)", fontsize="medium")
    fig.tight_layout()
    fig.savefig(path, dpi=70)
    pyplot.close(fig)


def _bars(pyplot: Any, rows: list[dict], path: Path) -> None:
    fig, (top, bottom) = pyplot.subplots(2, 1, figsize=(max(6, len(rows) * 0.9), 6),
                                         sharex=True)
    names = [str(row["index"]) for row in rows]
    top.bar(names, [row["committed_per_s"] for row in rows], color="tab:blue")
    top.set_ylabel("committed/s")
    bottom.bar(names, [row["cpu_percent"] for row in rows], color="tab:orange")
    bottom.set_ylabel("CPU %")
    bottom.set_xlabel("sweep point (see the table)")
    for ax in (top, bottom):
        ax.grid(alpha=0.3, axis="y")
    fig.tight_layout()
    fig.savefig(path, dpi=70)
    pyplot.close(fig)
