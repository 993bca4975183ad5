#!/usr/bin/env python3
"""Check that a change to the graph code keeps every pixel: draw the gallery's graphs
(tools/graph_gallery.py's tree and URLs, at a fixed ``now``) at 500x300 and at the
default size, with and without a legend, their SVGs, and bench/render_bench.py's
36-series (two sizes) and 200-series graphs, in-process; ``save`` keeps the decoded
RGBA pixels (and the SVG text), ``check`` compares with what was saved.

    .venv/bin/python tools/graph_pixels.py save /tmp/pixels-before
    (change the code)
    .venv/bin/python tools/graph_pixels.py check /tmp/pixels-before

``check`` exits 1 when a PNG's pixels differ (SVG differences are listed, not counted:
the same drawing may be grouped differently). Trees are built under --workdir.
"""

from __future__ import annotations

import argparse
import io
import sys
import tempfile
from pathlib import Path
from typing import Callable, Optional
from urllib.parse import urlencode

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / 'bench'))
sys.path.insert(0, str(ROOT / 'tools'))

NOW = 1764300000 // 60 * 60


def _app(storage: Path, templates: Optional[Path], workdir: Path, name: str) -> Callable:
    from webapp.app import make_app
    from webapp.settings import load_settings
    conf = workdir / ('%s_settings.py' % name)
    text = 'STORAGE_DIR = %r\nCARBONLINK_HOSTS = []\nLOG_LEVEL = "WARNING"\n' % str(storage)
    if templates is not None:
        text += 'GRAPHTEMPLATES_CONF = %r\n' % str(templates)
    conf.write_text(text)
    app: Callable = make_app(load_settings(str(conf)))
    return app


def _get(app: Callable, query: str) -> bytes:
    environ = {'REQUEST_METHOD': 'GET', 'PATH_INFO': '/render', 'QUERY_STRING': query,
               'SERVER_NAME': 'localhost', 'SERVER_PORT': '80', 'wsgi.input': io.BytesIO(),
               'wsgi.url_scheme': 'http', 'wsgi.errors': sys.stderr}
    status: list[str] = []
    body = b''.join(app(environ, lambda s, h, e=None: status.append(s)))
    if not status[0].startswith('200'):
        raise RuntimeError('%s for %s: %r' % (status[0], query, body[:300]))
    return body


def cases(workdir: Path) -> dict[str, tuple[Callable, str]]:
    """name -> (WSGI app, query) of every graph drawn."""
    import graph_gallery
    import render_bench
    storage = workdir / 'gallery'
    if not (storage / 'whisper').exists():
        graph_gallery.build_tree(storage, NOW)
    templates = workdir / 'graphTemplates.conf'
    templates.write_text(graph_gallery.TEMPLATES)
    gallery = _app(storage, templates, workdir, 'gallery')
    out: dict[str, tuple[Callable, str]] = {}
    for graph in graph_gallery._graphs():
        for size in (graph_gallery.SIZE, {}):
            for legend in ([], [('hideLegend', 'false')]):
                query = urlencode(graph.params + [(k, str(v)) for k, v in size.items()]
                                  + [('format', 'png'), ('now', str(NOW))] + legend)
                out['%s-%s%s' % (graph.name, 'big' if size else 'default',
                                 '-legend' if legend else '')] = (gallery, query)
        out[graph.name + '-svg'] = (gallery, urlencode(
            graph.params + [('format', 'svg'), ('now', str(NOW))]))
    bench_storage, now = render_bench.build_tree(workdir, False)
    bench = _app(bench_storage, None, workdir, 'bench')
    for size in ({}, {'width': '800', 'height': '600'}):
        out['bench36-%s' % size.get('width', 'default')] = (bench, urlencode(dict(
            target='servers.host0[0-8].cpu.*', now=now, until=now, format='png',
            **{'from': str(now - 60000)}, **size)))
    out['bench200'] = (bench, urlencode({'target': 'servers.*.cpu.*', 'from': now - 86400,
                                         'until': now, 'now': now, 'format': 'png'}))
    return out


def drawn(body: bytes, svg: bool) -> bytes:
    """What is compared: the SVG text, or a PNG's mode, size and RGBA pixels."""
    if svg:
        return body
    from PIL import Image
    image = Image.open(io.BytesIO(body))
    head = ('%s %dx%d\n' % (image.mode, image.size[0], image.size[1])).encode()
    return head + image.convert('RGBA').tobytes()


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('mode', choices=('save', 'check'))
    parser.add_argument('folder', type=Path)
    parser.add_argument('--workdir', type=Path,
                        default=Path(tempfile.gettempdir()) / 'graph-pixels-trees')
    args = parser.parse_args(argv)
    args.workdir.mkdir(parents=True, exist_ok=True)
    args.folder.mkdir(parents=True, exist_ok=True)
    bad = svg_diffs = 0
    graphs = cases(args.workdir)
    for name, (app, query) in graphs.items():
        svg = name.endswith('-svg')
        data = drawn(_get(app, query), svg)
        path = args.folder / (name + '.bin')
        if args.mode == 'save':
            path.write_bytes(data)
            continue
        if path.read_bytes() == data:
            continue
        if svg:
            svg_diffs += 1
            print('svg text differs: %s' % name)
        else:
            bad += 1
            print('PIXELS DIFFER: %s' % name)
    print('%d graphs %s; %d PNGs differ, %d SVG texts differ' % (
        len(graphs), 'saved' if args.mode == 'save' else 'compared', bad, svg_diffs))
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
