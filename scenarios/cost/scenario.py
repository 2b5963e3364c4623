"""The cost of a scenario's cluster, built as the runner builds it but never simulated.

The graph comes from :func:`scenarios.build.build_graph` (the same preset or builder, validated
against the topology contract); the NIC model is ``cluster.nic.model`` (catalog item
``nic-<model>`` when the catalog has one), the node layout ``cluster.layout``, and the options
the scenario's ``cost:`` section (:class:`scenarios.cost.spec.CostSpec`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from scenarios.cost.model import CostBreakdown, cost_cluster
from scenarios.cost.spec import parse_cost_spec

__all__ = ["cost_of_scenario", "write_cost"]


def cost_of_scenario(
    scenario: Any,
    overrides: Iterable[str] = (),
    *,
    cost: Mapping[str, Any] | None = None,
    graph: Any = None,
) -> CostBreakdown:
    """Price a scenario (a :class:`scenarios.schema.Scenario`, a file, a built-in name or a
    mapping; ``overrides`` are ``--set`` strings). ``cost`` entries replace the scenario's own
    ``cost:`` keys; ``graph`` is the already built cluster graph (else it is built)."""
    from scenarios.build import build_graph
    from scenarios.loader import load_scenario
    from scenarios.schema import Scenario

    if not isinstance(scenario, Scenario) or overrides:
        ref = scenario if not isinstance(scenario, Path) else str(scenario)
        scenario, _ = load_scenario(ref, list(overrides))
    spec = parse_cost_spec({**(scenario.cost or {}), **(cost or {})})
    if graph is None:
        graph = build_graph(scenario)
    return cost_cluster(
        graph,
        spec,
        nic_model=scenario.cluster.nic.model,
        layout=scenario.cluster.layout,
    )


def write_cost(
    scenario: Any,
    out_dir: str | Path,
    *,
    graph: Any = None,
    summary: Mapping[str, Any] | None = None,
) -> list[Path]:
    """Write a run's cost files under ``out_dir``: ``bom.csv`` (the BOM lines) and
    ``cost.json`` (capex and power by category, TCO, interconnect fraction next to the rule of
    thumb, and, given the run's ``summary``, the efficiency figures). Returns the paths."""
    import json
    import math

    from scenarios.cost.model import efficiency

    cost = cost_of_scenario(scenario, graph=graph)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    bom = out / "bom.csv"
    cost.bom.to_csv(bom, index=False)
    doc: dict[str, Any] = {
        "summary": cost.summary(),
        "tco": cost.tco(),
        "capex_by_category": cost.capex_by_category(),
        "power_by_category": cost.power_by_category(),
    }
    if summary is not None:
        doc["efficiency"] = efficiency(cost, summary)

    def clean(x: Any) -> Any:
        if isinstance(x, dict):
            return {k: clean(v) for k, v in x.items()}
        return None if isinstance(x, float) and not math.isfinite(x) else x

    path = out / "cost.json"
    path.write_text(json.dumps(clean(doc), indent=2) + "\n")
    return [bom, path]
