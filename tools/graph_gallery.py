#!/usr/bin/env python3
"""Build docs/gallery.md: the same render URLs drawn by this render app and by graphite-web
1.1.10, side by side, over one small whisper tree of realistic full-precision values.

    .venv/bin/python tools/graph_gallery.py            # both apps (installs graphite-web
                                                       # 1.1.10 into ~/.cache on first use)
    .venv/bin/python tools/graph_gallery.py --ours-only

The tree: three hosts' cpu (user/system/iowait, %), load (shortterm) and network
(rx/tx bytes/s) at 60 s over one day, with gaps (a 40-minute outage on web2, scattered lost
points on db1). Every request pins ``now`` so both apps draw the same window. Images go to
docs/img/gallery/ (``<name>-ours.png`` and ``<name>-graphite-web.png``); notes on visible
differences are in NOTES below and written under each pair.
"""

from __future__ import annotations

import argparse
import math
import os
import random
import shutil
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Optional
from urllib.parse import urlencode

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / 'bench'))

STEP = 60
DAY = 86400
HOSTS = ('web1', 'web2', 'db1')
SIZE = {'width': 500, 'height': 300}
TEMPLATES = """[default]
background = white
foreground = black
majorLine = rose
minorLine = grey
lineColors = blue,green,red,purple,brown,yellow,aqua,grey,magenta,pink,gold,rose

[night]
background = 1b1f2a
foreground = d8dee9
majorLine = 4c566a
minorLine = 3b4252
lineColors = 88c0d0,a3be8c,ebcb8b,bf616a
fontSize = 11
"""


@dataclass
class Graph:
    """One gallery entry: file stem, heading, render parameters and a note."""

    name: str
    heading: str
    params: list[tuple[str, str]]
    note: str = ''


def _graphs() -> list[Graph]:
    day = [('from', '-24h')]
    hours = [('from', '-3h')]
    return [
        Graph('line', 'Line graph (defaults)', [('target', 'servers.*.cpu.user')] + day),
        Graph('title-vtitle', 'title, vtitle', [
            ('target', 'servers.web1.cpu.user'), ('title', 'web1 cpu user'),
            ('vtitle', 'percent')] + day),
        Graph('legend', 'Legend with six series',
              [('target', 'servers.*.cpu.user'), ('target', 'servers.*.cpu.system')] + day),
        Graph('stacked', 'areaMode=stacked',
              [('target', 'servers.web1.cpu.*'), ('areaMode', 'stacked')] + day),
        Graph('area-all', 'areaMode=all, areaAlpha=0.4',
              [('target', 'servers.*.load.shortterm'), ('areaMode', 'all'),
               ('areaAlpha', '0.4')] + day),
        Graph('area-first', 'areaMode=first',
              [('target', 'servers.web1.load.shortterm'), ('target', 'servers.db1.load.shortterm'),
               ('areaMode', 'first')] + day),
        Graph('staircase', 'lineMode=staircase',
              [('target', 'servers.web1.load.shortterm'), ('lineMode', 'staircase')] + hours),
        Graph('gaps-slope', 'Gaps, default lineMode=slope',
              [('target', 'servers.web2.cpu.user'), ('target', 'servers.db1.cpu.user')]
              + hours),
        Graph('connected', 'lineMode=connected',
              [('target', 'servers.web2.cpu.user'), ('target', 'servers.db1.cpu.user'),
               ('lineMode', 'connected')] + hours),
        Graph('null-as-zero', 'drawNullAsZero=true',
              [('target', 'servers.web2.cpu.user'), ('target', 'servers.db1.cpu.user'),
               ('drawNullAsZero', 'true')] + hours),
        Graph('second-y', 'secondYAxis(), vtitleRight',
              [('target', 'servers.web1.cpu.user'),
               ('target', 'secondYAxis(servers.web1.net.rx)'), ('vtitle', 'cpu %'),
               ('vtitleRight', 'bytes/s')] + day),
        Graph('pie', 'graphType=pie',
              [('target', 'servers.*.net.rx'), ('graphType', 'pie')] + day),
        Graph('pie-max', 'graphType=pie, pieMode=maximum, valueLabels=number',
              [('target', 'servers.*.load.shortterm'), ('graphType', 'pie'),
               ('pieMode', 'maximum'), ('valueLabels', 'number')] + day),
        Graph('log', 'logBase=10',
              [('target', 'servers.*.net.rx'), ('target', 'servers.web1.load.shortterm'),
               ('logBase', '10')] + day),
        Graph('y-step', 'yStep=7.5',
              [('target', 'servers.web1.cpu.user'), ('yStep', '7.5')] + day),
        Graph('y-limit', 'yLimit=30 (yMin=0)',
              [('target', 'servers.*.cpu.user'), ('yLimit', '30'), ('yMin', '0')] + day),
        Graph('y-divisors', 'yDivisors=3',
              [('target', 'servers.*.cpu.user'), ('yDivisors', '3')] + day),
        Graph('min-x-step', 'minXStep=15',
              [('target', 'servers.web1.cpu.user'), ('minXStep', '15')] + day),
        Graph('margin', 'margin=40',
              [('target', 'servers.web1.cpu.user'), ('margin', '40')] + day),
        Graph('template', 'template=night (graphTemplates.conf)',
              [('target', 'servers.*.cpu.user'), ('template', 'night')] + day),
        Graph('colours', 'bgcolor, fgcolor, colorList, majorGridLineColor',
              [('target', 'servers.*.cpu.user'), ('bgcolor', 'FFFFF0'), ('fgcolor', '333333'),
               ('colorList', 'darkblue,orange,FF00FF'), ('majorGridLineColor', 'CCCCCC')]
              + day),
        Graph('dashed', 'dashed(), lineWidth(), color()',
              [('target', 'dashed(color(servers.web1.load.shortterm,"red"))'),
               ('target', 'lineWidth(servers.db1.load.shortterm,3)')] + day),
        Graph('hide', 'hideLegend, hideGrid, hideYAxis',
              [('target', 'servers.*.cpu.user'), ('hideLegend', 'true'), ('hideGrid', 'true'),
               ('hideYAxis', 'true')] + day),
        Graph('graph-only', 'graphOnly=true',
              [('target', 'servers.*.cpu.user'), ('graphOnly', 'true')] + day),
    ]


