"""Capex, power, TCO and cost-efficiency of a cluster, from its BOM.

- Capex = sum of unit price x count over the BOM; power = sum of unit power x count (typical
  power of switches *without* optics, optics counted separately: docs/physics.md "Switches").
- TCO over ``years`` = capex + energy cost, energy = power x PUE x hours x $/kWh (8766 h per
  year). Maintenance, space and staff are not modelled.
- Interconnect fraction = scale-out NICs + switches + optics + cables over total capex, shown
  next to the published rule of thumb of about 19 % (Epoch AI, docs/physics.md "Cost"): a
  cross-check, never an input.
- Efficiency ties cost to a simulated result summary (:func:`efficiency`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import networkx as nx
import pandas as pd
from podsim.scenarios.cost.bom import (
    CATEGORIES,
    INTERCONNECT_CATEGORIES,
    BomLine,
    bom_frame,
    build_bom,
)
from podsim.scenarios.cost.catalog import Catalog, load_catalog
from podsim.scenarios.cost.spec import CostSpec, parse_cost_spec

__all__ = [
    "HOURS_PER_YEAR",
    "SUMMARY_KEYS",
    "CostBreakdown",
    "cost_cluster",
    "efficiency",
]

HOURS_PER_YEAR = 8766.0  # 365.25 days

#: Keys :func:`efficiency` looks for in a result summary, first found wins (SI units).
SUMMARY_KEYS: dict[str, tuple[str, ...]] = {
    "bw_per_gpu_Bps": (
        "a2a_algbw_per_gpu_Bps",
        "algbw_per_gpu_Bps",
        "phases.dispatch.algbw_per_gpu_Bps",
        "phases.other.algbw_per_gpu_Bps",
        "busbw_per_gpu_Bps",
    ),
    "layer_time_s": ("layer_time_s", "moe_layer_time_s", "completion_time_s"),
    "tokens_per_s": ("tokens_per_s", "throughput_tokens_per_s"),
    "tokens": ("tokens", "total_tokens"),
}


@dataclass(frozen=True)
class CostBreakdown:
    """The BOM of one cluster with its cost options; every figure derives from ``lines``."""

    lines: tuple[BomLine, ...]
    spec: CostSpec
    gpus: int
    servers: int
    rule_of_thumb: float | None = None
    #: catalog unit price (USD) of every BOM item, before any line's scale
    prices: tuple[tuple[str, float], ...] = ()

    @property
    def bom(self) -> pd.DataFrame:
        return bom_frame(list(self.lines))

    @property
    def capex_usd(self) -> float:
        return math.fsum(ln.capex_usd for ln in self.lines)

    @property
    def power_w(self) -> float:
        return math.fsum(ln.power_w for ln in self.lines)

    def _by(self, attr: str) -> dict[str, float]:
        out = {c: 0.0 for c in CATEGORIES}
        for ln in self.lines:
            out[ln.category] = out.get(ln.category, 0.0) + getattr(ln, attr)
        return out

    def capex_by_category(self) -> dict[str, float]:
        """Capex (USD) per category, every category of :data:`CATEGORIES` present (0 if none)."""
        return self._by("capex_usd")

    def power_by_category(self) -> dict[str, float]:
        """Power (W) per category."""
        return self._by("power_w")

    def capex_by_confidence(self) -> dict[str, float]:
        """Capex (USD) per price confidence level (high, medium, low, none, user; each
        present, 0 if none): how much of the total rests on unsourced prices."""
        from podsim.scenarios.cost.catalog import CONFIDENCE_LEVELS

        out = {c: 0.0 for c in CONFIDENCE_LEVELS}
        for ln in self.lines:
            out[ln.confidence] = out.get(ln.confidence, 0.0) + ln.capex_usd
        return out

    def item_units(self) -> dict[str, dict[str, float]]:
        """Per catalog item, the priced units per category (count x the line's price scale,
        e.g. a chassis of 4 GPU slots is half a unit): capex is linear in each item's price,
        d capex / d price = the units. The unit prices are in :meth:`item_prices`."""
        out: dict[str, dict[str, float]] = {}
        prices = self.item_prices()
        for ln in self.lines:
            base = prices[ln.item]
            units = ln.count * (ln.unit_price_usd / base) if base > 0 else float(ln.count)
            if ln.unit_price_usd == 0 and base > 0:
                units = 0.0  # priced elsewhere (a PCIe chip on the NIC card)
            cats = out.setdefault(ln.item, {})
            cats[ln.category] = cats.get(ln.category, 0.0) + units
        return out

    def item_prices(self) -> dict[str, float]:
        """Catalog unit price (USD) of every item in the BOM."""
        return dict(self.prices)

    def item_confidence(self) -> dict[str, str]:
        """Price confidence of every item in the BOM."""
        return {ln.item: ln.confidence for ln in self.lines}

    @property
    def interconnect_usd(self) -> float:
        cap = self.capex_by_category()
        return math.fsum(cap[c] for c in INTERCONNECT_CATEGORIES)

    @property
    def interconnect_fraction(self) -> float:
        total = self.capex_usd
        return self.interconnect_usd / total if total > 0 else float("nan")

    def tco(
        self,
        years: float | None = None,
        usd_per_kwh: float | None = None,
        pue: float | None = None,
    ) -> dict[str, float]:
        """Capex + energy over ``years`` (defaults from the spec): energy_kwh =
        power_w / 1000 x pue x 8766 h x years."""
        years = self.spec.years if years is None else years
        usd_per_kwh = self.spec.usd_per_kwh if usd_per_kwh is None else usd_per_kwh
        pue = self.spec.pue if pue is None else pue
        energy_kwh = self.power_w / 1000.0 * pue * HOURS_PER_YEAR * years
        energy_usd = energy_kwh * usd_per_kwh
        return {
            "years": years,
            "usd_per_kwh": usd_per_kwh,
            "pue": pue,
            "capex_usd": self.capex_usd,
            "energy_kwh": energy_kwh,
            "energy_usd": energy_usd,
            "tco_usd": self.capex_usd + energy_usd,
        }

    def summary(self) -> dict[str, float]:
        """Flat figures for a results row: capex/power totals and per category, TCO, the
        interconnect fraction and the rule of thumb."""
        tco = self.tco()
        out: dict[str, float] = {
            "cluster_gpus": float(self.gpus),
            "cluster_servers": float(self.servers),
            "capex_usd": self.capex_usd,
            "power_w": self.power_w,
            "energy_usd": tco["energy_usd"],
            "tco_usd": tco["tco_usd"],
            "tco_years": tco["years"],
            "interconnect_usd": self.interconnect_usd,
            "interconnect_fraction": self.interconnect_fraction,
            "interconnect_rule_of_thumb": (
                float("nan") if self.rule_of_thumb is None else self.rule_of_thumb
            ),
        }
        out.update({f"capex.{c}": v for c, v in self.capex_by_category().items()})
        out.update({f"power.{c}": v for c, v in self.power_by_category().items()})
        out.update({f"capex_conf.{c}": v for c, v in self.capex_by_confidence().items()})
        return out

    def items_row(self) -> dict[str, Any]:
        """Per-item figures for a study row: ``units.<category>.<item>`` (priced units),
        ``price.<item>`` (unit price, USD) and ``conf.<item>`` (price confidence); what a
        price sensitivity (:mod:`podsim.scenarios.cost.sensitivity`) recomputes capex from."""
        row: dict[str, Any] = {}
        for item, cats in self.item_units().items():
            row.update({f"units.{c}.{item}": u for c, u in cats.items()})
        row.update({f"price.{n}": p for n, p in self.item_prices().items()})
        row.update({f"conf.{n}": c for n, c in self.item_confidence().items()})
        return row


def cost_cluster(
    graph: nx.Graph,
    spec: CostSpec | dict[str, Any] | None = None,
    *,
    catalog: Catalog | None = None,
    nic_model: str | None = None,
    layout: str | None = None,
    link_layer: str | None = None,
    layout_params: Mapping[str, Any] | None = None,
) -> CostBreakdown:
    """Price the cluster ``graph`` (see :func:`scenarios.cost.bom.build_bom` for the BOM rules)."""
    spec = parse_cost_spec(spec)
    if catalog is None:
        catalog = load_catalog(spec.catalog, spec.prices)
    lines = build_bom(graph, spec, catalog=catalog, nic_model=nic_model, layout=layout,
                      link_layer=link_layer, layout_params=layout_params)  # fmt: skip
    gpu_ids: set[int] = set()
    servers: set[int] = set()
    for _, d in graph.nodes(data=True):
        role = d.get("role")
        if role in ("nic", "gpu"):
            servers.add(int(d["server"]))
        if role == "gpu":
            gpu_ids.add(int(d["gpu"]))
        elif role == "nic" and int(d.get("gpu", -1)) >= 0:
            gpu_ids.update(range(int(d["gpu"]), int(d["gpu"]) + int(d.get("gpu_count", 1))))
    rule = catalog.items.get("ref-interconnect-fraction")
    return CostBreakdown(
        tuple(lines),
        spec,
        gpus=len(gpu_ids),
        servers=len(servers),
        rule_of_thumb=getattr(rule, "value", None),
        prices=tuple(
            sorted({ln.item: float(catalog.get(ln.item).price_usd) for ln in lines}.items())
        ),
    )


def _pick(summary: dict[str, Any], what: str) -> float | None:
    for key in SUMMARY_KEYS[what]:
        v = summary.get(key)
        if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) and v > 0:
            return float(v)
    return None


def efficiency(cost: CostBreakdown, summary: Mapping[str, Any]) -> dict[str, float]:
    """Cost-efficiency figures from a cost breakdown and a simulated result summary.

    - ``usd_per_GBps_per_gpu``: capex per GPU / all-to-all bandwidth per GPU in GB/s (the
      algorithm bandwidth as DeepEP defines it, else bus bandwidth; see :data:`SUMMARY_KEYS`);
      ``interconnect_usd_per_GBps_per_gpu`` the same with the interconnect capex only.
    - ``usd_per_moe_layer``: TCO spread evenly over the service life, times one simulated MoE
      layer time (what one layer on the whole cluster costs).
    - ``tokens_per_s_per_musd``: tokens/s per million dollars of capex, when the summary gives
      tokens/s (or tokens and a layer time).

    ``summary`` may be flat or nested (a run's ``summary.json``: ``phases.dispatch...``).
    Figures whose inputs are missing are NaN, never guessed.
    """
    from podsim.scenarios.results.tables import flatten

    summary = flatten(dict(summary))
    nan = float("nan")
    gpus = cost.gpus
    bw = _pick(summary, "bw_per_gpu_Bps")
    t = _pick(summary, "layer_time_s")
    tps = _pick(summary, "tokens_per_s")
    if tps is None:
        tokens = _pick(summary, "tokens")
        if tokens is not None and t is not None:
            tps = tokens / t
    tco = cost.tco()
    service_s = tco["years"] * HOURS_PER_YEAR * 3600.0
    per_gpu = cost.capex_usd / gpus if gpus else nan
    ic_per_gpu = cost.interconnect_usd / gpus if gpus else nan
    return {
        "usd_per_gpu": per_gpu,
        "usd_per_GBps_per_gpu": per_gpu / (bw / 1e9) if bw else nan,
        "interconnect_usd_per_GBps_per_gpu": ic_per_gpu / (bw / 1e9) if bw else nan,
        "usd_per_moe_layer": tco["tco_usd"] / service_s * t if t else nan,
        "tokens_per_s_per_musd": tps / (cost.capex_usd / 1e6) if tps and cost.capex_usd else nan,
    }
