"""One self-contained HTML report of a result folder, for design reviews.

Everything is inside the file: the figures as base64 PNG, the summary, the cost breakdown and
bill of materials and the hottest links as tables, and the resolved scenario YAML; it needs no
network and no other file. A small inline script marks the page once every figure has decoded
(``data-figures-loaded`` on ``<body>``), which is what the headless-browser test reads.

The folder of a study (``podsim sweep``: ``results.parquet``, ``study.yaml``, ``plots/``) gets
a study report instead: the study figures of :mod:`podsim.scenarios.study.plots` (Pareto front, cost
breakdown per variant, tornado), the table of points and the study file.
"""

from __future__ import annotations

import base64
import html
import math
from pathlib import Path
from typing import Any

import yaml
from podsim.fabric.units import fmt_rate, fmt_size, fmt_time
from podsim.scenarios.cost.tables import usd, usd_amount
from podsim.scenarios.errors import ScenarioError
from podsim.scenarios.results.tables import Results, all_to_all_workload

__all__ = ["FIGURE_TITLES", "STUDY_FIGURE_TITLES", "render_report", "write_report"]

FIGURE_TITLES = {
    "layer_timeline": "Layer timeline (dispatch, compute, combine per rank)",
    "fct_cdf": "Message completion-time CDF",
    "gpu_bandwidth": "Per-GPU dispatch/combine bandwidth",
    "gpu_idle": "Per-GPU idle, bubble and tail time (stragglers marked)",
    "link_utilisation": "Link utilisation by tier",
    "link_phases": "Link utilisation while each phase runs",
    "queue_depth": "Queue depth of the most contended ports",
    "topology": "Topology: the fabric and one node's PCIe tree",
}

