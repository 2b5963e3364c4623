"""The cost model: catalog of unit prices and power, BOM from the cluster graph, capex, power,
TCO and cost-efficiency figures.

Typical use::

    from podsim.scenarios.cost import cost_cluster, efficiency
    cost = cost_cluster(graph, {"years": 4}, nic_model="panmai-920", layout="on-card-switch")
    cost.capex_by_category(); cost.tco(); efficiency(cost, results_summary)

Names load lazily, so that the scenario schema can use :mod:`podsim.scenarios.cost.spec` without
importing the BOM machinery (networkx, pandas).
"""

from __future__ import annotations

from typing import Any

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

#: where the names of ``__all__`` live, searched in this order on first use
_MODULES = (
    "podsim.scenarios.cost.spec",
    "podsim.scenarios.cost.catalog",
    "podsim.scenarios.cost.model",
    "podsim.scenarios.cost.bom",
)


def __getattr__(name: str) -> Any:
    if name in __all__:
        import importlib

        for module in _MODULES:
            mod = importlib.import_module(module)
            if hasattr(mod, name):
                return getattr(mod, name)
    raise AttributeError(f"module 'podsim.scenarios.cost' has no attribute {name!r}")
