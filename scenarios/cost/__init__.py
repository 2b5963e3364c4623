"""The cost model: catalog of unit prices and power, BOM from the cluster graph, capex, power,
TCO and cost-efficiency figures.

Typical use::

    from scenarios.cost import cost_cluster, efficiency
    cost = cost_cluster(graph, {"years": 4}, nic_model="panmai-920", layout="on-card-switch")
    cost.capex_by_category(); cost.tco(); efficiency(cost, results_summary)
"""

from __future__ import annotations

from scenarios.cost.bom import (
    CATEGORIES,
    COST_ITEMS,
    INTERCONNECT_CATEGORIES,
    BomContext,
    BomError,
    BomLine,
    bom_frame,
    build_bom,
    choose_link,
    choose_switch,
)
from scenarios.cost.catalog import Catalog, CatalogError, load_catalog
from scenarios.cost.model import CostBreakdown, cost_cluster, efficiency
from scenarios.cost.spec import CostSpec, CostSpecError, parse_cost_spec

__all__ = [
    "CATEGORIES",
    "COST_ITEMS",
    "INTERCONNECT_CATEGORIES",
    "BomContext",
    "BomError",
    "BomLine",
    "Catalog",
    "CatalogError",
    "CostBreakdown",
    "CostSpec",
    "CostSpecError",
    "bom_frame",
    "build_bom",
    "choose_link",
    "choose_switch",
    "cost_cluster",
    "efficiency",
    "load_catalog",
    "parse_cost_spec",
]
