"""The figures of a run, as PNG and SVG (matplotlib, no pyplot state: safe in notebooks).

Each ``fig_*`` function takes a :class:`scenarios.results.tables.Results` and returns a matplotlib
``Figure`` (or ``None`` when the run has nothing to show, e.g. no queue samples); every figure
has a title and axes labelled with units. :func:`plot_all` writes them all.

- ``fct_cdf``: CDF of message completion times per phase (us).
- ``link_utilisation``: per-tier heatmaps of link utilisation over the run (%), upward and
  downward directions; dense tiers (leaf-spine, spine-core) as lower x upper node matrices.
- ``link_phases``: per tier, every link direction's utilisation while each phase runs (one row
  per phase and one for the whole run, one dot per link, the busiest named, contended links in
  red; ``links_by_phase``, :mod:`podsim.scenarios.results.phase_links`).
- ``queue_depth``: queue depth over time of the most contended ports (KiB vs us): ports whose
  queue held more than two MTUs, ranked by queued byte-seconds.
- ``gpu_bandwidth``: per-GPU bandwidth of each communication phase (GB/s, bytes the rank sent
  over its own phase time, mean over layers).
- ``layer_timeline``: dispatch / compute / combine bars per rank for the slowest layer (us).
- ``gpu_idle``: per-GPU idle, bubble and tail time over the run (us; the ``gpu_time`` table
  of :mod:`podsim.scenarios.results.analysis`), stragglers marked.
- ``topology``: the cluster drawn by :func:`podsim.fabric.topology.draw_topology`.

Speed (plots were most of a quickstart run's time): figures get fixed margins instead of
``tight_layout`` (which costs one extra full draw each), lines keep at most
:data:`MAX_POINTS` points per series (more than a figure is pixels wide; peaks of queue
series are kept), bar timelines are one collection per phase, SVG text is written as text
rather than glyph outlines, and the topology is drawn once for all formats and not again
while the graph is unchanged (``plots/.topology.key``; a run into an earlier result folder
starts from that folder's drawing, :func:`keep_topology`).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import textwrap
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from podsim.scenarios.report.style import (
    FONT_PT,
    SAVE_DPI,
    STRIP_MAX,
    TOP_K,
    WIDTH_IN,
    clamp_size,
    extremes,
    omission_note,
    save_figure,
)
from podsim.scenarios.results.phase_links import CONTENDED_MTUS, contention_threshold_bytes
from podsim.scenarios.results.tables import Results

__all__ = [
    "FIGURES",
    "MAX_POINTS",
    "SAVE_RC",
    "fig_fct_cdf",
    "fig_gpu_bandwidth",
    "fig_gpu_idle",
    "fig_layer_timeline",
    "fig_link_phases",
    "fig_link_utilisation",
    "fig_queue_depth",
    "graph_key",
    "keep_topology",
    "plot_all",
]

_PHASE_COLOURS = {
    "dispatch": "tab:blue",
    "compute": "tab:green",
    "combine": "tab:orange",
    "other": "tab:purple",
    "tp": "tab:red",
    "pp": "tab:brown",
    "dp": "tab:cyan",
}
_ROLE_LEVEL = {"gpu": 0, "nic": 0, "leaf": 1, "scaleup": 1, "spine": 2, "core": 3}

#: most points a line keeps per series (a figure is about 1000 pixels wide)
MAX_POINTS = 2000

#: rcParams while saving: SVG text as <text> (no glyph outlines: smaller, faster files)
SAVE_RC = {"svg.fonttype": "none"}


def _margins(
    fig: Figure, left: float = 0.85, right: float = 0.2, top: float = 0.75, bottom: float = 0.6
) -> None:
    """Fixed margins in inches, room for tick labels, axis labels and a two-line title
    (``tight_layout`` would cost a full extra draw per figure)."""
    w, h = fig.get_size_inches()
    fig.subplots_adjust(left=left / w, right=1 - right / w, top=1 - top / h, bottom=bottom / h)


def _thin_cdf(x_sorted: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The empirical CDF of sorted ``x`` as (x, F(x)), at most :data:`MAX_POINTS` points (evenly
    spaced ranks, the first and last kept)."""
    n = len(x_sorted)
    idx = np.arange(n)
    if n > MAX_POINTS:
        idx = np.unique(np.linspace(0, n - 1, MAX_POINTS).round().astype(int))
    return x_sorted[idx], (idx + 1) / n


