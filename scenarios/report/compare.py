"""``podsim compare``: two or more result folders side by side.

The figures a design review compares (per communication phase: completion time, NCCL-style
algorithm bandwidth per GPU, fraction of the physical bound; the makespan; loss and congestion
counters; capex and capex per GB/s per GPU), one column per run, and each run's change against
the first (the baseline). A change of at least ``threshold`` (default 5 %) either way is a
difference that matters: the table marks it, better or worse by the figure's direction (time,
loss and cost: lower is better; bandwidth and fraction of the bound: higher). A figure one run
lacks (a phase it does not have, an unpriced run) is shown as -, never as zero.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
from podsim.scenarios.report.html import _e, _page
from podsim.scenarios.report.html import _num as _shown
from podsim.scenarios.results.tables import Results

__all__ = ["Figure", "compare", "compare_html", "figures_of"]

PHASES = ("dispatch", "combine", "other")


@dataclass(frozen=True)
class Figure:
    """One compared figure: its label, unit kind (as the run report formats them: time, GBps,
    pct, count, usd), direction
    (``lower`` or ``higher`` is better) and how to read it from a run."""

    label: str
    kind: str
    better: str
    get: Callable[[Results], float | None]


def finite_number(x: Any) -> float | None:
    """``x`` as a float if it is a finite real number (not a bool), else None: how summary
    figures are read (a figure may be None, NaN or missing)."""
    if isinstance(x, bool) or not isinstance(x, int | float):
        return None
    return float(x) if math.isfinite(x) else None


def _makespan(r: Results) -> float | None:
    return finite_number(r.summary.get("makespan_s"))


def _phase(ph: str, key: str) -> Callable[[Results], float | None]:
    return lambda r: finite_number(((r.summary.get("phases") or {}).get(ph) or {}).get(key))


def _counter(key: str) -> Callable[[Results], float | None]:
    return lambda r: finite_number((r.summary.get("counters") or {}).get(key))


def _cost(part: str, key: str) -> Callable[[Results], float | None]:
    return lambda r: finite_number(((r.cost or {}).get(part) or {}).get(key))


def figures_of(runs: Sequence[Results]) -> list[Figure]:
    """The figures compared for ``runs`` (the phases any of them has)."""
    have = {ph for r in runs for ph in (r.summary.get("phases") or {}) if ph in PHASES}
    out = [
        Figure("makespan", "time", "lower", lambda r: finite_number(r.summary.get("makespan_s")))
    ]
    for ph in (p for p in PHASES if p in have):
        out += [
            Figure(f"{ph}: completion time", "time", "lower", _phase(ph, "completion_time_s")),
            Figure(f"{ph}: algbw per GPU", "GBps", "higher", _phase(ph, "algbw_per_gpu_Bps")),
            Figure(f"{ph}: fraction of bound", "pct", "higher",
                   _phase(ph, "fraction_of_bound")),
        ]  # fmt: skip
    for key, label in (("drops", "drops"), ("ecn_marks", "ECN marks"),
                       ("pfc_pauses", "PFC pauses"),
                       ("retransmitted_packets", "retransmitted packets")):  # fmt: skip
        out.append(Figure(label, "count", "lower", _counter(key)))
    out += [
        Figure("capex", "usd", "lower", _cost("summary", "capex_usd")),
        Figure("capex per GB/s per GPU", "usd", "lower",
               _cost("efficiency", "usd_per_GBps_per_gpu")),
    ]  # fmt: skip
    return out


def compare(
    runs: Sequence[Results], names: Sequence[str], *, threshold: float = 0.05
) -> pd.DataFrame:
    """One row per figure: ``figure``, ``kind``, one column per run (named by ``names``), for
    every run after the first ``change vs <first>`` (relative, NaN when either is missing or
    the baseline is 0) and ``verdict`` (``better``/``worse``/``same`` by at least
    ``threshold``, per run after the first, joined by ``; ``)."""
    if len(runs) < 2:
        raise ValueError("compare needs at least two runs")
    if len(set(names)) != len(names):
        raise ValueError(f"run names must differ: {list(names)}")
    if not threshold >= 0:
        raise ValueError(f"threshold={threshold!r} must be >= 0")
    rows = []
    base = names[0]
    for f in figures_of(runs):
        vals = [f.get(r) for r in runs]
        if all(v is None for v in vals):
            continue
        row: dict[str, Any] = {"figure": f.label, "kind": f.kind}
        row.update({n: (math.nan if v is None else v) for n, v in zip(names, vals, strict=True)})
        verdicts = []
        for n, v in zip(names[1:], vals[1:], strict=True):
            b = vals[0]
            if b is None or v is None:
                ch, verdict = math.nan, "-"
            elif b == 0:
                ch = math.nan if v == 0 else math.inf
                verdict = "same" if v == 0 else ("worse" if f.better == "lower" else "better")
            else:
                ch = (v - b) / abs(b)
                if abs(ch) < threshold:
                    verdict = "same"
                else:
                    up = ch > 0
                    verdict = "worse" if up == (f.better == "lower") else "better"
            row[f"change vs {base}: {n}"] = ch
            verdicts.append(verdict if len(names) == 2 else f"{n} {verdict}")
        row["verdict"] = "; ".join(verdicts)
        rows.append(row)
    return pd.DataFrame(rows)


def formatted(df: pd.DataFrame, names: Sequence[str]) -> list[list[str]]:
    """The comparison as display strings (values by kind, changes as signed percentages)."""
    out = []
    for _, r in df.iterrows():
        cells = [str(r["figure"])] + [_shown(r[n], r["kind"]) for n in names]
        for c in [c for c in df.columns if str(c).startswith("change vs ")]:
            v = r[c]
            cells.append("" if not isinstance(v, float) or math.isnan(v) else f"{v:+.1%}")
        cells.append(str(r["verdict"]))
        out.append(cells)
    return out


def compare_html(runs: Sequence[Results], names: Sequence[str], *, threshold: float = 0.05) -> str:
    """A self-contained HTML page: the comparison table (differences that matter coloured) and
    one overlaid figure of the communication phases' completion times per run."""
    import base64
    import io

    from matplotlib.figure import Figure as MplFigure

    df = compare(runs, names, threshold=threshold)
    heads = ["figure", *names, *[c for c in df.columns if str(c).startswith("change vs ")],
             "verdict"]  # fmt: skip
    body = []
    for cells in formatted(df, names):
        verdict = cells[-1]
        colour = "#fde0dc" if "worse" in verdict else "#e0f2e9" if "better" in verdict else "none"
        tds = "".join(f"<td>{_e(c)}</td>" if i == 0 else f'<td class="n">{_e(c)}</td>'
                      for i, c in enumerate(cells))  # fmt: skip
        body.append(f'<tr style="background:{colour}">{tds}</tr>')
    table = (
        "<table><thead><tr>" + "".join(f"<th>{_e(h)}</th>" for h in heads) + "</tr></thead>"
        + "<tbody>" + "".join(body) + "</tbody></table>"
    )  # fmt: skip
    fig = MplFigure(figsize=(10, 4.5))
    ax = fig.add_subplot()
    phases = [p for p in PHASES if any(p in (r.summary.get("phases") or {}) for r in runs)]
    width = 0.8 / len(runs)
    for i, (r, n) in enumerate(zip(runs, names, strict=True)):
        ys = [(_phase(p, "completion_time_s")(r) or 0.0) * 1e6 for p in phases]
        ax.bar([j + i * width for j in range(len(phases))], ys, width, label=n)
    ax.set_xticks([j + width * (len(runs) - 1) / 2 for j in range(len(phases))], phases)
    ax.set_ylabel("completion time (us)")
    ax.set_title("Communication phases, per run")
    ax.legend(fontsize=9)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, bbox_inches="tight")
    img = base64.b64encode(buf.getvalue()).decode()
    intro = (
        f"<p>Changes against {_e(names[0])}; a change of {threshold:.0%} or more is marked "
        "better (green) or worse (red).</p>"
    )
    figure = (
        f'<h2>Figures</h2><figure><img src="data:image/png;base64,{img}" '
        'alt="completion time per phase and run"></figure>'
    )
    return _page(f"podsim compare: {' vs '.join(names)}", "", intro + table + figure)


def write_compare_html(
    runs: Sequence[Results], names: Sequence[str], path: str | Path, *, threshold: float = 0.05
) -> Path:
    p = Path(path)
    p.write_text(compare_html(runs, names, threshold=threshold), encoding="utf-8")
    return p
