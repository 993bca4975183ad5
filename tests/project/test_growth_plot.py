"""bench/growth_plot.py: one PNG per daemon from the growth rows, missing files skipped."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "growth_plot.py"


def load_script():
    spec = importlib.util.spec_from_file_location("growth_plot", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def row(impl: str, names: int, throughput: float, rss: float) -> dict:
    return {"daemon": "cache", "impl": impl, "names": names, "load": "500k points",
            "throughput": throughput, "unit": "points/s", "cpu_s": 1.0, "peak_rss_mb": rss,
            "measured": "2026-11-24", "command": "python bench/cache_bench.py"}


def test_draws_a_non_blank_png_per_daemon_with_rows(tmp_path) -> None:
    plot = load_script()
    data = tmp_path / "growth"
    data.mkdir()
    rows = [row("ours", n, 400_000 / (1 + i), 50 + 40 * i) for i, n in
            enumerate((10_000, 100_000, 1_000_000))]
    rows += [row("carbon-cache 1.1.10", n, 80_000 / (1 + 3 * i), 90 + 100 * i) for i, n in
             enumerate((10_000, 100_000))]
    rows.append({"impl": "ours", "names": "bad"})  # unusable: left out, not fatal
    (data / "cache.json").write_text(json.dumps(rows))
    (data / "render.json").write_text("{not json")  # relay.json is missing altogether
    drawn = plot.main(["--data", str(data), "--out", str(tmp_path / "img")])
    assert [path.name for path in drawn] == ["growth-cache.png"]
    image = plot_pixels(drawn[0])
    assert image.shape[0] > 200 and image.shape[1] > 400
    # lines, labels and axes: a good share of the pixels are not background white
    not_white = (image[..., :3] < 0.9).any(axis=-1).mean()
    assert 0.01 < not_white < 0.6
    # both implementations are drawn in colour (matplotlib's first two line colours)
    colours = image[..., :3].reshape(-1, 3)
    blue = np.abs(colours - np.array([0.12, 0.47, 0.71])).max(axis=1) < 0.08
    orange = np.abs(colours - np.array([1.0, 0.5, 0.05])).max(axis=1) < 0.08
    assert blue.sum() > 100 and orange.sum() > 100


def plot_pixels(path: Path) -> np.ndarray:
    import matplotlib.image

    return matplotlib.image.imread(str(path))


def test_latest_measurement_wins_for_a_repeated_name_count() -> None:
    plot = load_script()
    old = dict(row("ours", 10_000, 1.0, 1.0), measured="2026-11-01")
    new = dict(row("ours", 10_000, 2.0, 1.0), measured="2026-11-24")
    groups = plot.series([new, old, row("ours", 1_000, 3.0, 1.0)])
    assert [r["throughput"] for r in groups["ours"]] == [3.0, 2.0]


def test_rows_of_one_curve_make_one_line_and_unplotted_rows_are_left_out(tmp_path) -> None:
    plot = load_script()
    small = dict(row("ours", 10_000, 5.0, 1.0), curve="fresh file system a run")
    large = dict(row("ours", 1_000_000, 1.0, 9.0), curve="fresh file system a run",
                 load="2,000,000 points, 60s:6h")
    shared = dict(row("ours", 1_000_000, 7.0, 9.0), load="2,000,000 points, root")
    hidden = dict(row("ours", 100_000, 3.0, 1.0), plot=False)
    path = tmp_path / "cache.json"
    path.write_text(json.dumps([small, large, shared, hidden]))
    rows = plot.read_rows(path)
    assert len(rows) == 3 and all(r.get("plot", True) for r in rows)
    groups = plot.series(rows)
    assert [r["throughput"] for r in groups["ours: fresh file system a run"]] == [5.0, 1.0]
    assert [r["throughput"] for r in groups["ours"]] == [7.0]  # not split by load alone