def _thin_series(t: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A step series cut to at most :data:`MAX_POINTS` chunks, each shown at its first time
    with its largest value (so no peak is lost)."""
    n = len(t)
    if n <= MAX_POINTS:
        return t, y
    starts = np.linspace(0, n, MAX_POINTS, endpoint=False).astype(int)
    return t[starts], np.maximum.reduceat(y, starts)


def _title(res: Results, what: str, note: str = "") -> str:
    """Two lines (what, then run and engine), a third with ``note`` (what the figure omits)."""
    s = res.summary
    name = s.get("scenario", "run")
    variant = f" [{s['variant']}]" if s.get("variant") else ""
    head = f"{what}\n{name}{variant}, {s.get('engine', '')} engine"
    return head + ("\n" + textwrap.fill(note, NOTE_CHARS) if note else "")


#: characters per line of a figure's note (a 10 in figure at 12 pt holds about 110) [E]
NOTE_CHARS = 95


def _top_in(title: str, pt: float = 12.0) -> float:
    """Top margin (inches) that holds ``title``'s lines at ``pt`` points (1.25 line spacing)."""
    return 0.3 + (title.count("\n") + 1) * pt * 1.3 / 72


def _summary_axes(fig: Figure, top_in: float = 1.05, bottom_in: float = 0.95) -> tuple[Any, Any]:
    """Two axes side by side: the distribution over all ranks (left) and the extremes (right)."""
    w, h = fig.get_size_inches()
    grid = fig.add_gridspec(1, 2, width_ratios=[1.0, 1.5], left=0.8 / w, right=1 - 0.25 / w,
                            top=1 - top_in / h, bottom=bottom_in / h, wspace=0.3)  # fmt: skip
    return fig.add_subplot(grid[0, 0]), fig.add_subplot(grid[0, 1])


def _rank_ticks(ax: Any, x: np.ndarray, ranks: Sequence[Any]) -> None:
    """One tick per shown rank; the numbers turn upright when there are more than 16 or a
    rank number has more than two digits (so they fit at :data:`FONT_PT`)."""
    labels = [str(r) for r in ranks]
    upright = len(labels) > 16 or max(map(len, labels), default=0) > 2
    ax.set_xticks(x, labels, rotation=90 if upright else 0, fontsize=FONT_PT)


def _gap(ax: Any, at: float, omitted: int, vertical: bool = True) -> None:
    """A dotted line between the slowest and the fastest ranks, naming how many lie between."""
    text = f"{omitted:,} ranks\nnot shown"
    if vertical:
        ax.axvline(at, color="0.3", ls=":", lw=1.0)
        ax.text(at, 0.98, text, transform=ax.get_xaxis_transform(), ha="center", va="top",
                fontsize=FONT_PT, bbox={"fc": "white", "ec": "0.6", "pad": 2})  # fmt: skip
    else:
        ax.axhline(at, color="0.3", ls=":", lw=1.0)
        ax.text(0.99, at, text.replace("\n", " "), transform=ax.get_yaxis_transform(),
                ha="right", va="center", fontsize=FONT_PT,
                bbox={"fc": "white", "ec": "0.6", "pad": 2})  # fmt: skip


def fig_fct_cdf(res: Results) -> Figure | None:
    """CDF of message completion times (post to last byte delivered), per phase."""
    m = res.messages
    m = m[np.isfinite(m["fct_s"]) & (m["hop"] != "local")]
    if m.empty:
        return None
    fig = Figure(figsize=(8, 4.5))
    ax = fig.add_subplot()
    for ph, grp in m.groupby("phase", sort=False):
        x, y = _thin_cdf(np.sort(grp["fct_s"].to_numpy()) * 1e6)
        ax.step(
            x,
            y,
            where="post",
            label=f"{ph} ({len(grp)} messages)",
            color=_PHASE_COLOURS.get(str(ph)),
        )
    ax.set_xlabel("message completion time (us)")
    ax.set_ylabel("fraction of messages")
    ax.set_ylim(0, 1.01)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right", fontsize=FONT_PT)
    ax.set_title(_title(res, "Message completion time CDF"))
    _margins(fig)
    return fig


def _link_role(name: str, roles: dict[str, str]) -> int:
    return _ROLE_LEVEL.get(roles.get(name, ""), 0)


def _node_roles(links: pd.DataFrame, graph: Any) -> dict[str, str]:
    if graph is not None:
        return {n: str(r) for n, r in graph.nodes(data="role")}
    # without the graph, infer from names: nicX.pY / gpuX / su / leaf / spine / core
    roles: dict[str, str] = {}
    for n in pd.unique(links[["u", "v"]].to_numpy().ravel()):
        s = str(n)
        base = s.split(".")[-1] if s.startswith("p") and "." in s else s
        for key in ("leaf", "spine", "core"):
            if base.startswith(key):
                roles[s] = key
        if s.startswith("nic"):
            roles[s] = "nic"
        elif s.startswith("gpu"):
            roles[s] = "gpu"
        elif s.startswith("su"):
            roles[s] = "scaleup"
    return roles


def fig_link_utilisation(res: Results, graph: Any = None) -> Figure | None:
    """Per tier: utilisation (%) of every link direction. A dense tier (leaf-spine, spine-core)
    is a lower x upper node matrix per direction (cells averaged to fit when the matrix has
    more rows or columns than the axes has pixels); a sparse tier (nic-leaf) is an up/down strip
    of its ports up to :data:`~podsim.scenarios.report.style.STRIP_MAX` ports per direction,
    above that the distribution of its ports' utilisation with the hottest port named."""
    links = res.links
    if links.empty:
        return None
    roles = _node_roles(links, graph)
    tiers = [
        t
        for t in ("nic-leaf", "leaf-spine", "spine-core", "gpu-scaleup")
        if t in set(links["tier"])
    ]
    tiers += sorted(set(links["tier"]) - set(tiers))
    per_tier = min(2.6, (10.0 - 1.3) / len(tiers))
    fig = Figure(figsize=clamp_size(WIDTH_IN, per_tier * len(tiers) + 1.3))
    vmax = max(100.0, float(np.nanmax(links["utilisation"].to_numpy(float) * 100, initial=0)))
    im = None
    # fixed margins: constrained layout costs more than all the drawing here
    grid = fig.add_gridspec(
        len(tiers),
        2,
        left=0.08,
        right=0.86,
        top=1 - 0.9 / fig.get_figheight(),
        bottom=0.6 / fig.get_figheight(),
        hspace=0.9,
        wspace=0.25,
    )
    for i, tier in enumerate(tiers):
        grp = links[links["tier"] == tier]
        up_mask = [
            _link_role(u, roles) < _link_role(v, roles)
            or (_link_role(u, roles) == _link_role(v, roles) and u < v)
            for u, v in zip(grp["u"], grp["v"], strict=True)
        ]
        up = grp[np.asarray(up_mask, dtype=bool)]
        down = grp[~np.asarray(up_mask, dtype=bool)]
        lows = sorted(set(up["u"]), key=_natural)
        highs = sorted(set(up["v"]), key=_natural)
        dense = len(up) >= 0.5 * len(lows) * len(highs) and len(highs) > 1
        if dense:
            axu = fig.add_subplot(grid[i, 0])
            axd = fig.add_subplot(grid[i, 1])
            for ax, part, label, (rows, cols), (rk, ck) in (
                (axu, up, "up", (lows, highs), ("u", "v")),
                (axd, down, "down", (lows, highs), ("v", "u")),
            ):
                mat = np.full((len(rows), len(cols)), np.nan)
                ri = {n: k for k, n in enumerate(rows)}
                ci = {n: k for k, n in enumerate(cols)}
                for a, b, uval in zip(part[rk], part[ck], part["utilisation"], strict=True):
                    if a in ri and b in ci:
                        mat[ri[a], ci[b]] = 100 * uval
                box = ax.get_position()
                px = (box.height * fig.get_figheight() * SAVE_DPI,
                      box.width * fig.get_figwidth() * SAVE_DPI)  # fmt: skip
                shown, fits = _fit_matrix(mat, int(px[0]), int(px[1]))
                # extent keeps the axes in link indices when blocks of cells were averaged
                im = ax.imshow(shown, aspect="auto", cmap="viridis", vmin=0, vmax=vmax,
                               interpolation="nearest",
                               extent=(-0.5, len(cols) - 0.5, len(rows) - 0.5, -0.5))  # fmt: skip
                more = "" if fits else ", blocks of cells averaged to fit"
                ax.set_title(f"{tier} {label} ({len(rows)} x {len(cols)}{more})", fontsize=FONT_PT)
                ax.set_ylabel(f"{roles.get(rows[0], 'lower')} index" if rows else "",
                              fontsize=FONT_PT)  # fmt: skip
                ax.set_xlabel(f"{roles.get(cols[0], 'upper')} index" if cols else "",
                              fontsize=FONT_PT)  # fmt: skip
        else:
            ax = fig.add_subplot(grid[i, :])
            ports = sorted(set(up["u"]) | set(down["v"]), key=_natural)
            if len(ports) <= STRIP_MAX:
                pi = {n: k for k, n in enumerate(ports)}
                mat = np.full((2, len(ports)), np.nan)
                for a, uval in zip(up["u"], up["utilisation"], strict=True):
                    mat[0, pi[a]] = 100 * uval
                for b, uval in zip(down["v"], down["utilisation"], strict=True):
                    mat[1, pi[b]] = 100 * uval
                im = ax.imshow(
                    mat, aspect="auto", cmap="viridis", vmin=0, vmax=vmax, interpolation="nearest"
                )
                ax.set_yticks([0, 1], ["up", "down"])
                ax.set_xlabel(f"{tier}: lower-tier port index ({len(ports)} ports)",
                              fontsize=FONT_PT)  # fmt: skip
                ax.set_title(f"{tier}", fontsize=FONT_PT)
            else:
                u_all = grp["utilisation"].to_numpy(float) * 100
                lo = float(np.nanmin(u_all)) if np.isfinite(u_all).any() else 0.0
                top = float(np.nanmax(u_all)) if np.isfinite(u_all).any() else 0.0
                pad = max(0.5, 0.1 * (top - lo))  # the data's range, not 0-100 %
                lo, top = max(0.0, lo - pad), top + pad
                bins = np.linspace(lo, top, 41)
                peak = 0.0
                for part, label, colour, style in (
                    (up, "up", "tab:blue", "-"),
                    (down, "down", "tab:orange", "--"),  # dashed: visible where they coincide
                ):
                    vals = part["utilisation"].to_numpy(float) * 100
                    name = f"{label} ({len(vals):,} links)"
                    counts, _, _ = ax.hist(vals, bins=bins, histtype="step", lw=1.5, color=colour,
                                           ls=style, label=name)  # fmt: skip
                    peak = max(peak, float(np.max(counts, initial=0.0)))
                hot = grp.loc[grp["utilisation"].idxmax()]
                ax.set_xlim(lo, top)
                ax.set_ylim(0.0, 1.45 * peak if peak > 0 else 1.0)  # room for the legend on top
                ax.set_xlabel(f"{tier}: utilisation over the run (%)", fontsize=FONT_PT)
                ax.set_ylabel("links", fontsize=FONT_PT)
                ax.legend(fontsize=FONT_PT, loc="upper center", ncol=2)
                ax.set_title(
                    f"{tier}: distribution over its {len(grp):,} link directions (more than "
                    f"{STRIP_MAX} ports); hottest {hot['u']} -> {hot['v']} "
                    f"{100 * float(hot['utilisation']):.1f} %",
                    fontsize=FONT_PT,
                )
    from matplotlib.ticker import MaxNLocator

    for ax in fig.axes:
        ax.tick_params(labelsize=FONT_PT)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        if ax.get_ylabel():
            ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    if im is not None:
        cbar = fig.colorbar(im, cax=fig.add_axes((0.9, 0.15, 0.02, 0.7)))
        cbar.set_label("utilisation over the run (%)", fontsize=FONT_PT)
        cbar.ax.tick_params(labelsize=FONT_PT)
    fig.suptitle(_title(res, "Link utilisation by tier"), fontsize=10)
    return fig


def fig_link_phases(res: Results) -> Figure | None:
    """Per tier: every link direction's utilisation while each phase runs (one row per phase,
    one dot per link direction, in order of the run) beside its whole-run mean, the busiest link
    of each row named, contended links (queue above :data:`CONTENDED_MTUS` MTU while the phase
    ran) in red. None when the run measured no link per phase (``links_by_phase`` empty)."""
    from podsim.scenarios.results.phase_links import IDLE

    lbp = res.links_by_phase
    if lbp.empty:
        return None
    doc = res.summary.get("link_utilisation_by_phase") or {}
    threshold = doc.get("contention_threshold_bytes") or contention_threshold_bytes(res.scenario)
    queues = bool(doc.get("queues_modelled"))
    phases = [p for p in dict.fromkeys(lbp["phase"]) if p != IDLE]
    order = ("nic-leaf", "leaf-spine", "spine-core", "gpu-scaleup")
    present = set(lbp["tier"])
    tiers = [t for t in order if t in present] + sorted(present - set(order))
    rows = [*phases, "whole run"]
    per_tier = 0.35 * len(rows) + 0.75
    note = (
        f"red: contended (queue above {CONTENDED_MTUS} MTU = {threshold / 1024:.0f} KiB while "
        "the phase ran)"
        if queues
        else "this engine models no queues: contention not measured"
    )
    title = _title(res, "Link utilisation while each phase runs (one dot per link direction)",
                   note)  # fmt: skip
    top = _top_in(title, 10) + 0.2
    fig = Figure(figsize=clamp_size(WIDTH_IN, top + 0.6 + per_tier * len(tiers)))
    h = fig.get_figheight()
    grid = fig.add_gridspec(len(tiers), 1, left=1.3 / WIDTH_IN, right=1 - 2.6 / WIDTH_IN,
                            top=1 - top / h, bottom=0.6 / h, hspace=0.55)  # fmt: skip
    whole = res.links.set_index("link")["utilisation"]
    rng = np.random.default_rng(0)  # jitter only: the figure is the same every time
    hi = 100.0
    for i, tier in enumerate(tiers):
        ax = fig.add_subplot(grid[i, 0])
        grp = lbp[lbp["tier"] == tier]
        for y, ph in enumerate(rows):
            if ph == "whole run":
                names = pd.unique(grp["link"])
                vals = whole.reindex(names).to_numpy(float) * 100
                hot = np.zeros(len(vals), dtype=bool)
            else:
                part = grp[grp["phase"] == ph]
                names = part["link"].to_numpy()
                vals = part["utilisation"].to_numpy(float) * 100
                hot = part["max_queue_bytes"].to_numpy(float) > threshold if queues else (
                    np.zeros(len(vals), dtype=bool))  # fmt: skip
            ok = np.isfinite(vals)
            if not ok.any():
                continue
            jit = y + rng.uniform(-0.25, 0.25, len(vals))
            size = 12 if len(vals) <= 256 else 3
            ax.scatter(vals[ok & ~hot], jit[ok & ~hot], s=size, color="tab:blue", alpha=0.6,
                       linewidths=0)  # fmt: skip
            if hot.any():
                ax.scatter(vals[ok & hot], jit[ok & hot], s=size + 6, color="tab:red",
                           linewidths=0)  # fmt: skip
            k = int(np.nanargmax(np.where(ok, vals, -1.0)))
            hi = max(hi, float(vals[k]))
            label = f"max {vals[k]:.1f} % {names[k]}" if vals[k] > 0 else "every link idle"
            ax.text(1.01, y, label, transform=ax.get_yaxis_transform(), va="center", ha="left",
                    fontsize=FONT_PT)  # fmt: skip
        ax.set_yticks(range(len(rows)), rows, fontsize=FONT_PT)
        ax.set_ylim(len(rows) - 0.5, -0.5)
        ax.set_title(f"{tier} ({grp['link'].nunique():,} link directions)", fontsize=FONT_PT)
        ax.grid(axis="x", alpha=0.3)
        ax.tick_params(labelsize=FONT_PT)
    for ax in fig.axes:
        ax.set_xlim(0.0, hi * 1.03)
    fig.axes[-1].set_xlabel(
        "utilisation while the phase runs (%): bytes sent then / (rate x the phase's time)",
        fontsize=FONT_PT,
    )
    fig.suptitle(title, fontsize=10)
    return fig


def _fit_matrix(mat: np.ndarray, max_rows: int, max_cols: int) -> tuple[np.ndarray, bool]:
    """``mat`` with blocks of rows / columns averaged (NaN-aware) so it has at most
    ``max_rows`` x ``max_cols`` cells, one pixel each at least; and whether it fitted as is."""
    rows, cols = mat.shape
    fr = max(1, -(-rows // max(1, max_rows)))
    fc = max(1, -(-cols // max(1, max_cols)))
    if fr == 1 and fc == 1:
        return mat, True
    pad = np.full((-(-rows // fr) * fr, -(-cols // fc) * fc), np.nan)
    pad[:rows, :cols] = mat
    blocks = pad.reshape(pad.shape[0] // fr, fr, pad.shape[1] // fc, fc)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # an all-NaN block stays NaN
        return np.nanmean(blocks, axis=(1, 3)), False


def _natural(name: str) -> tuple[Any, ...]:
    import re

    return tuple(int(t) if t.isdigit() else t for t in re.split(r"(\d+)", str(name)))


def contended_ports(res: Results, hottest: int = 8) -> tuple[list[str], float]:
    """(ports, threshold in bytes): at most ``hottest`` ports whose queue peaked above
    :data:`CONTENDED_MTUS` MTUs, ranked by queued byte-seconds (the time integral of the
    depth, so a long queue outranks a brief spike of the same height), ties by peak and
    name. Empty when no port's queue built up."""
    q = res.queues
    threshold = contention_threshold_bytes(res.scenario)
    if q.empty:
        return [], threshold
    q = q.sort_values(["port", "time_s"], kind="stable")
    t = q["time_s"].to_numpy(float)
    d = q["depth_bytes"].to_numpy(float)
    same = q["port"].to_numpy() == np.roll(q["port"].to_numpy(), -1)
    dt = np.where(same, np.roll(t, -1) - t, 0.0)  # each sample holds until the next one
    stats = pd.DataFrame({"port": q["port"].to_numpy(), "area": d * dt, "peak": d})
    agg = stats.groupby("port").agg(area=("area", "sum"), peak=("peak", "max"))
    agg = agg[agg["peak"] > threshold]
    agg = agg.sort_values(["area", "peak"], ascending=[False, False], kind="stable")
    if hottest < 0:  # every contended port (the figure's note counts them)
        return [str(p) for p in agg.index], threshold
    return [str(p) for p in agg.index[:hottest]], threshold


def fig_queue_depth(res: Results, hottest: int = 8) -> Figure | None:
    """Queue depth over time of the most contended ports (:func:`contended_ports`); when no
    queue built up beyond :data:`CONTENDED_MTUS` MTUs the figure says so (that is a finding);
    None when the run recorded no queue samples."""
    if res.queues.empty:
        return None
    every, threshold = contended_ports(res, -1)
    top = every[:hottest]
    q = res.queues
    fig = Figure(figsize=(WIDTH_IN, 4.8))
    ax = fig.add_subplot()
    if not top:
        ax.text(
            0.5,
            0.5,
            f"no port's queue held more than {CONTENDED_MTUS} MTU "
            f"({threshold / 1024:.0f} KiB): no contention to show",
            ha="center",
            va="center",
            fontsize=FONT_PT + 1,
            transform=ax.transAxes,
        )
        ax.set_axis_off()
        ax.set_title(_title(res, "Queue depth of the most contended ports"))
        _margins(fig)
        return fig
    for k, p in enumerate(top):
        s = q[q["port"].astype(str) == p]
        t, d = _thin_series(s["time_s"].to_numpy(float), s["depth_bytes"].to_numpy(np.int64))
        # the ten colours repeat past ten ports: the next ten are dashed, then dotted
        style = ("-", "--", ":")[min(k // 10, 2)]
        ax.plot(t * 1e6, d / 1024, label=str(p), drawstyle="steps-post", ls=style)
    ax.axhline(threshold / 1024, color="0.5", lw=0.8, ls=":")
    ax.set_xlabel("simulated time (us)")
    ax.set_ylabel("queue depth (KiB)")
    ax.grid(alpha=0.3)
    # outside the axes: a legend inside covered the only spike of a run
    # a second legend column past 14 ports (outputs.hottest_ports may ask for more than 8)
    cols = 1 if len(top) <= 14 else 2
    ax.legend(fontsize=FONT_PT, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0,
              ncol=cols)  # fmt: skip
    ax.tick_params(labelsize=FONT_PT)
    note = omission_note(len(top), len(every), "contended ports",
                         "the most queued byte-seconds")  # fmt: skip
    title = _title(
        res,
        f"Queue depth of the {len(top)} most contended ports "
        f"(peak above {CONTENDED_MTUS} MTU = {threshold / 1024:.0f} KiB, dotted)",
        note,
    )
    ax.set_title(title)
    _margins(fig, right=1.7 if cols == 1 else 2.9, top=_top_in(title))
    return fig


def fig_gpu_bandwidth(res: Results) -> Figure | None:
    """Per-GPU bandwidth of each communication phase (bytes sent / own phase time): bars per
    rank up to :data:`~podsim.scenarios.report.style.STRIP_MAX` ranks; above, the distribution
    over all ranks (left) and bars of the ``TOP_K`` slowest and fastest ranks by their mean
    over phases (right), the title saying how many ranks are not shown."""
    bw = res.gpu_bandwidth().dropna()
    if bw.empty:
        return None
    order = {"dispatch": 0, "combine": 1}  # in the order they run, not alphabetical
    phases = sorted(dict.fromkeys(bw["phase"]), key=lambda p: order.get(str(p), 2))
    table = bw.pivot_table(index="rank", columns="phase", values="bw_Bps")[phases] / 1e9
    table = table.sort_index()
    what = "Per-GPU all-to-all bandwidth (bytes sent / own phase time)"
    if len(table) <= STRIP_MAX:
        fig = Figure(figsize=(WIDTH_IN, 4.5))
        ax = fig.add_subplot()
        _phase_bars(ax, table, phases)
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=FONT_PT)
        ax.set_title(_title(res, what))
        # outside the axes: inside, the legend hid the bars of the last ranks
        _margins(fig, right=1.2)
        return fig
    n = len(table)
    low, high = extremes(table.mean(axis=1).to_numpy(), TOP_K)
    sel = table.iloc[np.r_[low, high[::-1]]]
    note = omission_note(
        len(sel),
        n,
        "ranks on the right",
        f"the {len(low)} slowest and {len(high)} fastest by mean over phases",
    )
    title = _title(res, what, note)
    fig = Figure(figsize=(WIDTH_IN, 5.2))
    axd, ax = _summary_axes(fig, _top_in(title, 10) + 0.3)
    top = float(np.nanmax(table.to_numpy()))
    bins = np.linspace(0.0, top * 1.02 if top > 0 else 1.0, 41)
    peak = 0.0
    for ph in phases:
        colour = _PHASE_COLOURS.get(str(ph))
        counts, _, _ = axd.hist(table[ph].dropna().to_numpy(), bins=bins, histtype="step",
                                lw=1.5, color=colour, label=str(ph))  # fmt: skip
        peak = max(peak, float(np.max(counts, initial=0.0)))
    axd.set_ylim(0.0, 1.35 * peak if peak > 0 else 1.0)  # the legend above the distributions
    axd.set_xlabel("bandwidth per GPU (GB/s)")
    axd.set_ylabel("ranks")
    axd.set_title(f"all {n:,} ranks", fontsize=FONT_PT + 1)
    axd.legend(fontsize=FONT_PT, loc="upper center", ncol=min(3, len(phases)))
    _phase_bars(ax, sel, phases)
    _gap(ax, len(low) - 0.5, n - len(sel))
    ax.set_title(f"the {len(low)} slowest | the {len(high)} fastest", fontsize=FONT_PT + 1)
    ax.set_ylim(0.0, float(np.nanmax(sel.to_numpy())) * 1.3 or 1.0)
    for a in (axd, ax):
        a.tick_params(labelsize=FONT_PT)
    fig.suptitle(title, fontsize=10)
    return fig


def _phase_bars(ax: Any, table: pd.DataFrame, phases: Sequence[Any]) -> None:
    """Grouped bars: one group per rank (row of ``table``), one bar per phase (column, GB/s)."""
    width = 0.8 / len(phases)
    x = np.arange(len(table))
    for k, ph in enumerate(phases):
        ax.bar(x + k * width - 0.4 + width / 2, table[ph].to_numpy(float), width,
               label=str(ph), color=_PHASE_COLOURS.get(str(ph)))  # fmt: skip
    _rank_ticks(ax, x, list(table.index))
    ax.set_xlim(-0.6, len(table) - 0.4)
    ax.set_xlabel("rank (GPU)")
    ax.set_ylabel("bandwidth per GPU (GB/s)")
    ax.grid(axis="y", alpha=0.3)


def fig_layer_timeline(res: Results) -> Figure | None:
    """Dispatch / compute / combine per rank for the slowest (step, layer): one row per rank
    up to :data:`~podsim.scenarios.report.style.STRIP_MAX` ranks; above, the ``TOP_K`` ranks
    that finished the layer last and the ``TOP_K`` that finished first, with a marked gap for
    the ranks between (the title says how many, and when they finished)."""
    ph = res.phases
    if ph.empty:
        return None
    # a training step (phases carry the pass): the whole step, compute in the upper half of a
    # rank's row and communication in the lower half, since the two may overlap
    training = "pass" in ph.columns
    keys = ["step"] if training else ["step", "layer"]
    span = ph.groupby(keys).agg(t0=("start_s", "min"), t1=("end_s", "max"))
    span["d"] = span["t1"] - span["t0"]
    pick = span["d"].idxmax()
    step, layer = (pick, None) if training else pick
    sel = ph[ph["step"] == step] if training else ph[(ph["step"] == step) & (ph["layer"] == layer)]
    t0 = float(span.loc[pick, "t0"])
    ranks = sorted(set(sel["rank"]))
    note = ""
    gap_at = 0.0
    if len(ranks) <= STRIP_MAX:
        row = {r: float(r) for r in ranks}
        labels = None
    else:
        end = sel.groupby("rank")["end_s"].max()
        early, late = extremes(end.to_numpy(), TOP_K)
        shown = [end.index[i] for i in late] + [end.index[i] for i in early[::-1]]
        row = {r: float(k if k < len(late) else k + 1) for k, r in enumerate(shown)}
        labels = shown
        gap_at = float(len(late))  # the empty row between the last and the first to finish
        between = end.drop(index=shown)
        note = omission_note(
            len(shown), len(ranks), "ranks",
            f"the {len(late)} that finished last (top) and {len(early)} first; the other "
            f"{len(between):,} finished between {(between.min() - t0) * 1e6:.1f} and "
            f"{(between.max() - t0) * 1e6:.1f} us",
        )  # fmt: skip
        sel = sel[sel["rank"].isin(shown)]
    rows = len(row) + (1 if labels is not None else 0)
    fig = Figure(figsize=clamp_size(WIDTH_IN, max(3.5, 0.24 * rows + 2.0)))
    ax = fig.add_subplot()
    from matplotlib.collections import PolyCollection
    from matplotlib.patches import Patch

    handles = []
    for p, grp in sel.groupby("phase", sort=False):
        # one collection of bars per phase: one artist however many ranks there are
        x0 = (grp["start_s"].to_numpy(float) - t0) * 1e6
        x1 = (grp["end_s"].to_numpy(float) - t0) * 1e6
        y = grp["rank"].map(row).to_numpy(float)
        lo, hi = (y - 0.4, y + 0.4)
        if training:
            lo, hi = (y - 0.4, y) if p == "compute" else (y, y + 0.4)
        verts = np.stack([np.c_[x0, lo], np.c_[x0, hi], np.c_[x1, hi], np.c_[x1, lo]], axis=1)
        colour = _PHASE_COLOURS.get(str(p), "grey")
        ax.add_collection(PolyCollection(verts, facecolors=colour, edgecolors="none"))
        handles.append(Patch(color=colour, label=str(p)))
    x_end = float((sel["end_s"].max() - t0) * 1e6)
    ax.set_xlim(0.0, x_end * 1.02 if x_end > 0 else 1.0)
    ys = list(row.values())
    ax.set_ylim(max(ys) + 0.6, min(ys) - 0.6)  # rank 0 (or the last to finish) on top
    if labels is not None:
        ax.set_yticks(ys, [str(r) for r in labels], fontsize=FONT_PT)
        _gap(ax, gap_at, len(ranks) - len(labels), vertical=False)
    what = "step" if training else "layer"
    ax.set_xlabel(f"time since the {what} started (us; {what} start at {t0 * 1e6:.3f} us)")
    ax.set_ylabel("rank")
    ax.tick_params(labelsize=FONT_PT)
    ax.grid(axis="x", alpha=0.3)
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=FONT_PT)
    head = (
        f"Timeline of training step {step} (compute above, communication below)"
        if training
        else f"Timeline of step {step}, layer {layer} (the slowest)"
    )
    title = _title(res, head, note)
    ax.set_title(title)
    _margins(fig, right=1.2, top=_top_in(title))
    return fig


def fig_gpu_idle(res: Results) -> Figure | None:
    """Per GPU over the run (us): idle (the run's span minus the GPU's expert compute), bubble
    (communication time beyond the fastest rank's in the same phase: waiting for others) and
    tail (idle at the end, waiting for the last rank); stragglers marked. From
    ``res.analysis["gpu_time"]``, or computed from the phases when the run was not analysed.
    Bars per rank up to :data:`~podsim.scenarios.report.style.STRIP_MAX` ranks; above, box
    plots over all ranks (left) and the ``TOP_K`` ranks with the longest and the shortest
    bubble (right), the title saying how many are not shown."""
    g = res.analysis.get("gpu_time")
    if g is None:
        if res.phases.empty:
            return None
        from podsim.scenarios.results.analysis import gpu_idle

        g = gpu_idle(res.phases)
    if g.empty:
        return None
    series = (("idle_s", "idle (not computing)", "tab:grey"),
              ("bubble_s", "bubble (waiting on others)", "tab:red"),
              ("tail_s", "tail (waiting for the last rank)", "tab:olive"))  # fmt: skip
    slow = res.analysis.get("stragglers")
    slow_ranks = slow["rank"].to_numpy() if slow is not None and len(slow) else np.array([])
    what = "Per-GPU idle and bubble time"
    n = len(g)
    if n <= STRIP_MAX:
        fig = Figure(figsize=(WIDTH_IN, 4.5))
        ax = fig.add_subplot()
        _idle_bars(ax, g, series, slow_ranks)
        ax.legend(fontsize=FONT_PT, ncol=2, loc="upper center")
        ax.set_title(_title(res, what))
        _margins(fig)
        return fig
    low, high = extremes(g["bubble_s"].to_numpy(float), TOP_K)
    sel = g.iloc[np.r_[high, low[::-1]]]
    note = omission_note(
        len(sel), n, "ranks on the right",
        f"the {len(high)} that waited longest on others (bubble) and the {len(low)} that waited "
        f"least; stragglers in all: {len(slow_ranks):,}",
    )  # fmt: skip
    title = _title(res, what, note)
    fig = Figure(figsize=(WIDTH_IN, 5.6))
    axd, ax = _summary_axes(fig, _top_in(title, 10) + 0.3, 1.35)
    data = [g[c].to_numpy(float) * 1e6 for c, _, _ in series]
    box = axd.boxplot(data, patch_artist=True, widths=0.6)
    for patch, (_, _, colour) in zip(box["boxes"], series, strict=True):
        patch.set_facecolor(colour)
    axd.set_xticks([1, 2, 3], ["idle", "bubble", "tail"])
    axd.set_ylabel("time over the run (us)")
    axd.set_title(f"all {n:,} ranks", fontsize=FONT_PT + 1)
    _idle_bars(ax, sel, series, slow_ranks)
    _gap(ax, len(high) - 0.5, n - len(sel))
    ax.set_title("longest bubble | shortest bubble", fontsize=FONT_PT + 1)
    ax.set_ylabel("")
    handles, labels = ax.get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=FONT_PT, ncol=4, loc="lower center")
    for a in (axd, ax):
        a.tick_params(labelsize=FONT_PT)
    fig.suptitle(title, fontsize=10)
    return fig


def _idle_bars(ax: Any, g: pd.DataFrame, series: Sequence[tuple[str, str, str]],
               slow_ranks: np.ndarray) -> None:  # fmt: skip
    """Idle, bubble and tail bars (us) of the ranks of ``g`` in its row order, stragglers
    marked with a triangle."""
    ranks = g["rank"].to_numpy()
    x = np.arange(len(ranks))
    width = 0.8 / 3
    for k, (col, label, colour) in enumerate(series):
        ax.bar(x + (k - 1) * width, g[col].to_numpy(float) * 1e6, width, label=label,
               color=colour)  # fmt: skip
    if len(slow_ranks):
        at = np.flatnonzero(np.isin(ranks, slow_ranks))
        if len(at):
            top = g["idle_s"].to_numpy(float)[at] * 1e6
            ax.plot(x[at], top * 1.04, "v", color="black", label="straggler")
    _rank_ticks(ax, x, list(ranks))
    ax.set_xlim(-0.6, len(ranks) - 0.4)
    ax.set_xlabel("rank (GPU)")
    ax.set_ylabel("time over the run (us)")
    ax.grid(axis="y", alpha=0.3)
    peak = float(g[["idle_s", "bubble_s", "tail_s"]].to_numpy(float).max()) * 1e6
    ax.set_ylim(0.0, peak * 1.45 if peak > 0 else 1.0)  # room for the legend above the bars


FIGURES: dict[str, Callable[..., Figure | None]] = {
    "fct_cdf": fig_fct_cdf,
    "link_utilisation": fig_link_utilisation,
    "link_phases": fig_link_phases,
    "queue_depth": fig_queue_depth,
    "gpu_bandwidth": fig_gpu_bandwidth,
    "layer_timeline": fig_layer_timeline,
    "gpu_idle": fig_gpu_idle,
}


def plot_all(
    res: Results,
    out_dir: str | Path,
    *,
    formats: Sequence[str] = ("png", "svg"),
    graph: Any = None,
    hottest: int = 8,
    dpi: int = SAVE_DPI,
) -> list[Path]:
    """Write every figure as ``out_dir/NAME.{png,svg}``; returns the files written. The
    topology figure draws the fabric ``graph`` and, under it, one node's PCIe tree from the
    run's ``cluster.layout`` (:mod:`podsim.scenarios.report.node_figure`)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    # a run name with an emoji draws as a box; that is no reason to break --quiet
    with matplotlib.rc_context(SAVE_RC), warnings.catch_warnings():
        warnings.filterwarnings(
            "ignore", message="Glyph .* missing from font", category=UserWarning
        )
        for name, fn in FIGURES.items():
            if name == "link_utilisation":
                fig = fn(res, graph)
            elif name == "queue_depth":
                fig = fn(res, hottest)
            else:
                fig = fn(res)
            if fig is None:
                continue
            for fmt in formats:
                p = out / f"{name}.{fmt}"
                save_figure(fig, p, dpi)
                written.append(p)
        if graph is not None:
            written += _draw_topology(graph, out, formats, dpi, res.scenario)
    return written


def graph_key(graph: Any) -> str:
    """A fingerprint of a graph's nodes, edges and their attributes (what its drawing shows)."""
    doc = {
        "name": graph.graph.get("name"),
        "nodes": {str(n): d for n, d in graph.nodes(data=True)},
        "edges": {"|".join(sorted((str(u), str(v)))): d for u, v, d in graph.edges(data=True)},
    }
    text = json.dumps(doc, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


#: the fingerprint file of the topology drawing in a plots folder
_TOPOLOGY_KEY = ".topology.key"


def keep_topology(earlier: str | Path, out: str | Path, formats: Sequence[str]) -> None:
    """Copy the topology drawing of an earlier result's ``plots`` folder ``earlier``
    (``topology.<fmt>`` for each of ``formats`` and the ``.topology.key`` fingerprint) into
    ``out``, when all of them are there. :func:`plot_all` into ``out`` then keeps them if the
    fingerprint is its graph's and layout's, and draws the topology anew otherwise: a run into
    its earlier folder writes a fresh staging folder (podsim.scenarios.results.folder), which
    would draw the same topology again (0.15 s of CPU for a 128-host fat-tree)."""
    src, dst = Path(earlier), Path(out)
    names = [_TOPOLOGY_KEY, *(f"topology.{fmt}" for fmt in formats)]
    if not all((src / n).is_file() for n in names):
        return
    dst.mkdir(parents=True, exist_ok=True)
    for n in names:
        shutil.copyfile(src / n, dst / n)


def _draw_topology(
    graph: Any,
    out: Path,
    formats: Sequence[str],
    dpi: int,
    scenario: dict[str, Any] | None = None,
) -> list[Path]:
    """``topology.<fmt>``: the fabric and one node's PCIe tree (from ``scenario``'s
    ``cluster.layout``; a note when it sets none), one drawing saved in every format, skipped
    while the files of the same graph and layout are there (``.topology.key`` holds their
    fingerprint)."""
    from podsim.scenarios.build.cluster import topology_io
    from podsim.scenarios.report.node_figure import draw_node_pcie, node_tree
    from podsim.scenarios.report.style import MIN_FONT_PT

    draw_topology = topology_io("draw_topology")
    if draw_topology is None:
        return []
    paths = [out / f"topology.{fmt}" for fmt in formats]
    stamp = out / _TOPOLOGY_KEY
    cluster = (scenario or {}).get("cluster") or {}
    node = {k: cluster.get(k) for k in ("layout", "layout_params")}
    key = f"{graph_key(graph)} dpi={dpi} node={json.dumps(node, sort_keys=True, default=str)}"
    fresh = stamp.is_file() and stamp.read_text() == key and all(p.is_file() for p in paths)
    if not fresh:
        stamp.unlink(missing_ok=True)
        try:
            tree = node_tree(graph, scenario)
        except (ValueError, TypeError, KeyError):
            tree = None  # the run itself would have refused the layout; draw the fabric
        layout = str(cluster.get("layout") or "")
        draw_topology(graph, [str(p) for p in paths], dpi=dpi, min_font_pt=MIN_FONT_PT,
                      below=lambda ax: draw_node_pcie(ax, tree, layout),
                      save=save_figure)  # fmt: skip
        stamp.write_text(key)
    return paths
