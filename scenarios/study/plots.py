"""Study plots: cost vs performance with the Pareto front, stacked cost breakdown per variant,
and a sensitivity (tornado) plot of one metric against each swept parameter.

All take the study table (``results.parquet``: one row per point, ``param:<key>`` columns, the
performance metrics and ``capex.<category>`` columns) and return matplotlib figures;
:func:`save_study_figures` writes them as PNG and SVG, and :func:`study_figures` is what the HTML
report (scenarios/report.py) embeds. Sizes and fonts follow :mod:`podsim.scenarios.report.style`
(at most 1,600 x 1,000 px, no text under 8 pt); a study of many points labels only its Pareto
front and breaks down the cost of its cheapest and costliest variants, saying so.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from podsim.scenarios.cost.bom import CATEGORIES
from podsim.scenarios.report.style import (
    FONT_PT,
    MIN_FONT_PT,
    SAVE_DPI,
    TOP_K,
    WIDTH_IN,
    clamp_size,
    extremes,
    omission_note,
    save_figure,
)
from podsim.scenarios.study.store import PARAM_PREFIX

__all__ = [
    "fig_cost_breakdown",
    "fig_pareto",
    "fig_tornado",
    "pareto_front",
    "plot_study_folder",
    "read_study_folder",
    "save_study_figures",
    "study_figures",
    "variant_labels",
]

#: a Pareto plot labels every point up to this many points, only the front above [E]
LABEL_ALL_MAX = 12
#: the cost breakdown draws one bar per variant up to this many, the extremes above [E]
BREAKDOWN_MAX = 2 * TOP_K


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    return plt


def param_columns(df: pd.DataFrame) -> list[str]:
    return [c for c in df.columns if c.startswith(PARAM_PREFIX)]


def variant_labels(df: pd.DataFrame) -> list[str]:
    """One short label per row: ``leaf=value, ...`` of the swept parameters (last key part)."""
    cols = param_columns(df)
    if not cols:
        return [f"point {i}" for i in df.get("point", range(len(df)))]
    short = {c: _short_key(c[len(PARAM_PREFIX) :]) for c in cols}
    if len(set(short.values())) < len(short):  # ambiguous: keep the full key paths
        short = {c: c[len(PARAM_PREFIX) :] for c in cols}
    out = []
    for _, row in df.iterrows():
        out.append(", ".join(f"{short[c]}={row[c]}" for c in cols))
    return out


def _short_key(key: str) -> str:
    """``cluster.nic.multipath.paths`` -> ``paths``; ``cluster.nic.cc.name`` -> ``cc``."""
    parts = key.split(".")
    if len(parts) > 1 and parts[-1] in ("name", "kind", "model", "value"):
        return parts[-2]
    return parts[-1]


def pareto_front(
    cost: Sequence[float], perf: Sequence[float], maximize: bool = False
) -> np.ndarray:
    """Boolean mask of Pareto-optimal points: no other point is at most as costly and at least
    as good with one of the two strictly better. Lower cost is better; lower ``perf`` is better
    unless ``maximize``. NaNs are never on the front."""
    c = np.asarray(cost, float)
    p = np.asarray(perf, float)
    p = -p if maximize else p
    ok = np.isfinite(c) & np.isfinite(p)
    mask = np.zeros(len(c), bool)
    for i in np.flatnonzero(ok):
        dominated = ok & (c <= c[i]) & (p <= p[i]) & ((c < c[i]) | (p < p[i]))
        mask[i] = not dominated.any()
    return mask


def _money(x: float, digits: int) -> str:
    for scale, suffix in ((1e9, "B"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= scale:
            return f"${x / scale:.{digits}g}{suffix}"
    return f"${x:.{digits}g}"


def _money_formatter_class() -> type:
    from matplotlib.ticker import Formatter

    class Money(Formatter):  # type: ignore[misc]
        """Dollars as $k/$M/$B with as many digits as the ticks need to differ: a fixed 4
        digits printed $1.579M twice on an axis from $1.577M to $1.582M."""

        digits = 4

        def set_locs(self, locs: Any) -> None:
            super().set_locs(locs)
            vals = [float(v) for v in locs]
            self.digits = 4
            while self.digits < 12 and len({_money(v, self.digits) for v in vals}) < len(set(vals)):
                self.digits += 1

        def __call__(self, x: float, pos: int | None = None) -> str:
            return _money(x, self.digits)

    return Money


def _money_formatter() -> Any:
    return _money_formatter_class()()


def _axis_format(axis: Any, metric: str) -> None:
    """Dollars as $k/$M, seconds and bytes/s with engineering prefixes."""
    from matplotlib.ticker import EngFormatter

    if metric.endswith("_usd"):
        axis.set_major_formatter(_money_formatter())
    elif metric.endswith("_s"):
        axis.set_major_formatter(EngFormatter(unit="s"))
    elif metric.endswith("_Bps"):
        axis.set_major_formatter(EngFormatter(unit="B/s"))


def fmt_metric(metric: str, value: object) -> str:
    """``value`` of ``metric`` for a table, in the unit its name ends with (``_s`` seconds,
    ``_usd`` dollars, ``_Bps`` bytes/s, ``_bps`` bits/s, ``_w`` watts); other numbers with 4
    significant digits, anything else as text."""
    from podsim.fabric.units import fmt_rate, fmt_time
    from podsim.scenarios.cost.tables import usd_amount

    if isinstance(value, bool) or not isinstance(value, int | float | np.number):
        return str(value)
    x = float(value)
    if not np.isfinite(x):
        return str(x)
    if metric.endswith("_usd"):
        return usd_amount(x)
    if metric.endswith("_s"):
        return fmt_time(x)
    if metric.endswith("_Bps"):
        return f"{x / 1e9:.4g} GB/s"  # bandwidths in decimal GB/s, as NCCL and DeepEP print
    if metric.endswith("_bps"):
        return fmt_rate(x)
    if metric.endswith("_w"):
        return f"{x:,.0f} W"
    return f"{x:.4g}"


def _label(metric: str) -> str:
    units = {"_usd": " (USD)", "_s": " (s)", "_Bps": " (B/s)", "_w": " (W)", "_bps": " (bit/s)"}
    for suffix, unit in units.items():
        if metric.endswith(suffix):
            return metric + unit
    return metric


def fig_pareto(
    df: pd.DataFrame,
    metric: str,
    cost_metric: str = "capex_usd",
    maximize: bool = False,
    title: str = "",
) -> Any:
    """Scatter of ``cost_metric`` (x) against ``metric`` (y), Pareto front marked and joined."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(8, 5.5))
    x = pd.to_numeric(df[cost_metric], errors="coerce").to_numpy(float)
    y = pd.to_numeric(df[metric], errors="coerce").to_numpy(float)
    front = pareto_front(x, y, maximize)
    ax.scatter(x[~front], y[~front], s=28, c="0.6", label="dominated")
    order = np.argsort(x[front])
    ax.plot(x[front][order], y[front][order], "-o", c="tab:red", ms=6, label="Pareto front")
    labels = variant_labels(df)
    only_front = len(df) > LABEL_ALL_MAX
    finite = np.isfinite(x)
    mid = (np.nanmin(x) + np.nanmax(x)) / 2 if finite.any() else 0.0
    ax.get_xlim()  # settle the autoscaled limits: label placement works in display points
    to_pt = ax.transData.transform
    placed: list[tuple[float, float, bool]] = []  # (x, y) in display points, side, of labels
    step = MIN_FONT_PT * 1.3  # one label line, in points
    scale = fig.dpi / 72.0
    for xi, yi, lab, f in zip(x, y, labels, front, strict=True):
        if np.isfinite(xi) and np.isfinite(yi) and (f or not only_front):
            # labels of the right half point left, so they stay inside the figure
            right = xi > mid
            px, py = to_pt((xi, yi)) / scale
            dy = 3.0
            # a label that would sit on an earlier one (same side, close points) moves up a
            # line at a time until it is clear: coincident variants stay readable
            while any(
                s_ == right and abs(px - qx) < 60 and abs(py + dy - qy) < step
                for qx, qy, s_ in placed
            ):
                dy += step
            placed.append((px, py + dy, right))
            ax.annotate(lab, (xi, yi), fontsize=MIN_FONT_PT, xytext=(-3 if right else 3, dy),
                        textcoords="offset points", ha="right" if right else "left",
                        color="tab:red" if f else "0.35")  # fmt: skip
    if only_front:
        title = (title or f"{metric} vs {cost_metric}") + (
            f"\n{len(df)} points; labels on the {int(front.sum())} of the Pareto front only"
        )
    ax.set_xlabel(_label(cost_metric))
    ax.set_ylabel(_label(metric) + (" - higher is better" if maximize else " - lower is better"))
    _axis_format(ax.xaxis, cost_metric)
    _axis_format(ax.yaxis, metric)
    ax.set_title(title or f"{metric} vs {cost_metric}")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=FONT_PT)
    fig.tight_layout()
    return fig


