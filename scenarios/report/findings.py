"""The findings that open a run's report: what a design reviewer needs first, in a few
sentences generated from the results (issue 19: the bottleneck and where it sits, the fraction
of the physical bound, compute against communication, the busiest and the contended links while
each phase runs, load skew and stragglers, loss and
congestion, the cost per unit of performance and how much of it rests on unsourced prices).

Every sentence reads a figure the run recorded (``summary.json``, ``cost.json``, the phases
table); a figure the run does not have leaves its sentence out rather than guessing.
"""

from __future__ import annotations

from typing import Any

from podsim.fabric.units import fmt_time
from podsim.scenarios.report.compare import finite_number
from podsim.scenarios.results.tables import Results

__all__ = ["findings"]

COMM_PHASES = ("dispatch", "combine", "other")


def _finite(x: Any) -> bool:
    return finite_number(x) is not None


def _timing(s: dict[str, Any]) -> list[str]:
    out = []
    bound = s.get("bound") or {}
    for ph in COMM_PHASES:
        p = (s.get("phases") or {}).get(ph)
        if not p or not _finite(p.get("completion_time_s")):
            continue
        text = f"{ph.capitalize()} takes {fmt_time(p['completion_time_s'])}"
        frac = p.get("fraction_of_bound")
        b = (bound.get("phases") or {}).get(ph) or {}
        if _finite(frac):
            text += f", {frac:.0%} of the physical bound speed"
            if b.get("limit"):
                text += (
                    f"; the bound is set by the {b.get('limit_tier') or b.get('limit_kind')} "
                    f"tier (link {b['limit']})"
                )
        out.append(text + ".")
    return out


def _compute_share(res: Results) -> list[str]:
    ph = res.phases
    if ph.empty:
        return []
    per = ph.groupby("phase")["duration_s"].mean()
    comp = float(per.get("compute", 0.0))
    comm = float(sum(per.get(p, 0.0) for p in COMM_PHASES))
    if comp + comm <= 0:
        return []
    return [
        f"On the mean rank, communication is {comm / (comp + comm):.0%} of a layer's phase time "
        f"({fmt_time(comm)} against {fmt_time(comp)} of expert compute)."
    ]


def _skew(s: dict[str, Any]) -> list[str]:
    a = s.get("analysis") or {}
    if not a:
        return []
    out = []
    skew = a.get("load_skew_max_vs_median")
    if _finite(skew) and skew > 1.05:
        out.append(
            f"Expert load is skewed: the busiest rank computes {skew:.2f}x the median rank "
            "(the configured skew, not a straggler)."
        )
    slow = a.get("stragglers") or []
    if slow:
        ranks = ", ".join(str(x["rank"]) for x in slow[:5])
        out.append(f"Stragglers: rank {ranks} ({slow[0]['reason']}).")
    elif a.get("straggler_definition"):
        out.append("No straggler, a straggler being " + a["straggler_definition"] + ".")
    return out


def _loss(s: dict[str, Any]) -> list[str]:
    c = s.get("counters") or {}
    names = (
        ("drops", "drops"),
        ("ecn_marks", "ECN marks"),
        ("pfc_pauses", "PFC pauses"),
        ("retransmitted_packets", "retransmissions"),
        ("timeouts", "timeouts"),
    )
    parts = [f"{int(c[k]):,} {name}" for k, name in names if _finite(c.get(k)) and c[k] > 0]
    if not c:
        return []
    if not parts:
        return ["The fabric ran loss-free: no drop, ECN mark, PFC pause or retransmission."]
    return ["Congestion: " + ", ".join(parts) + "."]


def _cost(res: Results) -> list[str]:
    cost = res.cost or {}
    summ, eff = cost.get("summary") or {}, cost.get("efficiency") or {}
    if not summ or not _finite(summ.get("capex_usd")):
        return []
    text = f"The cluster costs ${summ['capex_usd']:,.0f} capex"
    if _finite(eff.get("usd_per_GBps_per_gpu")):
        text += f", ${eff['usd_per_GBps_per_gpu']:,.0f} per GB/s of all-to-all bandwidth per GPU"
    none = summ.get("capex_conf.none")
    if _finite(none) and summ["capex_usd"] > 0:
        text += f"; {none / summ['capex_usd']:.0%} of the capex rests on prices with no source"
    return [text + "."]


def _links(s: dict[str, Any]) -> list[str]:
    """Per communication phase, the busiest link while it ran and whether any link was
    contended then (``link_utilisation_by_phase``, :mod:`podsim.scenarios.results.phase_links`)."""
    from podsim.scenarios.results.phase_links import CONTENDED_MTUS, phase_link_rows

    parts = []
    queues = bool((s.get("link_utilisation_by_phase") or {}).get("queues_modelled"))
    for r in phase_link_rows(s):
        if r["phase"] == "compute" or not r["busiest"]:
            continue
        text = f"{r['phase']} {r['busiest']} at {r['busiest_utilisation']:.0%}"
        n = r["contended_links"]
        if queues and n:
            text += f" ({n:,} contended links, the hottest {r['hottest']} at "
            text += f"{r['hottest_utilisation']:.0%})"
        elif queues:
            text += " (no link contended)"
        parts.append(text)
    if not parts:
        return []
    tail = f"; contended = a queue above {CONTENDED_MTUS} MTU while the phase ran" if queues else ""
    return ["Busiest link while each phase runs: " + "; ".join(parts) + tail + "."]


def _against(res: Results, baseline: Results, name: str, threshold: float) -> list[str]:
    from podsim.scenarios.report.compare import compare, formatted

    df = compare([baseline, res], [name, "this run"], threshold=threshold)
    rows = [c for c in formatted(df, [name, "this run"]) if c[-1] in ("better", "worse")]
    if not rows:
        return [f"Against {name}: no figure changed by {threshold:.0%} or more."]
    parts = [f"{c[0]} {c[3]} ({c[-1]})" for c in rows]
    return [f"Against {name}: " + "; ".join(parts) + "."]


def findings(
    res: Results,
    baseline: Results | None = None,
    *,
    baseline_name: str = "the baseline",
    threshold: float = 0.05,
) -> list[str]:
    """The report's opening sentences for run ``res`` (module docstring); with a ``baseline``
    run, one more sentence lists the figures that changed by ``threshold`` or more
    (:mod:`podsim.scenarios.report.compare`)."""
    s = res.summary
    out = [*_timing(s), *_compute_share(res), *_links(s), *_skew(s), *_loss(s), *_cost(res)]
    if baseline is not None:
        out += _against(res, baseline, baseline_name, threshold)
    return out
