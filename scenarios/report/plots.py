"""The figures of a run, as PNG and SVG (matplotlib, no pyplot state: safe in notebooks).

Each ``fig_*`` function takes a :class:`scenarios.results.tables.Results` and returns a matplotlib
``Figure`` (or ``None`` when the run has nothing to show, e.g. no queue samples); every figure
has a title and axes labelled with units. :func:`plot_all` writes them all.

- ``fct_cdf``: CDF of message completion times per phase (us).
- ``link_utilisation``: per-tier heatmaps of link utilisation over the run (%), upward and
  downward directions; dense tiers (leaf-spine, spine-core) as lower x upper node matrices.
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
while the graph is unchanged (``plots/.topology.key``).
"""

from __future__ import annotations

import hashlib
import json
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from podsim.scenarios.results.tables import Results

__all__ = [
    "FIGURES",
    "MAX_POINTS",
    "SAVE_RC",
    "fig_fct_cdf",
    "fig_gpu_bandwidth",
    "fig_gpu_idle",
    "fig_layer_timeline",
    "fig_link_utilisation",
    "fig_queue_depth",
    "graph_key",
    "plot_all",
]

_PHASE_COLOURS = {
    "dispatch": "tab:blue",
    "compute": "tab:green",
    "combine": "tab:orange",
    "other": "tab:purple",
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


def _title(res: Results, what: str) -> str:
    s = res.summary
    name = s.get("scenario", "run")
    variant = f" [{s['variant']}]" if s.get("variant") else ""
    return f"{what}\n{name}{variant}, {s.get('engine', '')} engine"


def fig_fct_cdf(res: Results) -> Figure | None:
    """CDF of message completion times (post to last byte delivered), per phase."""
    m = res.messages
    m = m[np.isfinite(m["fct_s"]) & (m["hop"] != "local")]
    if m.empty:
        return None
    fig = Figure(figsize=(7, 4.5))
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
    ax.legend(loc="lower right")
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
    """Per tier: utilisation (%) of every link direction, as heatmaps."""
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
    fig = Figure(figsize=(10, 2.6 * len(tiers) + 1.2))
    vmax = max(100.0, float(np.nanmax(links["utilisation"].to_numpy(float) * 100, initial=0)))
    im = None
    # fixed margins: constrained layout costs more than all the drawing here
    grid = fig.add_gridspec(
        len(tiers),
        2,
        left=0.08,
        right=0.86,
        top=1 - 0.9 / fig.get_figheight(),
        bottom=0.55 / fig.get_figheight(),
        hspace=0.7,
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
                im = ax.imshow(
                    mat, aspect="auto", cmap="viridis", vmin=0, vmax=vmax, interpolation="nearest"
                )
                ax.set_title(f"{tier} {label}", fontsize=9)
                ax.set_ylabel(f"{roles.get(rows[0], 'lower')} index" if rows else "")
                ax.set_xlabel(f"{roles.get(cols[0], 'upper')} index" if cols else "")
        else:
            ax = fig.add_subplot(grid[i, :])
            ports = sorted(set(up["u"]) | set(down["v"]), key=_natural)
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
            ax.set_xlabel(f"{tier}: lower-tier port index ({len(ports)} ports)")
            ax.set_title(f"{tier}", fontsize=9)
    from matplotlib.ticker import MaxNLocator

    for ax in fig.axes:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        if ax.get_ylabel():
            ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    if im is not None:
        cbar = fig.colorbar(im, cax=fig.add_axes((0.9, 0.15, 0.02, 0.7)))
        cbar.set_label("utilisation over the run (%)")
    fig.suptitle(_title(res, "Link utilisation by tier"), fontsize=10)
    return fig


def _natural(name: str) -> tuple[Any, ...]:
    import re

    return tuple(int(t) if t.isdigit() else t for t in re.split(r"(\d+)", str(name)))


#: a port counts as contended when its queue held more than this many MTU-sized packets at
#: some sample: one packet on the wire and one waiting is normal store-and-forward, more is a
#: queue building [E]
CONTENDED_MTUS = 2


def contended_ports(res: Results, hottest: int = 8) -> tuple[list[str], float]:
    """(ports, threshold in bytes): at most ``hottest`` ports whose queue peaked above
    :data:`CONTENDED_MTUS` MTUs, ranked by queued byte-seconds (the time integral of the
    depth, so a long queue outranks a brief spike of the same height), ties by peak and
    name. Empty when no port's queue built up."""
    q = res.queues
    nic = ((res.scenario or {}).get("cluster") or {}).get("nic") or {}
    try:
        from podsim.fabric.units import parse_size

        mtu = float(parse_size(nic.get("mtu", 4096)))
    except (TypeError, ValueError):
        mtu = 4096.0
    threshold = CONTENDED_MTUS * mtu
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
    return [str(p) for p in agg.index[:hottest]], threshold


def fig_queue_depth(res: Results, hottest: int = 8) -> Figure | None:
    """Queue depth over time of the most contended ports (:func:`contended_ports`); when no
    queue built up beyond :data:`CONTENDED_MTUS` MTUs the figure says so (that is a finding);
    None when the run recorded no queue samples."""
    if res.queues.empty:
        return None
    top, threshold = contended_ports(res, hottest)
    q = res.queues
    fig = Figure(figsize=(9, 4.5))
    ax = fig.add_subplot()
    if not top:
        ax.text(
            0.5,
            0.5,
            f"no port's queue held more than {CONTENDED_MTUS} MTU "
            f"({threshold / 1024:.0f} KiB): no contention to show",
            ha="center",
            va="center",
            transform=ax.transAxes,
        )
        ax.set_axis_off()
        ax.set_title(_title(res, "Queue depth of the most contended ports"))
        _margins(fig)
        return fig
    for p in top:
        s = q[q["port"].astype(str) == p]
        t, d = _thin_series(s["time_s"].to_numpy(float), s["depth_bytes"].to_numpy(np.int64))
        ax.plot(t * 1e6, d / 1024, label=str(p), drawstyle="steps-post")
    ax.axhline(threshold / 1024, color="0.5", lw=0.8, ls=":")
    ax.set_xlabel("simulated time (us)")
    ax.set_ylabel("queue depth (KiB)")
    ax.grid(alpha=0.3)
    # outside the axes: a legend inside covered the only spike of a run
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    ax.set_title(
        _title(
            res,
            f"Queue depth of the {len(top)} most contended ports "
            f"(peak above {CONTENDED_MTUS} MTU = {threshold / 1024:.0f} KiB, dotted)",
        )
    )
    _margins(fig)
    return fig


def fig_gpu_bandwidth(res: Results) -> Figure | None:
    """Per-GPU bandwidth of each communication phase (bytes sent / own phase time)."""
    bw = res.gpu_bandwidth().dropna()
    if bw.empty:
        return None
    order = {"dispatch": 0, "combine": 1}  # in the order they run, not alphabetical
    phases = sorted(dict.fromkeys(bw["phase"]), key=lambda p: order.get(str(p), 2))
    ranks = sorted(set(bw["rank"]))
    fig = Figure(figsize=(max(6.0, 0.25 * len(ranks) * len(phases) + 2), 4.5))
    ax = fig.add_subplot()
    width = 0.8 / len(phases)
    x = np.arange(len(ranks))
    for k, ph in enumerate(phases):
        s = bw[bw["phase"] == ph].set_index("rank")["bw_Bps"].reindex(ranks)
        ax.bar(
            x + k * width - 0.4 + width / 2,
            s.to_numpy() / 1e9,
            width,
            label=str(ph),
            color=_PHASE_COLOURS.get(str(ph)),
        )
    if len(ranks) <= 32:
        ax.set_xticks(x, [str(r) for r in ranks])
    else:  # a label per rank is unreadable and slow to lay out
        from matplotlib.ticker import MaxNLocator

        ax.xaxis.set_major_locator(MaxNLocator(16, integer=True))
    ax.set_xlabel("rank (GPU)")
    ax.set_ylabel("bandwidth per GPU (GB/s)")
    ax.grid(axis="y", alpha=0.3)
    # outside the axes: inside, the legend hid the bars of the last ranks
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    ax.set_title(_title(res, "Per-GPU all-to-all bandwidth (bytes sent / own phase time)"))
    _margins(fig, right=1.1)
    return fig


def fig_layer_timeline(res: Results) -> Figure | None:
    """Dispatch / compute / combine per rank for the slowest (step, layer)."""
    ph = res.phases
    if ph.empty:
        return None
    span = ph.groupby(["step", "layer"]).agg(t0=("start_s", "min"), t1=("end_s", "max"))
    span["d"] = span["t1"] - span["t0"]
    step, layer = span["d"].idxmax()
    sel = ph[(ph["step"] == step) & (ph["layer"] == layer)]
    t0 = float(span.loc[(step, layer), "t0"])
    ranks = sorted(set(sel["rank"]))
    fig = Figure(figsize=(9, max(3.0, 0.22 * len(ranks) + 1.5)))
    ax = fig.add_subplot()
    from matplotlib.collections import PolyCollection
    from matplotlib.patches import Patch

    handles = []
    for p, grp in sel.groupby("phase", sort=False):
        # one collection of bars per phase: one artist however many ranks there are
        x0 = (grp["start_s"].to_numpy(float) - t0) * 1e6
        x1 = (grp["end_s"].to_numpy(float) - t0) * 1e6
        y = grp["rank"].to_numpy(float)
        verts = np.stack(
            [np.c_[x0, y - 0.4], np.c_[x0, y + 0.4], np.c_[x1, y + 0.4], np.c_[x1, y - 0.4]], axis=1
        )
        colour = _PHASE_COLOURS.get(str(p), "grey")
        ax.add_collection(PolyCollection(verts, facecolors=colour, edgecolors="none"))
        handles.append(Patch(color=colour, label=str(p)))
    x_end = float((sel["end_s"].max() - t0) * 1e6)
    ax.set_xlim(0.0, x_end * 1.02 if x_end > 0 else 1.0)
    ax.set_ylim(max(ranks) + 0.6, min(ranks) - 0.6)  # rank 0 on top
    ax.set_xlabel(f"time since the layer started (us; layer start at {t0 * 1e6:.3f} us)")
    ax.set_ylabel("rank")
    ax.grid(axis="x", alpha=0.3)
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    ax.set_title(_title(res, f"Timeline of step {step}, layer {layer} (the slowest)"))
    _margins(fig, right=1.1)
    return fig


def fig_gpu_idle(res: Results) -> Figure | None:
    """Per GPU over the run (us): idle (the run's span minus the GPU's expert compute), bubble
    (communication time beyond the fastest rank's in the same phase: waiting for others) and
    tail (idle at the end, waiting for the last rank); stragglers marked. From
    ``res.analysis["gpu_time"]``, or computed from the phases when the run was not analysed."""
    g = res.analysis.get("gpu_time")
    if g is None:
        if res.phases.empty:
            return None
        from podsim.scenarios.results.analysis import gpu_idle

        g = gpu_idle(res.phases)
    if g.empty:
        return None
    ranks = g["rank"].to_numpy()
    x = np.arange(len(ranks))
    fig = Figure(figsize=(min(16.0, max(6.0, 0.5 * len(ranks) + 2)), 4.5))
    ax = fig.add_subplot()
    width = 0.8 / 3
    series = (("idle_s", "idle (not computing)", "tab:grey"),
              ("bubble_s", "bubble (waiting on others)", "tab:red"),
              ("tail_s", "tail (waiting for the last rank)", "tab:olive"))  # fmt: skip
    for k, (col, label, colour) in enumerate(series):
        ax.bar(x + (k - 1) * width, g[col].to_numpy(float) * 1e6, width, label=label,
               color=colour)  # fmt: skip
    slow = res.analysis.get("stragglers")
    if slow is not None and len(slow):
        at = np.flatnonzero(np.isin(ranks, slow["rank"].to_numpy()))
        top = g["idle_s"].to_numpy(float)[at] * 1e6
        ax.plot(x[at], top * 1.04, "v", color="black", label="straggler")
    if len(ranks) <= 32:
        ax.set_xticks(x, [str(r) for r in ranks])
    else:
        from matplotlib.ticker import MaxNLocator

        ax.xaxis.set_major_locator(MaxNLocator(16, integer=True))
    ax.set_xlabel("rank (GPU)")
    ax.set_ylabel("time over the run (us)")
    ax.grid(axis="y", alpha=0.3)
    peak = float(g[["idle_s", "bubble_s", "tail_s"]].to_numpy(float).max()) * 1e6
    ax.set_ylim(0.0, peak * 1.3 if peak > 0 else 1.0)  # room for the legend above the bars
    ax.legend(fontsize=8, ncol=4, loc="upper center")
    ax.set_title(_title(res, "Per-GPU idle and bubble time"))
    _margins(fig)
    return fig


FIGURES: dict[str, Callable[..., Figure | None]] = {
    "fct_cdf": fig_fct_cdf,
    "link_utilisation": fig_link_utilisation,
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
    dpi: int = 120,
) -> list[Path]:
    """Write every figure as ``out_dir/NAME.{png,svg}``; returns the files written."""
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
                fig.savefig(p, dpi=dpi)
                written.append(p)
        if graph is not None:
            written += _draw_topology(graph, out, formats, dpi)
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


def _draw_topology(graph: Any, out: Path, formats: Sequence[str], dpi: int) -> list[Path]:
    """``topology.<fmt>``: one drawing saved in every format, skipped while the files of the
    same graph are there (``.topology.key`` holds the graph's fingerprint)."""
    from podsim.scenarios.build.cluster import topology_io

    draw_topology = topology_io("draw_topology")
    if draw_topology is None:
        return []
    paths = [out / f"topology.{fmt}" for fmt in formats]
    stamp = out / ".topology.key"
    key = f"{graph_key(graph)} dpi={dpi}"
    fresh = stamp.is_file() and stamp.read_text() == key and all(p.is_file() for p in paths)
    if not fresh:
        stamp.unlink(missing_ok=True)
        draw_topology(graph, [str(p) for p in paths], dpi=dpi)
        stamp.write_text(key)
    return paths
