"""The Agg canvas PNG answers are drawn on: one renderer a thread and image size, reused
across requests, which keeps text measured and glyphs rendered once.

matplotlib keeps its text metrics cache per renderer, so a fresh renderer a request
measured every tick label again. The renderer here also keeps, for plain (non-math)
text, each string's glyph layout and each glyph's coverage bitmap at each 1/64-pixel
offset: FreeType's bitmap of a glyph moved by whole pixels is the same bitmap moved, so
a cached one drawn at the new whole-pixel place gives the very pixels matplotlib's own
``draw_text`` gives (tests/webapp/graphs/test_graph_speed.py draws both and compares).
Where this matplotlib lacks the glyph calls it is built on (before 3.11), or for math
text, ``draw_text`` is matplotlib's own.
"""

from __future__ import annotations

import functools
import math
import threading
from typing import Any

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg, RendererAgg, get_hinting_flag

# Agg pixel buffers kept for the next graph of the same size on the same thread, up to
# this many pixels each (8 kept: 8 MB at most at this bound)
REUSED_RENDERER_PIXELS = 250_000
# entries kept by one renderer before its caches start again from empty
MAX_LAYOUTS = 2048
MAX_GLYPHS = 8192
# matplotlib's classes and functions seen as untyped (its stubs leave these unannotated)
_AGG: Any = RendererAgg
_CANVAS: Any = FigureCanvasAgg
_HINTING: Any = get_hinting_flag


def glyph_api() -> bool:
    """Whether this matplotlib draws text glyph by glyph (3.11+), which the caches mirror."""
    return hasattr(RendererAgg, '_draw_text_glyphs_and_boxes') and \
        hasattr(RendererAgg, '_prepare_font')


class CachingRenderer(RendererAgg):
    """RendererAgg whose plain text drawing reuses layouts and glyph bitmaps."""

    def __init__(self, width: int, height: int, dpi: float) -> None:
        _AGG.__init__(self, width, height, dpi)
        self.layouts: dict[tuple[Any, ...], tuple[Any, ...]] = {}
        self.glyphs: dict[tuple[Any, ...], tuple[Any, ...]] = {}

    def draw_text(self, gc: Any, x: float, y: float, s: str, prop: Any, angle: float,
                  ismath: Any = False, mtext: Any = None) -> None:
        features = mtext.get_fontfeatures() if mtext is not None else None
        language = mtext.get_language() if mtext is not None else None
        if ismath or not glyph_api() or not _hashable((features, language)):
            _AGG.draw_text(self, gc, x, y, s, prop, angle, ismath, mtext)
            return
        flags = _HINTING()
        size = prop.get_size_in_points()
        # what picks the font (FontProperties' own hash fields, taken now: a prop may be
        # changed later); the font is looked up and sized only to lay out a new text
        key = (tuple(prop.get_family()), prop.get_slant(), prop.get_variant(),
               prop.get_weight(), prop.get_stretch(), size, prop.get_file(),
               prop.get_math_fontfamily(), self.dpi, s, features, language, flags)
        cached = self.layouts.get(key)
        if cached is None:
            if len(self.layouts) >= MAX_LAYOUTS:
                self.layouts.clear()
            font = _AGG._prepare_font(self, prop)
            items = [(item.ft_object, item.glyph_index, item.x, item.y)
                     for item in font._layout(s, flags=flags, features=features,
                                              language=language)]
            cached = self.layouts[key] = (font, items)
        self._draw_glyphs(gc, x, y, angle, size, flags, cached[1])

    def _draw_glyphs(self, gc: Any, x: float, y: float, angle: float, size: float,
                     flags: Any, items: list[tuple[Any, ...]]) -> None:
        """matplotlib's ``_draw_text_glyphs_and_boxes`` for plain text (no slant, no
        extension, no boxes), each glyph bitmap rendered once per sub-pixel offset."""
        from matplotlib.ft2font import RenderMode
        cos = math.cos(math.radians(angle))
        sin = math.sin(math.radians(angle))
        antialiased = gc.get_antialiased()
        height = int(self.height)
        for font, glyph_index, dx, dy in items:
            tx = round(0x40 * (x + dx * cos - dy * sin))
            ty = round(0x40 * (self.height - y + dx * sin + dy * cos))
            key = (id(font), size, self.dpi, glyph_index, flags, antialiased, angle,
                   tx & 63, ty & 63)
            cached = self.glyphs.get(key)
            if cached is None or cached[0] is not font:
                font.set_size(size, self.dpi)
                font._set_transform(
                    (0x10000 * np.array([[cos, -sin], [sin, cos]])
                     @ [[1, 0], [0, 1]]).round().astype(int), [tx, ty])
                bitmap = font._render_glyph(
                    glyph_index, flags,
                    RenderMode.NORMAL if antialiased else RenderMode.MONO)
                buffer = bitmap.buffer
                if not antialiased:
                    buffer *= 0xff
                if len(self.glyphs) >= MAX_GLYPHS:
                    self.glyphs.clear()
                cached = self.glyphs[key] = (font, buffer, bitmap.left - (tx >> 6),
                                             bitmap.top - (ty >> 6))
            _font, buffer, left, top = cached
            self._renderer.draw_text_image(
                buffer, left + (tx >> 6), height - (top + (ty >> 6)) + buffer.shape[0], 0, gc)