STUDY_FIGURE_TITLES = {
    "pareto": "Cost vs performance, Pareto front marked",
    "cost_breakdown": "Capex by category per variant",
    "tornado": "Sensitivity of the metric to each swept parameter",
}

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:2em auto;
max-width:1100px;color:#222;line-height:1.4}
h1{font-size:1.6em;margin-bottom:.2em}h2{border-bottom:1px solid #ccc;padding-bottom:.2em}
table{border-collapse:collapse;margin:.5em 0 1.5em}td,th{border:1px solid #ddd;padding:.25em .6em}
th{background:#f3f3f3;text-align:left}td.n{text-align:right;font-variant-numeric:tabular-nums}
figure{margin:1em 0 2em}figure img{max-width:100%;border:1px solid #eee}
figcaption{color:#555;font-size:.9em}pre{background:#f7f7f7;padding:1em;overflow:auto;
font-size:.85em}.meta{color:#555}
"""

_SCRIPT = """
window.addEventListener('load', function () {
  var imgs = document.querySelectorAll('figure img');
  var ok = 0;
  imgs.forEach(function (im) { if (im.complete && im.naturalWidth > 0) { ok += 1; } });
  document.body.setAttribute('data-figures-loaded', String(ok));
  document.body.setAttribute('data-figures-total', String(imgs.length));
});
"""


def _e(x: Any) -> str:
    return html.escape(str(x), quote=True)


def _num(x: Any, kind: str) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "-"
    if kind == "time":
        return fmt_time(float(x))
    if kind == "GBps":
        return f"{float(x) / 1e9:.2f} GB/s"
    if kind == "pct":
        return f"{100 * float(x):.1f} %"
    if kind == "rate":
        return fmt_rate(float(x))
    if kind == "size":
        return fmt_size(float(x))
    if kind == "W":
        return f"{float(x) / 1000:,.1f} kW" if abs(float(x)) >= 1000 else f"{float(x):,.0f} W"
    if kind == "usd":
        return usd_amount(float(x))
    if kind == "count":
        return f"{float(x):,.0f}"
    if kind == "g":
        return f"{float(x):.4g}" if isinstance(x, int | float) else str(x)
    return str(x)


def _table(headers: list[str], rows: list[list[str]], numeric_from: int = 1) -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)
    body = []
    for row in rows:
        cells = "".join(
            f'<td class="n">{_e(c)}</td>' if i >= numeric_from else f"<td>{_e(c)}</td>"
            for i, c in enumerate(row)
        )
        body.append(f"<tr>{cells}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


#: the per-phase figures of the summary table: (header, summary key, format)
_PHASE_FIGURES = (
    ("completion time", "completion_time_s", "time"),
    ("algbw / GPU (NCCL)", "algbw_per_gpu_Bps", "GBps"),
    ("busbw / GPU (NCCL)", "busbw_per_gpu_Bps", "GBps"),
    ("RDMA send bw / GPU", "rdma_send_bw_per_gpu_Bps", "GBps"),
    ("NVL send bw / GPU", "nvl_send_bw_per_gpu_Bps", "GBps"),
    ("kernel time / rank (DeepEP)", "deepep_time_s", "time"),
    ("RDMA bw / GPU (DeepEP)", "deepep_rdma_bw_per_gpu_Bps", "GBps"),
    ("NVL bw / GPU (DeepEP)", "deepep_nvl_bw_per_gpu_Bps", "GBps"),
    ("physical lower bound", "bound_s", "time"),
    ("fraction of the bound", "fraction_of_bound", "pct"),
)


def _summary_html(s: dict[str, Any], a2a: bool = False) -> str:
    """The summary's per-phase table (``a2a``: the run is an all-to-all, its completion time is
    named so) and the link and counter tables."""
    phases_in = s.get("phases") or {}
    comm = {ph: m for ph, m in phases_in.items() if ph != "compute"}
    # a figure only where it applies: a column no phase of this run has a value for is left out
    # (DeepEP's figures outside DeepEP modes, NVLink without scale-up traffic, ...)
    shown = [
        f for f in _PHASE_FIGURES if any(_num(m.get(f[1]), f[2]) != "-" for m in comm.values())
    ] or list(_PHASE_FIGURES[:1])
    rows = []
    for ph, m in phases_in.items():
        if ph == "compute":
            rows.append(
                [
                    "compute (per rank, mean / max)",
                    f"{_num(m.get('mean_rank_time_s'), 'time')} / "
                    f"{_num(m.get('max_rank_time_s'), 'time')}",
                    *[""] * (len(shown) - 1),
                ]
            )
            continue
        rows.append([ph, *(_num(m.get(key), kind) for _, key, kind in shown)])
    heads = [head for head, _, _ in shown]
    if a2a and heads[0] == "completion time":
        heads[0] = "all-to-all completion time"
    phases = _table(["phase", *heads], rows)
    keys = {key for _, key, _ in shown}
    notes = []
    if "algbw_per_gpu_Bps" in keys:
        notes.append(
            "algbw = mean bytes a rank sends / completion time; busbw = algbw x NCCL's bus "
            "factor ((n-1)/n for all-to-all, 2(n-1)/n for all-reduce)."
        )
    if keys & {"deepep_rdma_bw_per_gpu_Bps", "deepep_nvl_bw_per_gpu_Bps"}:
        notes.append(
            "DeepEP bandwidth = a rank's RDMA (NVLink) bytes as DeepEP counts them / its own "
            "phase time, averaged over ranks."
        )
    notes.append(
        "Utilisation here is over the whole run; per phase under Hottest links "
        "(links_by_phase.parquet)."
    )
    util = _table(
        ["tier", "links", "mean utilisation", "max utilisation", "bytes"],
        [
            [
                t,
                str(m["links"]),
                _num(m["mean_utilisation"], "pct"),
                _num(m["max_utilisation"], "pct"),
                _num(m["tx_bytes"], "size"),
            ]
            for t, m in (s.get("link_utilisation") or {}).items()
        ],
    )
    c = s.get("counters") or {}
    counters = _table(
        ["drops", "ECN marks", "PFC pauses", "retransmitted packets", "timeouts"],
        [
            [
                str(c.get(k, 0))
                for k in ("drops", "ecn_marks", "pfc_pauses", "retransmitted_packets", "timeouts")
            ]
        ],
        numeric_from=0,
    )
    msgs = s.get("messages") or {}
    msg = _table(
        ["messages", "unfinished", "bytes", "FCT p50", "FCT p99", "FCT max", "makespan"],
        [
            [
                str(msgs.get("count", 0)),
                str(msgs.get("unfinished", 0)),
                _num(msgs.get("bytes"), "size"),
                _num(msgs.get("fct_p50_s"), "time"),
                _num(msgs.get("fct_p99_s"), "time"),
                _num(msgs.get("fct_max_s"), "time"),
                _num(s.get("makespan_s"), "time"),
            ]
        ],
        numeric_from=0,
    )
    return (
        "<h2>Summary</h2>"
        + phases
        + "<h3>Messages</h3>"
        + msg
        + "<h3>Link utilisation by tier</h3>"
        + util
        + "<h3>Loss and congestion</h3>"
        + counters
        + f'<p class="meta">{_e(" ".join(notes))}</p>'
    )


def _serving_html(s: dict[str, Any]) -> str:
    """Percentiles of the serving figures (``summary.serving``), or nothing for other runs."""
    sv = s.get("serving")
    if not sv:
        return ""
    cols = ("p50", "p90", "p99", "mean")
    rows = [
        [label, *(_num((sv.get(key) or {}).get(c), kind) for c in cols)]
        for label, key, kind in (
            ("TTFT", "ttft_s", "time"),
            ("TPOT", "tpot_s", "time"),
            ("end-to-end latency", "e2e_s", "time"),
            ("queue before prefill", "queue_s", "time"),
            ("KV transfer", "kv_transfer_s", "time"),
            ("KV transfer exposed", "kv_exposed_s", "time"),
            ("KV share of TTFT", "kv_share_of_ttft", "pct"),
            ("KV transfer rate", "kv_rate_Bps", "GBps"),
        )
    ]
    tput = sv.get("output_tokens_per_s_per_gpu")
    return (
        f"<h2>Serving: {sv.get('completed', 0)} of {sv.get('requests', 0)} requests completed</h2>"
        + _table(["per request", *cols], rows)
        + '<p class="meta">TTFT = arrival to the end of the first decode iteration (prefill, KV '
        "transfer, first step); exposed KV transfer = prefill end to the cache's last byte; "
        "per-request rows in requests.parquet"
        + (f"; output tokens per second per GPU: {tput:.3g}" if tput is not None else "")
        + ".</p>"
    )


def _hot_links(res: Results, n: int = 12) -> str:
    """Per phase, the links busiest while it ran with their contention (``links_by_phase``,
    :mod:`podsim.scenarios.results.phase_links`), then the busiest over the whole run."""
    from podsim.scenarios.results.phase_links import IDLE, phase_link_caption

    links = res.links
    if links.empty:
        return ""
    out = "<h2>Hottest links</h2>"
    doc = res.summary.get("link_utilisation_by_phase") or {}
    phases = {p: m for p, m in (doc.get("phases") or {}).items() if p != IDLE}
    if phases:
        queues = bool(doc.get("queues_modelled"))
        rows = []
        for ph, m in phases.items():
            for r in m.get("busiest") or []:
                contended = r.get("max_queue_bytes") is not None and r["max_queue_bytes"] > (
                    doc.get("contention_threshold_bytes") or 0
                )
                rows.append(
                    [
                        ph,
                        r["link"],
                        r["tier"],
                        _num(r["utilisation"], "pct"),
                        _num(r.get("max_queue_bytes"), "size") if queues else "-",
                        ("yes" if contended else "no") if queues else "-",
                    ]
                )
        counts = [
            f"{ph} {m['contended_links']}"
            for ph, m in phases.items()
            if m.get("contended_links") is not None
        ]
        out += (
            "<h3>While each phase runs</h3>"
            + _table(
                ["phase", "link", "tier", "utilisation", "max queue", "contended"],
                rows,
                numeric_from=3,
            )
            + f'<p class="meta">{_e(phase_link_caption(res.summary))}'
            + (_e(" Contended links per phase: " + ", ".join(counts) + ".") if counts else "")
            + "</p>"
        )
    top = links.sort_values(["utilisation", "link"], ascending=[False, True]).head(n)
    rows = [
        [
            r.link,
            r.tier,
            _num(r.utilisation, "pct"),
            _num(r.rate_bps, "rate"),
            str(r.drops),
            str(r.ecn_marks),
            str(r.pauses),
            _num(r.max_queue_bytes, "size"),
        ]
        for r in top.itertuples(index=False)
    ]
    return (
        out
        + "<h3>Busiest over the whole run</h3>"
        + _table(
            ["link", "tier", "utilisation", "rate", "drops", "ECN marks", "pauses", "max queue"],
            rows,
            numeric_from=2,
        )
        + '<p class="meta">Whole-run utilisation = bytes / (rate x makespan): it averages busy '
        "phases with idle ones.</p>"
    )


def _cost_html(res: Results) -> str:
    """The cost breakdown (capex and power per category, totals, TCO, efficiency) and the
    bill of materials of a priced run."""
    cost = res.cost
    if not cost:
        return ""
    if "error" in cost:
        return f"<h2>Cost</h2><p>The cluster was not priced: {_e(cost['error'])}</p>"
    head = cost.get("summary") or {}
    tco = cost.get("tco") or {}
    eff = cost.get("efficiency") or {}
    rows = [
        [
            r.category,
            usd(r.capex_usd),
            _num(r.capex_share, "pct"),
            _num(r.power_w, "W"),
            _num(r.power_share, "pct"),
        ]
        for r in res.cost_table().itertuples(index=False)
    ]
    rows.append(["total", usd(head.get("capex_usd")), "", _num(head.get("power_w"), "W"), ""])
    breakdown = _table(["category", "capex", "share", "power", "share"], rows)
    figures = _table(
        [
            f"TCO {tco.get('years', 0):g} y",
            "energy",
            "interconnect share of capex",
            "rule of thumb (share of capex)",
            "capex on NONE prices",
            "capex per GPU",
            "$ per GB/s per GPU",
            "$ per MoE layer",
            "tokens/s per $M",
        ],
        [
            [
                usd(tco.get("tco_usd")),
                usd(tco.get("energy_usd")),
                _num(head.get("interconnect_fraction"), "pct"),
                _num(head.get("interconnect_rule_of_thumb"), "pct"),
                _num(
                    (head.get("capex_conf.none") or 0) / head["capex_usd"]
                    if head.get("capex_usd") and "capex_conf.none" in head
                    else None,
                    "pct",
                ),
                usd(eff.get("usd_per_gpu")),
                usd(eff.get("usd_per_GBps_per_gpu")),
                _num(eff.get("usd_per_moe_layer"), "usd"),
                _num(eff.get("tokens_per_s_per_musd"), "count"),
            ]
        ],
        numeric_from=0,
    )
    parts = [
        "<h2>Cost</h2>",
        breakdown,
        figures,
        f'<p class="meta">TCO = capex + energy over {tco.get("years", 0):g} years at '
        f"${tco.get('usd_per_kwh', 0):g}/kWh and PUE {tco.get('pue', 0):g}; $ per GB/s per GPU = "
        "capex per GPU / all-to-all algorithm bandwidth per GPU; the interconnect share "
        "(scale-out NICs, switches, optics, cables) is shown next to the published rule of "
        "thumb as a cross-check (scenarios/cost/model.py).</p>",
    ]
    if res.bom is not None and len(res.bom):
        from podsim.scenarios.cost.tables import CONFIDENCE_MARK, ports_text

        def conf(r: Any) -> str:
            c = str(getattr(r, "confidence", "") or "")
            return CONFIDENCE_MARK.get(c, c or "-")

        def ports(r: Any) -> str:
            bought = int(getattr(r, "ports_bought", 0) or 0)
            return ports_text(int(getattr(r, "ports_used", 0) or 0), bought)

        bom_rows = [
            [
                r.category,
                r.item + ("*" if bool(r.estimate) else ""),
                str(r.detail),
                conf(r),
                f"{int(r.count):,}",
                usd(r.unit_price_usd),
                usd(r.capex_usd),
                _num(r.power_w, "W"),
                ports(r),
            ]
            for r in res.bom.itertuples(index=False)
        ]
        by_conf = cost.get("capex_by_confidence") or {}
        total = sum(float(v or 0) for v in by_conf.values())
        conf_rows = [
            [CONFIDENCE_MARK.get(k, k), usd(v), _num(float(v) / total, "pct")]
            for k, v in by_conf.items()
            if v and total
        ]
        parts += [
            "<h3>Bill of materials</h3>",
            _table(
                [
                    "category",
                    "item",
                    "detail",
                    "price conf.",
                    "count",
                    "unit price",
                    "capex",
                    "power",
                    "ports used/bought",
                ],
                bom_rows,
                numeric_from=4,
            ),
            '<p class="meta">* estimate: no public price or power (scenarios/cost/'
            "catalog.yaml). Price conf.: confidence of the unit price, high/med/low = a source "
            "of that quality, NONE = no source (a documented guess), user = set by the "
            "scenario. Ports used/bought: switch ports the cluster uses over the ports of the "
            "whole boxes bought.</p>",
        ]
        if conf_rows:
            parts += [
                "<h3>Capex by price confidence</h3>",
                _table(["price conf.", "capex", "share"], conf_rows),
            ]
    return "".join(parts)


def _figures(plots: Path, titles: dict[str, str]) -> str:
    parts = ["<h2>Figures</h2>"]
    names = list(titles) + sorted(p.stem for p in plots.glob("*.png") if p.stem not in titles)
    for name in names:
        png = plots / f"{name}.png"
        if not png.is_file():
            continue
        data = base64.b64encode(png.read_bytes()).decode("ascii")
        title = titles.get(name, name.replace("_", " "))
        parts.append(
            f'<figure id="fig-{_e(name)}"><img alt="{_e(title)}" '
            f'src="data:image/png;base64,{data}"><figcaption>{_e(title)}</figcaption></figure>'
        )
    return "".join(parts)


def _page(title: str, meta: str, body: str) -> str:
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        f"<title>{_e(title)}</title><style>{_CSS}</style></head><body>"
        f"<h1>{_e(title)}</h1><p class='meta'>{_e(meta)}</p>"
        + body
        + f"<script>{_SCRIPT}</script></body></html>"
    )


def is_study_folder(directory: Path) -> bool:
    """A ``podsim sweep`` output folder (a results table, no single-run summary)."""
    return (directory / "results.parquet").is_file() and not (directory / "summary.json").is_file()


def _kind_of(metric: str) -> str:
    """How to print a study column, by the unit suffix of its name."""
    for suffix, kind in (("_usd", "usd"), ("_s", "time"), ("_Bps", "GBps"), ("_w", "W")):
        if metric.endswith(suffix):
            return kind
    return "g"


def _render_study(d: Path) -> str:
    import pandas as pd
    from podsim.scenarios.study.plots import (
        pareto_front,
        plot_study_folder,
        read_study_folder,
        variant_labels,
    )

    df, study = read_study_folder(d)
    name, metric, cost_metric = study["name"], study["metric"], study["cost_metric"]
    maximize = study["maximize"]
    plots = d / "plots"
    if not any(plots.glob("*.png")):
        plot_study_folder(d, formats=("png",))
    has = metric in df.columns and cost_metric in df.columns
    front = pareto_front(df[cost_metric], df[metric], maximize) if has else [False] * len(df)
    cats = [
        c
        for c in df.columns
        if c.startswith("capex.") and pd.to_numeric(df[c], errors="coerce").fillna(0).any()
    ]
    rows = []
    for (_, r), label, f in zip(df.iterrows(), variant_labels(df), front, strict=True):
        rows.append(
            [
                str(r.get("point", "")),
                label,
                _num(r.get(metric), _kind_of(metric)),
                _num(r.get(cost_metric), _kind_of(cost_metric)),
                "yes" if f else "",
                *(usd(r.get(c)) for c in cats),
            ]
        )
    table = _table(
        ["point", "variant", metric, cost_metric, "Pareto", *(c[len("capex.") :] for c in cats)],
        rows,
        numeric_from=2,
    )
    answers = _study_answers_html(df, study)
    direction = "higher" if maximize else "lower"
    meta = f"{len(df)} points - metric {metric} ({direction} is better) - cost {cost_metric}"
    desc = str(study.get("description") or "")
    body = (
        (f"<p>{_e(desc)}</p>" if desc else "")
        + _figures(plots, STUDY_FIGURE_TITLES)
        + answers
        + "<h2>Points</h2>"
        + table
        + '<p class="meta">Capex columns are USD per category; a point is on the Pareto front '
        "when no other point is at most as costly and at least as good, one of them strictly."
        "</p>"
        + "<h2>Study</h2><pre>"
        + _e(yaml.safe_dump(study, sort_keys=False) if study else "(not recorded)")
        + "</pre>"
    )
    return _page(f"podsim study report: {name}", meta, body)


def _study_answers_html(df: Any, study: dict[str, Any]) -> str:
    """The study's answers, the savings by scope of its first two points (a two-point study, or
    one with ``savings_threshold``: :func:`compares_first_two`) and the prices with no
    (or a weak) source that decide each answer, with the price at which it flips."""
    from podsim.scenarios.cost.compare import scope_savings
    from podsim.scenarios.cost.sensitivity import (
        compares_first_two,
        price_sensitivity,
        study_answers,
    )
    from podsim.scenarios.cost.tables import CONFIDENCE_MARK
    from podsim.scenarios.study.plots import variant_labels

    metric, cost_metric = study["metric"], study["cost_metric"]
    maximize, threshold = study["maximize"], study.get("savings_threshold")
    parts = []
    capex = [c for c in df.columns if c.startswith("capex.")]
    if compares_first_two(len(df), threshold) and capex:
        a, b = (
            {c[len("capex.") :]: float(r[c] or 0) for c in capex} for _, r in df.iloc[:2].iterrows()
        )
        names = variant_labels(df.iloc[:2])
        sav = scope_savings(a, b)
        parts += [
            f"<h2>Capex saving by scope: {_e(names[1])} vs {_e(names[0])}</h2>",
            _table(
                ["scope", names[0], names[1], "saving", "saving %"],
                [
                    [
                        r.scope,
                        usd(r.baseline_usd),
                        usd(r.variant_usd),
                        usd(r.saving_usd),
                        _num(r.saving_fraction, "pct"),
                    ]
                    for r in sav.itertuples()
                ],
            ),
        ]
    if not any(c.startswith("units.") for c in df.columns):
        return "".join(parts)
    answers = study_answers(df, metric, cost_metric, maximize, threshold)
    sens = price_sensitivity(df, metric, cost_metric, maximize, threshold)
    rows = []
    for a in answers:
        sub = sens[sens.question == a.question] if len(sens) else sens
        if not len(sub):
            rows.append([a.question, a.answer, "no low-confidence price changes it", "", "", ""])
        rows.extend(
            [
                a.question,
                a.answer,
                f"{r.item} ({CONFIDENCE_MARK.get(r.confidence, r.confidence)})"
                + (" - decides" if r.decides else ""),
                usd(r.price_usd),
                f"{usd(r.flip_below_usd)} -> {r.answer_below}" if r.answer_below else "never",
                f"{usd(r.flip_above_usd)} -> {r.answer_above}" if r.answer_above else "never",
            ]
            for r in sub.itertuples()
        )
    parts += [
        "<h2>Answers and the prices that decide them</h2>",
        _table(
            ["question", "answer", "price (confidence)", "catalog", "flips below", "flips above"],
            rows,
            numeric_from=3,
        ),
        '<p class="meta">Per price with confidence NONE (no source) or low: the nearest price '
        "below / above the catalog's at which the answer changes, and the new answer; never = "
        "it holds down to $0 / at any price; decides = the flip lies within a factor of 2 of "
        "the catalog price. Best cost per performance = lowest cost x metric (cost / metric "
        "when higher is better). Capex is linear in each price at the BOM's choice of parts "
        "(scenarios/cost/sensitivity.py).</p>",
    ]
    return "".join(parts)


def render_report(directory: str | Path, baseline: str | Path | None = None) -> str:
    """The HTML text of the report of result folder ``directory`` (plots drawn if missing):
    a run's report, or a study's when ``directory`` is a ``podsim sweep`` folder. With a
    ``baseline`` result folder the findings say what changed against it."""
    d = Path(directory)
    if is_study_folder(d):
        if baseline is not None:
            raise ScenarioError("--baseline compares run result folders, not a study folder")
        return _render_study(d)
    res = Results.read(d)
    base = Results.read(baseline) if baseline is not None else None
    plots = d / "plots"
    if not any(plots.glob("*.png")):
        from podsim.scenarios.build.cluster import read_graph
        from podsim.scenarios.report.plots import plot_all

        plot_all(res, plots, formats=("png",), graph=read_graph(d))
    s = res.summary
    title = f"podsim report: {s.get('scenario', d.name)}"
    if s.get("variant"):
        title += f" [{s['variant']}]"
    meta = (
        f"engine {s.get('engine')} - seed {s.get('seed')} - status {s.get('status')} - "
        f"topology {s.get('topology')} - {s.get('ranks')} ranks on {s.get('gpus')} GPUs - "
        f"simulated {_num(s.get('sim_time_s'), 'time')} in {s.get('wall_s', 0):.2f} s wall"
    )
    prov = s.get("provenance") or {}
    if prov:
        commit = prov.get("commit")
        meta += (
            f" - podsim {prov.get('podsim_version')}"
            + (f" at {commit[:12]}{' (modified)' if prov.get('dirty') else ''}" if commit else "")
            + f" - {prov.get('created_utc')} - scenario sha256 "
            + f"{str(prov.get('scenario_sha256'))[:16]}"
        )
    desc = (res.scenario or {}).get("description") or ""
    scen = yaml.safe_dump(res.scenario, sort_keys=False) if res.scenario else "(not recorded)"
    from podsim.scenarios.report.findings import findings

    found = findings(res, base, baseline_name=Path(baseline).name if baseline else "")
    body = (
        (f"<p>{_e(desc)}</p>" if desc else "")
        + (
            "<h2>Findings</h2><ul>" + "".join(f"<li>{_e(x)}</li>" for x in found) + "</ul>"
            if found
            else ""
        )
        + _serving_html(s)
        + _summary_html(s, all_to_all_workload(res.scenario))
        + _figures(plots, FIGURE_TITLES)
        + _cost_html(res)
        + _hot_links(res)
        + f"<h2>Scenario (resolved)</h2><pre>{_e(scen)}</pre>"
    )
    return _page(title, meta, body)


def write_report(
    directory: str | Path, out: str | Path | None = None, baseline: str | Path | None = None
) -> Path:
    """Write the report (default ``DIR/report.html``) and return its path; ``baseline``: a
    result folder the findings compare the run with."""
    d = Path(directory)
    path = Path(out) if out is not None else d / "report.html"
    text = render_report(d, baseline)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path
