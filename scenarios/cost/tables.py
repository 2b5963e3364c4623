"""The cost breakdown as rich tables (what ``podsim cost`` prints)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from podsim.scenarios.cost.bom import CATEGORIES, INTERCONNECT_CATEGORIES
from podsim.scenarios.cost.model import CostBreakdown
from rich.table import Table
from rich.text import Text

__all__ = [
    "CONFIDENCE_MARK",
    "bom_table",
    "breakdown_table",
    "confidence_table",
    "cost_tables",
    "idle_ports_note",
    "ports_text",
    "savings_table",
    "sensitivity_table",
    "usd",
    "usd_amount",
]


def usd(x: float | None) -> str:
    """``1234567.0`` -> ``'$1,234,567'``; ``-`` for a missing figure (None, NaN)."""
    if x is None or not math.isfinite(x):
        return "-"
    return f"${x:,.0f}"


def usd_amount(x: float | None) -> str:
    """Like :func:`usd` from $100 up; below, three significant digits in plain decimals (the
    cost of one MoE layer is micro-dollars: ``1.59e-06`` -> ``'$0.00000159'``)."""
    if x is None or not math.isfinite(x) or abs(x) >= 100:
        return usd(x)
    if x == 0:
        return "$0"
    decimals = max(2, 2 - math.floor(math.log10(abs(x))))
    return f"${x:.{decimals}f}"


#: how the tables write a price confidence level (``none``: no source, a documented guess)
CONFIDENCE_MARK = {"high": "high", "medium": "med", "low": "low", "none": "NONE", "user": "user"}
CONFIDENCE_NOTE = (
    "(conf) = confidence of the unit price (catalog `confidence`): high/med/low = a source "
    "of that quality, NONE = no source (a documented guess), user = set by the scenario"
)


def ports_text(used: int, bought: int) -> str:
    """``'8/64'`` (ports used / ports bought) for a switch line, else ``''``."""
    return f"{used:,}/{bought:,}" if bought else ""


def idle_ports_note(cost: CostBreakdown) -> str:
    """A sentence on switch lines that buy whole boxes mostly idle (under half their ports
    used), or ``''``."""
    low = [
        ln
        for ln in cost.lines
        if ln.ports_bought and ln.ports_used < ln.ports_bought / 2 and ln.unit_price_usd > 0
    ]
    if not low or cost.spec.switch_pricing == "port":
        return ""
    parts = [
        f"{ln.detail.split(':')[0]} {ln.item} uses {ln.ports_used:,} of {ln.ports_bought:,} ports "
        f"({ln.ports_used / ln.ports_bought:.0%}) for {usd(ln.capex_usd)}"
        for ln in low
    ]
    return (
        "Whole switch boxes are bought: "
        + "; ".join(parts)
        + ". cost.switch_pricing=port prices only the used ports (a lower bound)."
    )


def bom_table(cost: CostBreakdown, title: str = "Bill of materials") -> Table:
    # the detail goes under the item name, in the one column that may wrap: as a column of
    # its own it left no room on an 80-column terminal (or a pipe), where rich then shrank it to
    # nothing and cut the figures ("179,200…")
    t = Table(title=title, title_justify="left")
    t.add_column("category", no_wrap=True)
    t.add_column("item (detail)", overflow="fold", ratio=1)
    t.add_column("count", justify="right", no_wrap=True)
    # the price's confidence goes under the unit price: a column of its own left the item
    # column no room on an 80-column terminal
    t.add_column("unit (conf)", justify="right", no_wrap=True)
    t.add_column("capex", justify="right", no_wrap=True)
    t.add_column("power", justify="right", no_wrap=True)
    for ln in cost.lines:
        item = Text(ln.item + ("*" if ln.estimate else ""))
        if ln.detail:
            item.append("\n" + ln.detail, style="dim")
        if ln.ports_bought:
            item.append(
                f"\nports used/bought {ports_text(ln.ports_used, ln.ports_bought)}", style="dim"
            )
        unit = Text(usd(ln.unit_price_usd) + "\n")
        conf = CONFIDENCE_MARK.get(ln.confidence, ln.confidence)
        unit.append(conf, style="bold red" if ln.confidence == "none" else "dim")
        t.add_row(
            ln.category,
            item,
            f"{ln.count:,}",
            unit,
            usd(ln.capex_usd),
            f"{ln.power_w:,.0f} W",
        )
    caption = [
        "* estimate: no public price or power (see scenarios/cost/catalog.yaml)",
        CONFIDENCE_NOTE,
    ]
    note = idle_ports_note(cost)
    if note:
        caption.append(note)
    t.caption = "\n".join(caption)
    t.caption_justify = "left"
    return t


def confidence_table(cost: CostBreakdown, title: str = "Capex by price confidence") -> Table:
    """Capex per price confidence level and the items at each level: how much of the total
    rests on prices with no source."""
    by = cost.capex_by_confidence()
    total = cost.capex_usd
    items: dict[str, set[str]] = {}
    for ln in cost.lines:
        if ln.capex_usd > 0:
            items.setdefault(ln.confidence, set()).add(ln.item)
    t = Table(title=title, title_justify="left")
    t.add_column("price conf.", no_wrap=True)
    t.add_column("capex", justify="right", no_wrap=True)
    t.add_column("share", justify="right", no_wrap=True)
    t.add_column("items", overflow="fold", ratio=1)
    for level, v in by.items():
        if v == 0:
            continue
        t.add_row(
            CONFIDENCE_MARK.get(level, level),
            usd(v),
            f"{v / total:.1%}" if total else "-",
            ", ".join(sorted(items.get(level, ()))),
        )
    return t


def breakdown_table(cost: CostBreakdown, title: str = "Cost breakdown") -> Table:
    capex, power = cost.capex_by_category(), cost.power_by_category()
    total, watts = cost.capex_usd, cost.power_w
    t = Table(title=title, title_justify="left")
    t.add_column("category")
    t.add_column("capex", justify="right")
    t.add_column("capex share", justify="right")
    t.add_column("power", justify="right")
    t.add_column("power share", justify="right")
    for c in CATEGORIES:
        if capex.get(c, 0) == 0 and power.get(c, 0) == 0:
            continue
        mark = " (interconnect)" if c in INTERCONNECT_CATEGORIES else ""
        t.add_row(
            c + mark,
            usd(capex[c]),
            f"{capex[c] / total:.1%}" if total else "-",
            f"{power[c] / 1000:,.1f} kW",
            f"{power[c] / watts:.1%}" if watts else "-",
        )
    t.add_section()
    t.add_row("total", usd(total), "100%", f"{watts / 1000:,.1f} kW", "100%")
    tco = cost.tco()
    t.add_row(
        f"TCO {tco['years']:g} y (${tco['usd_per_kwh']:g}/kWh, PUE {tco['pue']:g})",
        usd(tco["tco_usd"]),
        "",
        f"{tco['energy_kwh'] / 1e6:,.2f} GWh",
        "",
    )
    t.add_row(
        "interconnect fraction (scale-out NICs, switches, optics, cables)",
        usd(cost.interconnect_usd),
        f"{cost.interconnect_fraction:.1%}",
        "",
        "",
    )
    if cost.gpus:
        t.add_row("per GPU", usd(total / cost.gpus), "", f"{watts / cost.gpus:,.0f} W", "")
    rule = cost.rule_of_thumb
    if rule is not None:
        # a share of capex, never of power: printed under the table, not in a power column
        t.caption = (
            f"Cross-check: published rule of thumb, interconnect = {rule:.0%} of cluster capex "
            "(Epoch AI; catalog ref-interconnect-fraction); here "
            f"{cost.interconnect_fraction:.1%}."
        )
        t.caption_justify = "left"
    return t


def cost_tables(cost: CostBreakdown) -> list[Table]:
    return [bom_table(cost), breakdown_table(cost), confidence_table(cost)]


def sensitivity_table(
    df: Any,
    metric: str,
    cost_metric: str,
    maximize: bool,
    threshold: float | None = None,
    title: str = "Which unsourced prices decide the answer",
) -> Table:
    """The study's answers at catalog prices and, per low-confidence price an answer depends
    on, the price at which it flips
    (:func:`podsim.scenarios.cost.sensitivity.price_sensitivity`)."""
    from podsim.scenarios.cost.sensitivity import price_sensitivity, study_answers

    t = Table(title=title, title_justify="left")
    t.add_column("question (answer)", overflow="fold", ratio=1)
    t.add_column("price (conf)", overflow="fold")
    t.add_column("catalog", justify="right", no_wrap=True)
    t.add_column("flips below", justify="right", no_wrap=True)
    t.add_column("flips above", justify="right", no_wrap=True)
    if not any(c.startswith("units.") for c in df.columns):
        t.caption = "no per-item units in the results (made by an older podsim): run again"
        return t
    answers = study_answers(df, metric, cost_metric, maximize, threshold)
    sens = price_sensitivity(df, metric, cost_metric, maximize, threshold)
    for a in answers:
        rows = sens[sens.question == a.question] if len(sens) else sens
        first = True
        for r in rows.itertuples():
            mark = CONFIDENCE_MARK.get(r.confidence, r.confidence)
            t.add_row(
                f"{a.question} ({a.answer})" if first else "",
                Text(f"{r.item} ({mark})", style="bold" if r.decides else ""),
                usd(r.price_usd),
                f"{usd(r.flip_below_usd)} -> {r.answer_below}" if r.answer_below else "never",
                f"{usd(r.flip_above_usd)} -> {r.answer_above}" if r.answer_above else "never",
            )
            first = False
        if first:
            t.add_row(f"{a.question} ({a.answer})", "no low-confidence price changes it", "",
                      "", "")  # fmt: skip
        t.add_section()
    t.caption = (
        "Per price of confidence NONE or low: the nearest price below / above the catalog's at "
        "which the answer changes (-> the new answer; never: it holds down to $0 / at any "
        "price). A low-confidence price not listed under a question cannot change its answer "
        "at any price >= $0. Bold: the flip is within a factor of 2 of the catalog price. "
        "Capex is linear in each price at the BOM's current choice of parts "
        "(scenarios/cost/sensitivity.py)."
    )
    t.caption_justify = "left"
    return t


def savings_table(
    baseline: CostBreakdown | Mapping[str, float],
    variant: CostBreakdown | Mapping[str, float],
    base_name: str,
    variant_name: str,
) -> Table:
    """The variant's saving over the baseline at every scope of
    :data:`podsim.scenarios.cost.compare.SCOPES` (breakdowns or ``capex_by_category`` mappings)."""
    from podsim.scenarios.cost.compare import scope_savings

    def capex(x: CostBreakdown | Mapping[str, float]) -> Mapping[str, float]:
        return x.capex_by_category() if isinstance(x, CostBreakdown) else x

    df = scope_savings(capex(baseline), capex(variant))
    t = Table(title=f"{variant_name} vs {base_name}: capex saving by scope", title_justify="left")
    t.add_column("scope")
    t.add_column(base_name, justify="right")
    t.add_column(variant_name, justify="right")
    t.add_column("saving", justify="right")
    t.add_column("saving %", justify="right")
    for r in df.itertuples():
        t.add_row(
            r.scope,
            usd(r.baseline_usd),
            usd(r.variant_usd),
            usd(r.saving_usd),
            f"{r.saving_fraction:.1%}",
        )
    return t
