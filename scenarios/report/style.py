"""One place for the figure limits: canvas size, dpi, font sizes, when a per-rank figure turns
into a summary, and the helpers that pick what a large figure shows.

Every run and study figure is saved at :data:`SAVE_DPI`, fits :data:`MAX_WIDTH_PX` x
:data:`MAX_HEIGHT_PX` (a slide; issue 19 asked for at most 1,600 x 1,000 px at 100 dpi) and has
no text smaller than :data:`MIN_FONT_PT` points (8 pt at 100 dpi is 11 px: readable on a slide
and in the HTML report). Figures are designed :data:`WIDTH_IN` wide so the report page (1,100 px,
``scenarios.report.html``) shows them at their own size, not scaled down.

Per-rank and per-port figures draw one bar or row per rank up to :data:`STRIP_MAX`; above it they
show a distribution over all ranks and the :data:`TOP_K` extremes at each end, and their title
says what is omitted (:func:`omission_note`). These are layout choices [E], not model constants.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure
from matplotlib.text import Text

__all__ = [
    "FONT_PT",
    "MAX_HEIGHT_PX",
    "MAX_WIDTH_PX",
    "MIN_FONT_PT",
    "SAVE_DPI",
    "STRIP_MAX",
    "TOP_K",
    "WIDTH_IN",
    "clamp_size",
    "extremes",
    "omission_note",
    "save_figure",
    "small_texts",
]

#: dots per inch of every saved PNG
SAVE_DPI = 100
#: zlib level of the saved PNGs (Pillow's default: 6). Level 3 is zlib's last fast level: the
#: same pixels in files about 4 % larger, for about a third less CPU encoding them (a run's 8
#: PNGs: 0.16 -> 0.11 s, 2026-12-05). A speed choice [E], not a model constant.
PNG_COMPRESS_LEVEL = 3
#: the largest canvas in pixels at :data:`SAVE_DPI`
MAX_WIDTH_PX = 1600
MAX_HEIGHT_PX = 1000
#: no text in a figure is smaller than this (points; 8 pt = 11 px at 100 dpi)
MIN_FONT_PT = 8.0
#: tick labels, legends and notes
FONT_PT = 9.0
#: the design width of a figure (inches; 1,000 px at 100 dpi, under the report's 1,100 px)
WIDTH_IN = 10.0
#: per-rank / per-port figures draw every rank up to this many, a summary above
STRIP_MAX = 32
#: ranks or ports shown at each end (slowest / fastest) in the summary form
TOP_K = 8


def save_figure(fig: Figure, path: str | Path, dpi: float = SAVE_DPI) -> None:
    """Save ``fig`` to ``path`` in the format its extension names, at ``dpi``; a PNG with
    :data:`PNG_COMPRESS_LEVEL`."""
    png = Path(path).suffix.lower() == ".png"
    kw = {"pil_kwargs": {"compress_level": PNG_COMPRESS_LEVEL}} if png else {}
    fig.savefig(path, dpi=dpi, **kw)


def clamp_size(width_in: float, height_in: float) -> tuple[float, float]:
    """``(width, height)`` in inches cut to the :data:`MAX_WIDTH_PX` x :data:`MAX_HEIGHT_PX`
    canvas at :data:`SAVE_DPI`."""
    return (
        min(float(width_in), MAX_WIDTH_PX / SAVE_DPI),
        min(float(height_in), MAX_HEIGHT_PX / SAVE_DPI),
    )


def extremes(values: Sequence[float] | np.ndarray, k: int = TOP_K) -> tuple[np.ndarray, np.ndarray]:
    """Positions of the ``k`` smallest and the ``k`` largest finite ``values`` (each sorted from
    the extreme inwards; ties broken by position, so the choice is stable). The two sets never
    overlap: with fewer than ``2 k`` values the largest set is what the smallest left."""
    v = np.asarray(values, dtype=float)
    idx = np.flatnonzero(np.isfinite(v))
    order = idx[np.argsort(v[idx], kind="stable")]
    low = order[:k]
    high = order[max(k, len(order) - k) :][::-1]
    return low, high


def omission_note(shown: int, total: int, what: str, detail: str = "") -> str:
    """``"showing 16 of 2,048 ranks: the 8 slowest and 8 fastest"`` (empty when all shown)."""
    if shown >= total:
        return ""
    return f"showing {shown:,} of {total:,} {what}" + (f": {detail}" if detail else "")


def small_texts(fig: Figure, minimum: float = MIN_FONT_PT) -> list[tuple[str, float]]:
    """``(text, size in pt)`` of every visible, non-empty text artist of ``fig`` smaller than
    ``minimum`` (draw the figure first so tick labels exist)."""
    return [
        (t.get_text(), float(t.get_fontsize()))
        for t in fig.findobj(Text)
        if t.get_visible() and t.get_text().strip() and t.get_fontsize() < minimum - 1e-9
    ]
