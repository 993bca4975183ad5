"""``carbon-cluster resize`` on a running two-host cluster (127.0.0.41, 127.0.0.42): the
cluster file's [storage] schemas change, the dry run counts each host's files, the run
has each host's agent rewrite its own files while the caches run; every point is still
read through the render apps and the headers follow the new rules. ``carbon-resize``
(one host, no agent) on a leftover temp file and bad options."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from carbon.cluster.generate import whisper_dir
from carbon.cluster.resize import TEMP_SUFFIX
from carbon.cluster.spec import load_cluster
from carbon.storage.whisper_resize import read_header
from tests.cluster.clusterutil import ROOT, cli, cluster_file, render, send_lines
from tests.support import wait_for

HOSTS = {"a": "127.0.0.41", "b": "127.0.0.42"}
BEFORE = '[storage]\nschemas = """\n[default]\npattern = .*\nretentions = 60s:1d\n"""\n'
AFTER = ('[storage]\nschemas = """\n[default]\npattern = .*\nretentions = 60s:1d,5m:7d\n"""\n'
         'aggregation = """\n[sums]\npattern = \\\\.count$\naggregationMethod = sum\n"""\n')
NAMES = ["rz.m%02d" % i for i in range(12)] + ["rz.c%02d.count" % i for i in range(6)]


@pytest.fixture
def cluster(tmp_path: Path):
    path = cluster_file(tmp_path, HOSTS, extra=BEFORE)
    started = cli("start", path)
    assert started.returncode == 0, started.stdout + started.stderr
    try:
        yield path
    finally:
        cli("stop", path)


def files(spec) -> dict[str, list[str]]:
    out = {}
    for host in spec.hosts:
        base = whisper_dir(spec, host)
        out[host.name] = sorted(os.path.join(d, f) for d, _, fs in os.walk(base)
                                for f in fs if f.endswith(".wsp") and "/rz/" in d + "/")
    return out


def test_cluster_resize_online(cluster: Path) -> None:
    spec = load_cluster(str(cluster))
    a = spec.host("a")
    base = int(time.time()) // 60 * 60 - 60 * 60
    lines = ["%s %d %d\n" % (name, i * 1000 + k, base + 60 * k)
             for i, name in enumerate(NAMES) for k in range(50)]
    send_lines((a.address, a.relay_line_port), lines)
    wait_for(lambda: sum(map(len, files(spec).values())) == len(NAMES), timeout=60,
             what="files on both hosts")
    per_host = {name: len(paths) for name, paths in files(spec).items()}
    assert all(per_host.values()), per_host  # the ring spread them over both hosts
    # the new rules, in the cluster file
    cluster.write_text(cluster.read_text().replace(BEFORE, AFTER))
    dry = cli("resize", cluster, "--dry-run")
    assert dry.returncode == 0, dry.stdout + dry.stderr
    for name, count in per_host.items():
        assert "%s: would change %d of" % (name, count) in dry.stdout, dry.stdout
        assert "%d rewritten" % count in dry.stdout
    assert all(read_header(p).archives[-1].step == 60 for ps in files(spec).values()
               for p in ps)  # a dry run changes nothing
    # points keep coming while the hosts resize
    later = ["%s %d %d\n" % (name, i * 1000 + 50, base + 60 * 50)
             for i, name in enumerate(NAMES)]
    run = subprocess.Popen([sys.executable, "-m", "carbon.cluster.cli", "resize",
                            str(cluster), "--rate-files", "20"],
                           env=dict(os.environ, PYTHONPATH=str(ROOT)), text=True,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    send_lines((a.address, a.relay_line_port), later)
    out, err = run.communicate(timeout=120)
    assert run.returncode == 0, out + err
    for name, count in per_host.items():
        assert "%s: changed %d of" % (name, count) in out, out
    for paths in files(spec).values():
        for path in paths:
            header = read_header(path)
            assert [(x.step, x.points) for x in header.archives] == [(60, 1440), (300, 2016)]
            assert header.aggregation_method == ("sum" if path.endswith("/count.wsp")
                                                 else "average")
            assert not os.path.exists(path + TEMP_SUFFIX)
    expected = {name: {base + 60 * k: float(i * 1000 + k) for k in range(51)}
                for i, name in enumerate(NAMES)}

    def complete() -> bool:
        got = {}
        for host in spec.hosts:
            got.update(render("%s:%d" % (host.address, host.render_port), "rz.*",
                              since="-3h"))
            got.update(render("%s:%d" % (host.address, host.render_port), "rz.*.count",
                              since="-3h"))
        return all(got.get(name) == points for name, points in expected.items())
    wait_for(complete, timeout=60, what="every point read through the render apps")
    again = cli("resize", cluster, "--dry-run")
    assert again.returncode == 0 and again.stdout.count("would change 0 of") == 2, again.stdout


def test_carbon_resize_one_host_sweeps_and_refuses_bad_options(tmp_path: Path) -> None:
    import whisper
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "storage-schemas.conf").write_text("[all]\npattern = .*\nretentions = 10s:1h\n")
    data = tmp_path / "whisper" / "x"
    data.mkdir(parents=True)
    path = str(data / "y.wsp")
    whisper.create(path, [(10, 60)])
    whisper.update(path, 5.0)
    (data / ("z.wsp" + TEMP_SUFFIX)).write_bytes(b"left by a killed run")

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "carbon.cluster.resize",
                               "--whisper-dir", str(tmp_path / "whisper"),
                               "--conf-dir", str(conf), *args], capture_output=True,
                              text=True, timeout=60, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    dry = run("--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "would change 1 of 1 files: 0 header-only, 1 rewritten" in dry.stdout
    assert "estimated" in dry.stdout
    done = run("--rate-files", "0", "--carbonlink", "127.0.0.43:1")
    assert done.returncode == 0, done.stderr
    assert "changed 1 of 1" in done.stdout and "1 leftover temp files swept" in done.stdout
    assert "caches not running (nothing to hold): 127.0.0.43:1" in done.stdout
    assert [(a.step, a.points) for a in read_header(path).archives] == [(10, 360)]
    assert whisper.fetch(path, time.time() - 60)[1].count(5.0) == 1
    import fcntl
    with open(tmp_path / "whisper" / ".carbon-resize.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another run
        busy = run()
        assert busy.returncode == 1 and "another resize runs on" in busy.stderr
        assert run("--dry-run").returncode == 0  # counts still (no timed rewrite)
    bad = run("--rate-files", "-1")
    assert bad.returncode == 1 and "--rate-files must be 0 or more" in bad.stderr
    bad = run("--carbonlink", "nohostport")
    assert bad.returncode == 1 and "HOST:PORT" in bad.stderr


def test_a_killed_resize_leaves_old_or_new_files_and_the_next_run_finishes(
        tmp_path: Path) -> None:
    import signal

    import whisper
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "storage-schemas.conf").write_text("[all]\npattern = .*\nretentions = 10s:2h,60s:1d\n")
    base = tmp_path / "whisper"
    now = int(time.time())
    paths = []
    for i in range(300):
        folder = base / ("d%d" % (i % 10))
        folder.mkdir(parents=True, exist_ok=True)
        path = str(folder / ("m%03d.wsp" % i))
        whisper.create(path, [(10, 360)])
        whisper.update_many(path, [(now - 10 * k, float(i + k)) for k in range(100)])
        paths.append(path)
    run = subprocess.Popen([sys.executable, "-m", "carbon.cluster.resize",
                            "--whisper-dir", str(base), "--conf-dir", str(conf),
                            "--rate-files", "150"], env=dict(os.environ, PYTHONPATH=str(ROOT)),
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    # the first file in walk order is rewritten first; kill soon after (at 150 files/s
    # most are still old)
    wait_for(lambda: os.path.getsize(paths[0]) > 28 + 12 * 360, timeout=60,
             what="the first file rewritten")
    run.send_signal(signal.SIGKILL)  # mid-run: between or inside rewrites
    run.wait(10)
    kinds = {"old": 0, "new": 0}
    for i, path in enumerate(paths):
        archives = [(a.step, a.points) for a in read_header(path).archives]
        assert archives in ([(10, 360)], [(10, 720), (60, 1440)]), (path, archives)
        kinds["old" if len(archives) == 1 else "new"] += 1
        assert os.path.getsize(path) == (28 + 12 * 360 if len(archives) == 1
                                         else 40 + 12 * (720 + 1440))
        values = whisper.fetch(path, now - 3600, now, now=now)[1]
        assert [v for v in values if v is not None][-5:] == [float(i + k) for k in range(4, -1, -1)]
    assert kinds["old"] and kinds["new"], kinds  # killed part-way
    done = subprocess.run([sys.executable, "-m", "carbon.cluster.resize", "--whisper-dir",
                           str(base), "--conf-dir", str(conf), "--rate-files", "0"],
                          capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert done.returncode == 0, done.stderr
    assert "changed %d of 300" % kinds["old"] in done.stdout, done.stdout
    assert not [f for _, _, fs in os.walk(base) for f in fs if f.endswith(TEMP_SUFFIX)]
