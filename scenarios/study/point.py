"""The default study point: simulate a resolved scenario, price its cluster, return one row.

The row holds

- the run's summary, flattened to dotted keys (``phases.dispatch.completion_time_s``,
  ``link_utilisation.leaf-spine.max_utilisation``, ...), numbers and short strings only;
  wall-clock figures (``wall_s``, ``events_per_s``) are left out so that a row depends on the
  scenario alone and a resumed sweep equals an uninterrupted one;
- ``layer_time_s``: mean over (step, layer) of last phase end minus first phase start, all ranks
  and phases (dispatch, compute, combine) of that layer: the simulated MoE layer time;
- ``a2a_algbw_per_gpu_Bps``: mean of the dispatch and combine (or ``other``) algorithm
  bandwidth per GPU (NCCL definition, see :mod:`scenarios.results`);
- ``tokens_per_s``: for an MoE workload, ranks x tokens per rank / layer time;
- the cost summary (:meth:`scenarios.cost.CostBreakdown.summary`: capex and power per category,
  TCO, interconnect fraction) and the efficiency figures (:func:`scenarios.cost.efficiency`).
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

__all__ = ["flatten", "layer_time_s", "performance_row", "run_scenario_point"]

_VOLATILE = ("wall_s", "events_per_s")


def flatten(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested dicts -> ``{"a.b.c": value}``; lists and other containers are dropped."""
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(flatten(v, key + "."))
        elif v is None or isinstance(v, bool | int | float | str):
            out[key] = v
    return out


def layer_time_s(phases: pd.DataFrame) -> float:
    """Mean over (step, layer) of max(end_s) - min(start_s) across ranks and phases."""
    if phases.empty:
        return float("nan")
    g = phases.groupby(["step", "layer"])
    span = g["end_s"].max() - g["start_s"].min()
    return float(span.mean())


def performance_row(results: Any) -> dict[str, Any]:
    """Performance figures of one run (see the module docstring)."""
    summary = {k: v for k, v in results.summary.items() if k not in _VOLATILE}
    summary.pop("engine_info", None)
    row = flatten(summary)
    row["layer_time_s"] = layer_time_s(results.phases)
    bws = [
        row.get(f"phases.{ph}.algbw_per_gpu_Bps")
        for ph in ("dispatch", "combine", "other")
        if isinstance(row.get(f"phases.{ph}.algbw_per_gpu_Bps"), int | float)
    ]
    row["a2a_algbw_per_gpu_Bps"] = float(sum(bws) / len(bws)) if bws else float("nan")
    moe = (results.scenario.get("workload") or {}).get("moe")
    t = row["layer_time_s"]
    if moe and isinstance(t, float) and math.isfinite(t) and t > 0:
        row["tokens_per_s"] = moe["ep_size"] * moe["tokens_per_rank"] / t
    return row


def run_scenario_point(resolved: dict[str, Any]) -> dict[str, Any]:
    """Run one resolved scenario with the scenario layer and price it; one table row."""
    from scenarios.cost import efficiency
    from scenarios.cost.scenario import cost_of_scenario
    from scenarios.loader import load_scenario
    from scenarios.runner import run

    scenario, _ = load_scenario(resolved)
    results = run(scenario)
    row = performance_row(results)
    cost = cost_of_scenario(scenario)
    row.update(cost.summary())
    row.update(efficiency(cost, row))
    return row