def _wave(rng: random.Random, t: int, base: float, swing: float, noise: float,
          phase: float) -> float:
    hour = (t % DAY) / 3600.0
    return max(0.0, base + swing * math.sin((hour - 6 + phase) / 24.0 * 2 * math.pi)
               + rng.gauss(0.0, noise))


def build_tree(storage: Path, now: int) -> None:
    """Write the hosts' whisper files (one day at 60 s, values ending at ``now``)."""
    import whisper
    rng = random.Random(15)
    times = list(range(now - DAY + STEP, now + STEP, STEP))
    for index, host in enumerate(HOSTS):
        load = 1.0 + index * 0.6
        series = {
            'cpu.user': [_wave(rng, t, 18 + 8 * index, 12, 2.5, index) for t in times],
            'cpu.system': [_wave(rng, t, 6 + 2 * index, 3, 0.9, index) for t in times],
            'cpu.iowait': [_wave(rng, t, 1.5 + 3 * (host == 'db1'), 1, 0.6, 3) for t in times],
            'load.shortterm': [_wave(rng, t, load, load * 0.5, 0.2, index) for t in times],
            'net.rx': [_wave(rng, t, 2.1e6 * (index + 1), 1.5e6, 2e5, index) for t in times],
            'net.tx': [_wave(rng, t, 7.3e5 * (index + 1), 4e5, 8e4, index) for t in times],
        }
        for metric, values in series.items():
            points = list(zip(times, values, strict=True))
            if host == 'web2':          # a 40-minute outage 100 minutes ago
                points = [p for p in points if not now - 140 * 60 < p[0] <= now - 100 * 60]
            if host == 'db1':           # scattered lost points
                points = [p for p in points if rng.random() > 0.04]
            path = storage / 'whisper' / 'servers' / host / (metric.replace('.', '/') + '.wsp')
            path.parent.mkdir(parents=True, exist_ok=True)
            whisper.create(str(path), [(STEP, 2 * DAY // STEP)], xFilesFactor=0.5)
            whisper.update_many(str(path), points)


def _fetch(port: int, query: str) -> bytes:
    with urllib.request.urlopen('http://127.0.0.1:%d/render?%s' % (port, query),
                                timeout=120) as response:
        body = response.read()
    if body[:8] != b'\x89PNG\r\n\x1a\n':
        raise RuntimeError('not a PNG for %s: %r' % (query, body[:200]))
    return body


def _start_servers(workdir: Path, storage: Path, with_reference: bool) -> list:
    from render_bench import Server, setup_graphite
    templates = workdir / 'graphTemplates.conf'
    templates.write_text(TEMPLATES)
    conf = workdir / 'ours_settings.py'
    conf.write_text('STORAGE_DIR = %r\nCARBONLINK_HOSTS = []\nGRAPHTEMPLATES_CONF = %r\n'
                    'LOG_LEVEL = "WARNING"\n' % (str(storage), str(templates)))
    servers = [Server('ours', [sys.executable, '-m', 'webapp.server', '--config', str(conf),
                               '--port'], dict(os.environ, PYTHONPATH=str(ROOT)), str(ROOT),
                      workdir)]
    if with_reference:
        try:
            venv, env = setup_graphite(workdir, storage, module='gallery_gw_settings',
                                       extra='GRAPHTEMPLATES_CONF = %r\n' % str(templates))
            servers.append(Server('graphite-web 1.1.10', [
                str(venv / 'bin/gunicorn'), '--workers', '1', '--threads', '2',
                '--log-level', 'warning', '--timeout', '120', 'graphite.wsgi:application'],
                env, str(workdir), workdir))
        except BaseException:
            servers[0].stop()
            raise
    return servers


def _shrink(data: bytes) -> bytes:
    """The PNG with a 256-colour palette (no dithering), a third of the size in git; a
    graph has far fewer colours, anti-aliased edges lose a few shades."""
    import io
    from PIL import Image
    image = Image.open(io.BytesIO(data)).convert('RGB')
    out = io.BytesIO()
    image.quantize(256, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE).save(
        out, format='PNG', optimize=True)
    return out.getvalue() if out.tell() < len(data) else data


def _markdown(graphs: list[Graph], with_reference: bool) -> str:
    lines = [
        '# Graph gallery: ours next to graphite-web 1.1.10',
        '',
        'Made by `.venv/bin/python tools/graph_gallery.py` (rerun it to refresh; it needs',
        "graphite-web 1.1.10, which bench/common.py's `graphite_web_venv()` installs into",
        '`~/.cache` on first use). Both apps read the same whisper tree: three hosts',
        '(`web1`, `web2`, `db1`) with cpu (user, system, iowait; percent), `load.shortterm`',
        'and `net.rx`/`net.tx` (bytes/s) at 60 s over one day, full-precision values, a',
        '40-minute outage on web2 (100 to 140 minutes before the end) and ~4 % of db1\'s',
        'points lost. Every request also carries `now=<time the tree ends>` and',
        '`width=500&height=300&format=png`; the template entry uses the `graphTemplates.conf`',
        'the script writes (a `night` section). Images are the PNGs the apps sent, reduced',
        'to a 256-colour palette to keep the repository small.',
        '',
        '## What differs in general',
        '',
        *GENERAL_NOTES,
        '',
    ]
    for graph in graphs:
        query = '&'.join('%s=%s' % (k, v) for k, v in graph.params)
        lines += ['## %s' % graph.heading, '', '`%s`' % query, '']
        if with_reference:
            lines += ['| ours | graphite-web 1.1.10 |', '| --- | --- |',
                      '| ![ours](img/gallery/%s-ours.png) | ![graphite-web 1.1.10]'
                      '(img/gallery/%s-graphite-web.png) |' % (graph.name, graph.name), '']
        else:
            lines += ['![ours](img/gallery/%s-ours.png)' % graph.name, '']
        note = NOTES.get(graph.name, '')
        if note:
            lines += [note, '']
    return '\n'.join(lines)


# Differences seen by eye in the generated images (update when the drawing changes).
GENERAL_NOTES: list[str] = [
    '- Same data, same y range and y tick values, same y label text (`20.0`, `0`, `1.0 M`),',
    '  same x label times and format (graphite-web\'s seconds-per-pixel table), same',
    '  colours, same legend order (row by row).',
    '- Fonts: both DejaVu Sans at the same sizes (titles at the font size plus its',
    '  logarithm, as graphite-web); cairo and Agg hint and space glyphs slightly',
    '  differently.',
    '- Legend: graphite-web shows a filled square per series, left-aligned under the plot;',
    '  ours shows a short sample of the line (its colour, width and dashes), centred.',
    '- Frame: ours draws a box in `fgcolor` around the plot and short tick marks at the',
    '  labels; graphite-web draws only thin side borders and no tick marks. Its plot reaches',
    '  a little closer to the right and bottom edges.',
    '- Drawing: Agg (ours) and cairo (graphite-web) anti-alias slightly differently; thick',
    '  lines join round in ours and with sharp mitred spikes in graphite-web.',
    '- x labels that would run off the image are left out in ours; graphite-web cuts them',
    '  at the edge (see the last label of most graphs).',
]
NOTES: dict[str, str] = {
    'area-all': (
        '**Differs on purpose.** graphite-web fills each series only where no earlier '
        "series' area is (it clips every fill out of the next ones), so with the highest "
        'series first only db1\'s area shows and web1/web2 are lines over it. Ours fills '
        'every series down to zero with the alpha, so the areas overlap and tint each '
        "other (the band near the end is web2's 40-minute gap). Without areaAlpha "
        'graphite-web would hide a series lying under an earlier one entirely; ours keeps '
        'every series visible.'),
    'second-y': (
        "graphite-web's legend overprints itself (the right-axis entry is right-aligned "
        'onto the left one); ours lists both.'),
    'pie': (
        'Value labels: graphite-web writes `%50.10` (its format puts the percent sign '
        'first, two decimals); ours `50%`. graphite-web takes slice colours from colorList '
        'only; ours also honours `color()` on a series.'),
    'pie-max': 'No value labels in either: every maximum is under valueLabelsMin (5).',
    'min-x-step': (
        'Each app merges points for its own plot width (ours ~425 px, graphite-web ~440 '
        'px), so the merged peak is 30.0 in ours and 30.2 in graphite-web, and its axis '
        'goes one step higher (35).'),
    'dashed': 'graphite-web joins the 3-px line with sharp mitred spikes; ours joins round.',
    'hide': 'graphite-web draws no border with hideGrid; ours keeps the box around the plot.',
    'graph-only': 'The same apart from anti-aliasing.',
}


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--ours-only', action='store_true',
                        help='draw only with this app (no graphite-web)')
    parser.add_argument('--docs', type=Path, default=ROOT / 'docs',
                        help='docs folder to write gallery.md and img/gallery/ into')
    parser.add_argument('--only', default='', help='comma-separated graph names to draw')
    args = parser.parse_args(argv)
    with_reference = not args.ours_only
    graphs = _graphs()
    chosen = [g for g in graphs if not args.only or g.name in args.only.split(',')]
    images = args.docs / 'img' / 'gallery'
    images.mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix='graph-gallery-'))
    try:
        storage = workdir / 'storage'
        now = int(time.time()) // STEP * STEP
        build_tree(storage, now)
        servers = _start_servers(workdir, storage, with_reference)
        try:
            for graph in chosen:
                query = urlencode(graph.params + [(k, str(v)) for k, v in SIZE.items()]
                                  + [('format', 'png'), ('now', str(now))])
                for server in servers:
                    suffix = 'ours' if server.name == 'ours' else 'graphite-web'
                    path = images / ('%s-%s.png' % (graph.name, suffix))
                    path.write_bytes(_shrink(_fetch(server.port, query)))
                print('drew %s' % graph.name, flush=True)
        finally:
            for server in servers:
                server.stop()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    if not args.only:
        (args.docs / 'gallery.md').write_text(_markdown(graphs, with_reference) + '\n')
    total = sum(p.stat().st_size for p in images.glob('*.png'))
    print('wrote %s (%d images, %.0f kB)' % (images, len(list(images.glob('*.png'))),
                                             total / 1024.0))
    return 0


if __name__ == '__main__':
    sys.exit(main())