def fig_cost_breakdown(df: pd.DataFrame, title: str = "Capex by category per variant") -> Any:
    """Stacked horizontal bars of ``capex.<category>`` per row (variant), in millions of USD,
    the variant's swept values as its label. Above :data:`BREAKDOWN_MAX` variants only the
    ``TOP_K`` cheapest and the ``TOP_K`` costliest are drawn, the title says so."""
    plt = _plt()
    cats = [c for c in CATEGORIES if f"capex.{c}" in df.columns]
    extra = sorted(
        c[len("capex.") :]
        for c in df.columns
        if c.startswith("capex.") and c[len("capex.") :] not in cats
    )
    cats += extra
    labels = variant_labels(df)
    parts = {
        c: pd.to_numeric(df[f"capex.{c}"], errors="coerce").fillna(0).to_numpy(float) / 1e6
        for c in cats
    }
    rows = np.arange(len(df))
    if len(df) > BREAKDOWN_MAX:
        total = np.sum(list(parts.values()), axis=0) if parts else np.zeros(len(df))
        low, high = extremes(total, TOP_K)
        rows = np.r_[low, high[::-1]]
        note = omission_note(len(rows), len(df), "variants",
                             f"the {len(low)} cheapest and {len(high)} costliest")  # fmt: skip
        title = f"{title}\n{note}"
    fig, ax = plt.subplots(figsize=clamp_size(WIDTH_IN, 0.32 * len(rows) + 2.2))
    left = np.zeros(len(rows))
    cmap = plt.get_cmap("tab10")
    for i, c in enumerate(cats):
        v = parts[c][rows]
        if not v.any():
            continue
        ax.barh(range(len(rows)), v, left=left, label=c, color=cmap(i % 10))
        left += v
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([labels[i] for i in rows], fontsize=FONT_PT)
    ax.invert_yaxis()  # the first variant on top
    ax.set_xlabel("capex (million USD)")
    ax.set_title(title)
    ax.legend(fontsize=FONT_PT, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    return fig


def tornado_data(df: pd.DataFrame, metric: str) -> pd.DataFrame:
    """Per swept parameter: the lowest and highest mean of ``metric`` over its values
    (marginal means over the other parameters), the values that give them, and the span."""
    y = pd.to_numeric(df[metric], errors="coerce")
    rows = []
    for col in param_columns(df):
        means = y.groupby(df[col].astype(str)).mean().dropna()
        if len(means) < 2:
            continue
        rows.append(
            {
                "param": col[len(PARAM_PREFIX) :],
                "low": float(means.min()),
                "low_at": str(means.idxmin()),
                "high": float(means.max()),
                "high_at": str(means.idxmax()),
                "span": float(means.max() - means.min()),
            }
        )
    out = pd.DataFrame(rows, columns=["param", "low", "low_at", "high", "high_at", "span"])
    return out.sort_values("span", ascending=True, kind="mergesort").reset_index(drop=True)


def fig_tornado(df: pd.DataFrame, metric: str, title: str = "") -> Any:
    """Tornado plot: one bar per swept parameter from the lowest to the highest marginal mean
    of ``metric``, widest on top, around the mean of all points."""
    plt = _plt()
    data = tornado_data(df, metric)
    fig, ax = plt.subplots(figsize=clamp_size(8, max(2.5, 0.6 * len(data) + 1.5)))
    base = float(pd.to_numeric(df[metric], errors="coerce").mean())
    for i, r in data.iterrows():
        if r["span"] == 0:
            ax.plot([r["low"]], [i], "|", color="tab:blue", ms=14)
            ax.annotate("no effect", (r["low"], i), fontsize=MIN_FONT_PT, ha="left", va="center",
                        xytext=(6, 0), textcoords="offset points")  # fmt: skip
            continue
        ax.barh(i, r["high"] - r["low"], left=r["low"], color="tab:blue", alpha=0.75)
        ax.annotate(r["low_at"], (r["low"], i), fontsize=MIN_FONT_PT, ha="right", va="center",
                    xytext=(-3, 0), textcoords="offset points")  # fmt: skip
        ax.annotate(r["high_at"], (r["high"], i), fontsize=MIN_FONT_PT, ha="left", va="center",
                    xytext=(3, 0), textcoords="offset points")  # fmt: skip
    ax.use_sticky_edges = False  # bars stick to their base; let labels at both ends fit
    ax.margins(x=0.2, y=0.15)
    if np.isfinite(base):
        ax.axvline(base, color="0.3", lw=1, ls="--", label="mean of all points")
        ax.legend(fontsize=FONT_PT, loc="best")
    ax.set_yticks(range(len(data)))
    ax.set_yticklabels(list(data["param"]), fontsize=FONT_PT)
    ax.set_xlabel(_label(metric))
    _axis_format(ax.xaxis, metric)
    ax.set_title(title or f"Sensitivity of {metric} to each swept parameter")
    if data.empty:
        ax.text(0.5, 0.5, "fewer than two values per parameter", ha="center",
                transform=ax.transAxes)  # fmt: skip
    fig.tight_layout()
    return fig


def study_figures(
    df: pd.DataFrame,
    metric: str,
    cost_metric: str = "capex_usd",
    maximize: bool = False,
    name: str = "study",
) -> dict[str, Any]:
    """The study's figures by file stem: ``pareto``, ``cost_breakdown``, ``tornado``.
    Figures whose columns are missing from ``df`` are left out."""
    figs: dict[str, Any] = {}
    if metric in df.columns and cost_metric in df.columns:
        figs["pareto"] = fig_pareto(
            df, metric, cost_metric, maximize, f"{name}: {metric} vs {cost_metric}"
        )
    if any(c.startswith("capex.") for c in df.columns):
        figs["cost_breakdown"] = fig_cost_breakdown(df, f"{name}: capex by category")
    if metric in df.columns and param_columns(df):
        figs["tornado"] = fig_tornado(df, metric, f"{name}: sensitivity of {metric}")
    return figs


def save_study_figures(
    df: pd.DataFrame,
    out_dir: str | Path,
    metric: str,
    cost_metric: str = "capex_usd",
    maximize: bool = False,
    name: str = "study",
    formats: Sequence[str] = ("png", "svg"),
) -> list[Path]:
    """Write :func:`study_figures` under ``out_dir`` (``<stem>.png`` / ``.svg``); the paths."""
    import matplotlib
    from podsim.scenarios.report.plots import SAVE_RC

    plt = _plt()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    with matplotlib.rc_context(SAVE_RC):
        for stem, fig in study_figures(df, metric, cost_metric, maximize, name).items():
            for fmt in formats:
                p = out / f"{stem}.{fmt}"
                save_figure(fig, p, SAVE_DPI)
                written.append(p)
            plt.close(fig)
    return written


def read_study_folder(directory: str | Path) -> tuple[pd.DataFrame, dict[str, Any]]:
    """The results table and the study (``study.yaml`` as written by the sweep, with
    ``name``, ``metric``, ``cost_metric`` and ``maximize`` always set) of a sweep folder."""
    from podsim.scenarios.input.yamltext import read_yaml

    d = Path(directory)
    df = pd.read_parquet(d / "results.parquet")
    path = d / "study.yaml"
    study = (read_yaml(path) or {}) if path.is_file() else {}
    study["name"] = str(study.get("name") or d.name)
    study["metric"] = str(study.get("metric") or "layer_time_s")
    study["cost_metric"] = str(study.get("cost_metric") or "capex_usd")
    study["maximize"] = bool(study.get("maximize", False))
    return df, study


def plot_study_folder(directory: str | Path, formats: Sequence[str] = ("png", "svg")) -> list[Path]:
    """(Re)draw the study figures of a sweep folder under ``directory/plots``."""
    df, st = read_study_folder(directory)
    if df.empty:
        return []
    return save_study_figures(
        df,
        Path(directory) / "plots",
        st["metric"],
        st["cost_metric"],
        st["maximize"],
        st["name"],
        formats=formats,
    )