def _hashable(value: Any) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True


@functools.lru_cache(maxsize=8)
def thread_renderer(thread: int, width: int, height: int, dpi: float) -> CachingRenderer:
    """The renderer of one thread and image size."""
    del thread      # part of the key only: a renderer is never shared between threads
    return CachingRenderer(width, height, dpi)


class ReusingCanvas(FigureCanvasAgg):
    """FigureCanvasAgg drawing into this thread's renderer of its size (cleared first by
    FigureCanvasAgg.draw, as a new one would be blank)."""

    def get_renderer(self) -> Any:
        width, height = self.get_width_height(physical=True)
        if width * height > REUSED_RENDERER_PIXELS:
            return _CANVAS.get_renderer(self)
        self.renderer = thread_renderer(threading.get_ident(), width, height,
                                        self.figure.dpi)
        self._lastKey = (width, height, self.figure.dpi)  # type: ignore[assignment]
        return self.renderer


class PreparedFigure:
    """A Figure with one Axes (a line graph's) kept for one thread and graph look, reused
    by the next graph of that look on that thread instead of building a Figure, an Axes
    and its Tick objects again (~4 ms, and ~10 ms of ticks a request for the bench's
    36-series graph).

    ``begin`` hands out the Axes as a fresh one would be for what a line graph sets:
    every artist, legend and title a graph added is removed, data limits, autoscaling,
    locators, formatters, axis-below and the style cyclers are reset. What a graph sets
    on every draw (limits, tick values and labels, colours, margins) is set again by it;
    what it sets once for its look (tick colours and size, fonts, time zone) is part of
    the key, so a kept Axes already has it (``styled``). Only a graph with nothing else
    (no second axis, log scale, hidden or moved axes, axis titles) is drawn on one: the
    caller decides from the graph's options. A graph that fails half-way leaves its
    figure unclean, and the next one on the thread builds a new figure.
    """

    def __init__(self, width: int, height: int, dpi: float) -> None:
        self.size = (width / dpi, height / dpi)
        self.dpi = dpi
        self.figure: Any = None
        self.axes: Any = None
        self.styled = False
        self.clean = False
        self._defaults: list[tuple[Any, ...]] = []
        self._axis_below: Any = None
        # collections a graph draws every time (its lines, the two grids), made by the
        # first graph and given the next graph's segments and colours instead of being
        # made again (~3 ms a graph); hidden until a graph uses them
        self.kept: dict[str, Any] = {}

    def begin(self, facecolor: Any, tz: Any) -> Any:
        """The Axes to draw on (call inside the graph's rc_context: the Axes' texts take
        its fonts when first made)."""
        if self.axes is None or not self.clean:
            self._build(tz)
        else:
            self._reset()
            self.styled = True
        self.clean = False
        self.figure.set_facecolor(facecolor)
        return self.axes

    def done(self) -> None:
        """The graph was drawn and saved: the figure may be reset for the next one."""
        self.clean = True

    def _build(self, tz: Any) -> None:
        from matplotlib.figure import Figure
        self.figure = Figure(figsize=self.size, dpi=self.dpi)
        ReusingCanvas(self.figure)
        ax = self.axes = self.figure.add_subplot(1, 1, 1)
        ax.xaxis_date(tz)
        self._defaults = [
            (axis, axis.major.locator, axis.major.formatter, axis.minor.locator,
             axis.minor.formatter, axis.isDefault_majloc, axis.isDefault_majfmt,
             axis.isDefault_minloc, axis.isDefault_minfmt)
            for axis in (ax.xaxis, ax.yaxis)]
        self._axis_below = ax.get_axisbelow()
        for axis in (ax.xaxis, ax.yaxis):
            _skip_unshown_layout(axis)
            _draw_ticks_directly(axis)
        self.styled = False
        self.kept = {}

    def _reset(self) -> None:
        from matplotlib.axes import _base
        from matplotlib.transforms import Bbox
        axes_base: Any = _base      # its style cyclers are private (not in its stubs)
        fig, ax = self.figure, self.axes
        kept = self.kept.values()
        for artist in list(ax._children):
            if any(artist is collection for collection in kept):
                artist.set_visible(False)
            else:
                artist.remove()
        for legend in list(fig.legends):
            legend.remove()
        if fig._suptitle is not None:
            fig._suptitle.remove()
        ax.dataLim.set_points(Bbox.null().get_points())
        ax.ignore_existing_data_limits = True
        ax.set_autoscale_on(True)
        ax._get_lines = axes_base._process_plot_var_args()
        ax._get_patches_for_fill = axes_base._process_plot_var_args('Polygon')
        for (axis, major_loc, major_fmt, minor_loc, minor_fmt, default_majloc,
             default_majfmt, default_minloc, default_minfmt) in self._defaults:
            axis.major.locator, axis.major.formatter = major_loc, major_fmt
            axis.minor.locator, axis.minor.formatter = minor_loc, minor_fmt
            axis.isDefault_majloc, axis.isDefault_majfmt = default_majloc, default_majfmt
            axis.isDefault_minloc, axis.isDefault_minfmt = default_minloc, default_minfmt
        ax.set_axisbelow(self._axis_below)


