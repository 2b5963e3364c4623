"""The default study point: simulate a resolved scenario, price its cluster, return one row.

The row holds

- the run's summary, flattened to dotted keys (``phases.dispatch.completion_time_s``,
  ``link_utilisation.leaf-spine.max_utilisation``, ...), numbers and short strings only;
  wall-clock figures (``wall_s``, ``events_per_s``) are left out so that a row depends on the
  scenario alone and a resumed sweep equals an uninterrupted one;
- ``layer_time_s``: mean over (step, layer) of last phase end minus first phase start, all ranks
  and phases (dispatch, compute, combine) of that layer: the simulated MoE layer time;
- ``a2a_algbw_per_gpu_Bps``: mean of the dispatch and combine (or ``other``) algorithm
  bandwidth per GPU (NCCL definition, see :mod:`podsim.scenarios.results.tables`);
- ``tokens_per_s``: for an MoE workload, ranks x tokens per rank / layer time;
- the cost summary (:meth:`scenarios.cost.CostBreakdown.summary`: capex and power per category,
  TCO, interconnect fraction) and the efficiency figures (:func:`podsim.scenarios.cost.efficiency`);
- per BOM item ``units.<category>.<item>``, ``price.<item>`` and ``conf.<item>``
  (:meth:`scenarios.cost.CostBreakdown.items_row`), for the price sensitivity of the study's
  answer (:mod:`podsim.scenarios.cost.sensitivity`).
"""

from __future__ import annotations

from typing import Any

from podsim.scenarios.results.tables import flatten, layer_time_s

__all__ = ["flatten", "layer_time_s", "performance_row", "run_scenario_point"]


def performance_row(results: Any) -> dict[str, Any]:
    """Performance figures of one run (:meth:`scenarios.results.tables.Results.performance`)."""
    return results.performance()


def run_scenario_point(resolved: dict[str, Any], allow_plugins: bool = False) -> dict[str, Any]:
    """Run one resolved scenario with the scenario layer (which also prices its cluster);
    one table row: the performance figures, the cost summary and the efficiency figures.
    ``allow_plugins``: the points may name plug-in code (``sweep --allow-plugins``)."""
    from podsim.scenarios.input.loader import load_scenario
    from podsim.scenarios.runner import run

    scenario, _ = load_scenario(resolved)
    results = run(scenario, allow_plugins=allow_plugins)
    cost = results.cost or {}
    if "error" in cost:
        raise ValueError(f"the cluster could not be priced: {cost['error']}")
    row = results.performance()
    row.update(cost["summary"])
    row.update(cost["efficiency"])
    row.update(cost.get("items") or {})
    return row
