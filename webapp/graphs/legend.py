"""Legend layout: as many columns as the longest label allows (graphite-web's rule), items
laid out row by row, so no label runs off the image."""

from __future__ import annotations

import functools
import math
from typing import Any

# matplotlib legend geometry, in font sizes: handle length + handle/text pad + column spacing
HANDLE_EM, PAD_EM, SPACING_EM = 1.5, 0.5, 1.2


def text_width(text: str, font_size: float) -> float:
    """Width in pixels (points at 72 dpi) of ``text`` in the current font (rcParams)."""
    from matplotlib import rcParams
    family = rcParams['font.family']
    return _text_width(text, float(font_size), tuple(family) if isinstance(family, list)
                       else (family,), str(rcParams['font.weight']),
                       str(rcParams['font.style']))


@functools.lru_cache(maxsize=4096)
def _text_width(text: str, font_size: float, family: tuple, weight: str, style: str) -> float:
    """Measured once per text and font: labels repeat across requests."""
    from matplotlib.font_manager import FontProperties
    from matplotlib.textpath import TextToPath
    width, _height, _descent = TextToPath().get_text_width_height_descent(
        text, FontProperties(family=list(family), size=font_size, weight=weight,
                             style=style), ismath=False)
    return float(width)


def legend_columns(labels: list[str], font_size: float, room: float) -> int:
    """Columns that fit ``room`` pixels when every column is as wide as the longest label."""
    if not labels:
        return 1
    longest = max(text_width(label, font_size) for label in labels)
    column = longest + (HANDLE_EM + PAD_EM + SPACING_EM) * font_size
    return max(1, min(len(labels), int(math.floor((room + SPACING_EM * font_size) / column))))


def row_major(items: list[Any], columns: int) -> list[Any]:
    """``items`` reordered so matplotlib's column-by-column legend shows them row by row
    (item i at row i // columns, column i % columns), as graphite-web lays them out."""
    return [item for column in range(columns) for item in items[column::columns]]


def legend_height(rows: int, font_size: float) -> float:
    """Pixels a legend of ``rows`` rows takes (matplotlib's row height plus padding)."""
    return rows * font_size * 1.5 + 8 if rows else 0.0


def add_legend(fig: Any, artists: list, labels: list[str], columns: int, font_size: float,
               fg: Any, anchor_y: float) -> None:
    """A legend of ``columns`` columns at the bottom centre of ``fig``, its bottom at
    ``anchor_y`` (figure fraction)."""
    fig.legend(row_major(artists, columns), row_major(labels, columns), loc='lower center',
               ncol=columns, frameon=False, fontsize=font_size, labelcolor=fg,
               borderaxespad=0.0, columnspacing=SPACING_EM, handlelength=HANDLE_EM,
               handletextpad=PAD_EM, bbox_to_anchor=(0.5, anchor_y))


def place_legend(fig: Any, artists: list, labels: list[str], font_size: float, fg: Any,
                 width: float, height: float, margin: float) -> float:
    """The legend of ``labels`` at the bottom of a ``width`` x ``height`` figure, inside
    its ``margin``, in as many columns as fit; returns the pixels it takes below the
    plot (its rows and a 4 px gap), 0 without labels."""
    if not labels:
        return 0.0
    columns = legend_columns(labels, font_size, width - 2 * margin)
    add_legend(fig, artists, labels, columns, font_size, fg, margin / float(height))
    return legend_height(math.ceil(len(labels) / columns), font_size) + 4