def _skip_unshown_layout(axis: Any) -> None:
    """Let ``axis`` skip placing its label and offset text while both are empty (as on a
    prepared Axes: no axis titles, formatters without offsets): matplotlib's Axis.draw
    measures every tick label twice more (~3 ms a graph) only to place those two texts,
    and an empty text draws nothing wherever it is."""
    def shown() -> bool:
        return bool(axis.label.get_text()) or bool(axis.major.formatter.get_offset())
    place_label = axis._update_label_position
    label_boxes = axis._get_ticklabel_bboxes

    def update_label_position(renderer: Any) -> None:
        if shown():
            place_label(renderer)

    def get_ticklabel_bboxes(ticks: Any, renderer: Any) -> Any:
        return label_boxes(ticks, renderer) if shown() else ([], [])
    axis._update_label_position = update_label_position
    axis._get_ticklabel_bboxes = get_ticklabel_bboxes


def _draw_ticks_directly(axis: Any) -> None:
    """Let ``axis`` draw its ticks' marks and labels with the renderer calls matplotlib's
    Tick, Line2D and Text ``draw`` make, without their per-draw work (~0.3 ms a tick):
    a label's place relative to its anchor (its layout: size, alignment, rotation) is
    measured once per text and look, a mark's gc is set as Line2D sets it. Any tick
    part this does not cover (grid lines, path effects, bbox patches, wrapped, math or
    multi-line text, dashed or non-marker lines, non-affine transforms) is drawn by
    matplotlib itself. tests/webapp/graphs/test_prepared_figure.py compares the pixels
    with matplotlib's own drawing."""
    offsets: dict[tuple[Any, ...], tuple[float, float]] = {}
    group = axis.draw.__module__         # the group name matplotlib's Axis.draw opens

    def draw(renderer: Any) -> None:
        if not axis.get_visible():
            return
        renderer.open_group(group, gid=axis.get_gid())
        ticks = axis._update_ticks()
        boxes1, boxes2 = axis._get_ticklabel_bboxes(ticks, renderer)
        for tick in ticks:
            if not tick.get_visible():
                tick.stale = False
                continue
            renderer.open_group(tick.__name__, gid=tick.get_gid())
            tick.gridline.draw(renderer)
            _draw_marks(tick.tick1line, renderer)
            tick.tick2line.draw(renderer)
            _draw_label(tick.label1, renderer, offsets)
            tick.label2.draw(renderer)
            renderer.close_group(tick.__name__)
            tick.stale = False
        axis._update_label_position(renderer)
        axis.label.draw(renderer)
        axis._update_offset_text_position(boxes1, boxes2)
        axis.offsetText.set_text(axis.major.formatter.get_offset())
        axis.offsetText.draw(renderer)
        renderer.close_group(group)
        axis.stale = False
    axis.draw = draw


def _plain(artist: Any) -> bool:
    """Whether ``artist`` draws with nothing around its own drawing: visible, not
    rasterized, no agg filter, no path effects, no sketch."""
    return bool(artist.get_visible()) and not artist.get_rasterized() and \
        artist.get_agg_filter() is None and not artist.get_path_effects() and \
        artist.get_sketch_params() is None


