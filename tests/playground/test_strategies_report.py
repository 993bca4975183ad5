"""``tools/playground tools/scenarios/strategies.toml --quick`` end to end: real daemons,
a report whose numbers add up, and a page whose every plot loads in headless Chromium."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHECK_SCRIPT = """<script>
window.addEventListener('load', function () {
  var out = [];
  for (var i = 0; i < document.images.length; i++) {
    var img = document.images[i];
    var item = {src: img.getAttribute('src'), loaded: img.complete && img.naturalWidth > 0,
                width: img.naturalWidth, height: img.naturalHeight, colours: 0};
    if (item.loaded) {
      var canvas = document.createElement('canvas');
      canvas.width = img.naturalWidth; canvas.height = img.naturalHeight;
      var ctx = canvas.getContext('2d');
      ctx.drawImage(img, 0, 0);
      var data = ctx.getImageData(0, 0, canvas.width, canvas.height).data;
      var seen = {};
      for (var p = 0; p < data.length; p += 4 * 7) {
        seen[data[p] + ',' + data[p + 1] + ',' + data[p + 2]] = 1;
      }
      item.colours = Object.keys(seen).length;
    }
    out.push(item);
  }
  var pre = document.createElement('pre');
  pre.id = 'image-check';
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
</script>"""


@pytest.fixture(scope="module")
def report(tmp_path_factory: Any) -> Path:
    out = tmp_path_factory.mktemp("playground") / "report"
    result = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "playground"),
         str(ROOT / "tools" / "scenarios" / "strategies.toml"), "--quick", "--out", str(out)],
        capture_output=True, text=True, timeout=240,
        env=dict(os.environ, PYTHONPATH=str(ROOT)), cwd=str(ROOT))
    assert result.returncode == 0, result.stderr[-3000:]
    assert "report: " in result.stdout
    return out


def test_report_numbers_are_consistent(report: Path) -> None:
    document = json.loads((report / "results.json").read_text())
    rows = document["rows"]
    assert document["meta"]["status"] == "complete"
    # 4 sweep points, then each disk's first point again to measure the run-to-run noise
    assert len(rows) == document["meta"]["points_planned"] == 6
    assert [row["point"].get("repeat") for row in rows] == [None] * 4 + [2, 2]
    cores = os.cpu_count() or 1
    for row in rows:
        assert row["sent"] > 1000, row["label"]
        assert row["points_on_disk"] + row["points_lost"] == row["sent"]
        assert row["points_lost"] == 0, row["label"]  # ours: nothing dropped
        assert row["time_to_disk"] is not None
        for label, cpu in row["cpu_percent_by_daemon"].items():
            assert 0.0 <= cpu <= 100.0 * cores, (label, cpu)
        assert 0.0 < row["committed_per_s"] <= row["sent_per_s"] * 1.5
        assert row["update_ops_per_s"] > 0 and row["points_per_update"] >= 1.0
        assert row["peak_cache_size"] >= row["final_cache_size"] >= 0
        assert row["peak_rss_mb"] > 5
        assert row["files"] == 300
        assert row["disk_emulated"] and row["disk"] in ("ssd", "hdd")
        assert row["log_tracebacks"] == {"cache-a": 0}
        assert row["killed"] == []  # every daemon drained and exited on SIGTERM
        assert row["series"]["committed"] and row["series"]["cache_size"]
    hdd = [row for row in rows if row["disk"] == "hdd"]
    ssd = [row for row in rows if row["disk"] == "ssd"]
    # 500 emulated IOPS at 2 I/Os an update cap the HDD near 250 updates/s
    assert max(row["update_ops_per_s"] for row in hdd) < 300
    assert min(row["points_per_update"] for row in hdd) > \
        max(row["points_per_update"] for row in ssd)
    markdown = (report / "results.md").read_text()
    assert "EMULATED for hdd, ssd" in markdown
    assert markdown.count("| CACHE_WRITE_STRATEGY=") == 6
    assert markdown.count("(run 2) |") == 2


def test_quick_is_a_smoke_test_with_the_load_that_ran(report: Path) -> None:
    document = json.loads((report / "results.json").read_text())
    markdown = (report / "results.md").read_text()
    page = (report / "index.html").read_text()
    assert document["smoke_test"] is True
    assert markdown.startswith("# Playground report: strategies (--quick: smoke test)\n\n"
                               "**SMOKE TEST (--quick):")
    assert 'id="smoke-test"' in page and "too short to tune from" in page
    # the header names the quick load (300 metrics, 3 s), not the full form's 6,000 x 10 s
    header = document["load_as_run"]
    assert header in markdown and header.replace("'", "&#x27;") in page
    assert "6 run(s) (4 sweep point(s) + 2 repeat(s)" in header
    assert "of 3 s of load each" in header and "300 metric(s) (300 configured)" in header
    assert "1 connection(s), plaintext, 600 points/s asked" in header
    sent = [row["sent_per_s"] for row in document["rows"]]
    assert "measured %.0f to %.0f points/s sent" % (min(sent), max(sent)) in header
    assert "6000" not in header and "6,000" not in header
    assert "Scenario (its full form; this run is the --quick form)" in markdown


def test_recommendation_only_beyond_the_measured_noise(report: Path) -> None:
    document = json.loads((report / "results.json").read_text())
    markdown = (report / "results.md").read_text()
    advice = document["recommendations"]
    assert [(item["disk"], item["subject"]) for item in advice] == [("ssd", "ours"),
                                                                    ("hdd", "ours")]
    for item in advice:
        noise = item["noise"]
        assert noise["runs"] == 2 and len(noise["committed_per_s"]) == 2
        spread = max(noise["committed_per_s"]) - min(noise["committed_per_s"])
        assert noise["committed_spread"] >= spread
        group = [row for row in document["rows"] if row["disk"] == item["disk"]]
        rates: dict[str, list] = {}
        for row in group:
            rates.setdefault(row["point"]["CACHE_WRITE_STRATEGY"], []).append(
                row["committed_per_s"])
        means = {key: sum(values) / len(values) for key, values in rates.items()}
        gap = abs(means["sorted"] - means["naive"])
        if item["point"] is None:   # within the noise on rate (and on CPU): nothing
            assert item["text"].startswith("No recommendation: no setting beats every other")
            assert item["conf"] == ""
            continue
        assert item["text"].startswith("Recommended: CACHE_WRITE_STRATEGY=")
        winner = item["point"]["CACHE_WRITE_STRATEGY"]
        cpu: dict[str, list] = {}
        for row in group:
            cpu.setdefault(row["point"]["CACHE_WRITE_STRATEGY"], []).append(row["cpu_percent"])
        cpus = {key: sum(values) / len(values) for key, values in cpu.items()}
        other = "naive" if winner == "sorted" else "sorted"
        assert gap > noise["committed_spread"] or \
            cpus[other] - cpus[winner] > noise["cpu_spread"]
        assert item["conf"] == ("[cache]\nCACHE_WRITE_STRATEGY = %s\n"
                                "MAX_UPDATES_PER_SECOND = 500" % winner)
        assert "```ini\n%s\n```" % item["conf"] in markdown


def test_every_plot_loads_and_is_not_blank_in_chromium(report: Path, tmp_path: Path) -> None:
    browser = shutil.which("chromium")  # Debian's, from tools/system-deps.sh
    if browser is None:  # under CI a missing browser fails
        (pytest.fail if os.environ.get("CI", "").lower() == "true" else pytest.skip)(
            "chromium not found (tools/system-deps.sh installs it)")
    page = (report / "index.html").read_text()
    images = re.findall(r'<img src="([^"]+)"', page)
    assert len(images) == 6 + 3  # one per run (4 points, 2 repeats), three across the sweep
    (report / "check.html").write_text(page.replace("</body>", CHECK_SCRIPT + "</body>"))
    result = subprocess.run([
        browser, "--headless", "--no-sandbox", "--disable-gpu",
        "--disable-background-networking", "--no-first-run", "--disable-component-update",
        "--disable-sync", "--user-data-dir=%s" % (tmp_path / "profile"),
        "--allow-file-access-from-files", "--virtual-time-budget=10000", "--dump-dom",
        (report / "check.html").as_uri()], capture_output=True, text=True, timeout=120)
    found = re.search(r'<pre id="image-check">(.*?)</pre>', result.stdout, re.S)
    assert found, result.stderr[-2000:]
    checked = json.loads(found.group(1).replace("&quot;", '"'))
    assert [item["src"] for item in checked] == images
    for item in checked:
        assert item["loaded"] and item["width"] > 100 and item["height"] > 100, item
        assert item["colours"] > 3, item  # a blank or one-colour image fails