def _draw_marks(line: Any, renderer: Any) -> None:
    """Line2D.draw of a tick mark (a marker, no line): its one draw_markers call."""
    from matplotlib import cbook, colors
    marker = line._marker
    if not _plain(line) or line._lineStyles[line._linestyle] != '_draw_nothing' or \
            line.get_drawstyle() != 'default' or line.get_markevery() is not None or \
            line._subslice or not marker or line._markersize <= 0 or \
            marker.get_alt_path() is not None or cbook._str_equal(marker.get_marker(), ',') \
            or not line.get_transform().is_affine:
        line.draw(renderer)
        return
    if line._invalidy or line._invalidx:
        line.recache()
    tpath, affine = line._get_transformed_path().get_transformed_points_and_affine()
    if len(tpath.vertices):
        gc = renderer.new_gc()
        line._set_gc_clip(gc)
        gc.set_url(line.get_url())
        gc.set_linewidth(line._markeredgewidth)
        gc.set_antialiased(line._antialiased)
        edge = colors.to_rgba(line.get_markeredgecolor(), line._alpha)
        face = colors.to_rgba(line._get_markerfacecolor(), line._alpha)
        if cbook._str_equal(line._markeredgecolor, 'auto') and \
                not cbook._str_lower_equal(line.get_markerfacecolor(), 'none'):
            edge = edge[:3] + (face[3],)
        gc.set_foreground(edge, isRGBA=True)
        snap = marker.get_snap_threshold()
        if isinstance(snap, (int, float)):
            snap = renderer.points_to_pixels(line._markersize) >= snap
        gc.set_snap(snap)
        gc.set_joinstyle(marker.get_joinstyle())
        gc.set_capstyle(marker.get_capstyle())
        size = renderer.points_to_pixels(line._markersize)
        renderer.draw_markers(gc, marker.get_path(), marker.get_transform().scale(size),
                              tpath, affine.frozen(), face)
        gc.restore()
    line.stale = False


def _draw_label(text: Any, renderer: Any, offsets: dict[tuple[Any, ...], tuple[float, float]]
                ) -> None:
    """Text.draw of a one-line plain tick label: its one draw_text call, at its anchor
    plus the offset its layout gives (measured once per text, font and alignment)."""
    if renderer is not None:
        text._renderer = renderer
    content = text.get_text()
    if not _plain(text) or text._bbox_patch or text.get_wrap() or text.get_usetex() or \
            not content or '\n' in content or np.ma.is_masked(text._x) or \
            np.ma.is_masked(text._y):
        text.draw(renderer)
        return
    line, ismath = text._preprocess_math(content)
    if ismath:
        text.draw(renderer)
        return
    key = (content, text._fontproperties, text.get_rotation(), text.get_rotation_mode(),
           text.get_horizontalalignment(), text.get_verticalalignment(),
           text._linespacing, renderer.dpi)
    offset = offsets.get(key)
    if offset is None:
        info = text._get_layout(renderer)[1]
        if len(info) != 1:
            text.draw(renderer)
            return
        offset = offsets[key] = (float(info[0][2][0]), float(info[0][2][1]))
    posx, posy = text.get_transform().transform(
        (float(text.convert_xunits(text._x)), float(text.convert_yunits(text._y))))
    if not (math.isfinite(posx) and math.isfinite(posy)):
        text.draw(renderer)         # matplotlib skips it (and warns when infinite)
        return
    renderer.open_group('text', text.get_gid())
    from matplotlib import colors
    gc = renderer.new_gc()
    gc.set_foreground(colors.to_rgba(text.get_color()), isRGBA=True)
    gc.set_alpha(text.get_alpha())
    gc.set_url(text._url)
    gc.set_antialiased(text._antialiased)
    gc.set_snap(text.get_snap())
    text._set_gc_clip(gc)
    height = renderer.get_canvas_width_height()[1]
    at_y = posy + offset[1]
    renderer.draw_text(gc, posx + offset[0], height - at_y if renderer.flipy() else at_y,
                       line, text._fontproperties, text.get_rotation(), ismath=ismath,
                       mtext=text)
    gc.restore()
    renderer.close_group('text')
    text.stale = False


# figures kept at most (each ~1 MB of matplotlib objects, its pixels in the renderer)
PREPARED_FIGURES = 16


@functools.lru_cache(maxsize=PREPARED_FIGURES)
def thread_figure(thread: int, width: int, height: int, dpi: float,
                  look: tuple[Any, ...]) -> PreparedFigure:
    """The prepared line-graph figure of one thread, image size and ``look`` (what a
    graph styles once: fonts, tick colour and size, time zone)."""
    del thread, look    # parts of the key only: a figure is never shared between threads
    return PreparedFigure(width, height, dpi)
