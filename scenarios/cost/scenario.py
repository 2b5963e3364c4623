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

__all__ = ["cost_of_scenario"]


def cost_of_scenario(
    scenario: Any,
    overrides: Iterable[str] = (),
    *,
    cost: Mapping[str, Any] | None = None,
) -> CostBreakdown:
    """Price a scenario (a :class:`scenarios.schema.Scenario`, a file, a built-in name or a
    mapping; ``overrides`` are ``--set`` strings). ``cost`` entries replace the scenario's own
    ``cost:`` keys."""
    from scenarios.build import build_graph
    from scenarios.loader import load_scenario
    from scenarios.schema import Scenario

    if not isinstance(scenario, Scenario) or overrides:
        ref = scenario if not isinstance(scenario, Path) else str(scenario)
        scenario, _ = load_scenario(ref, list(overrides))
    spec = parse_cost_spec({**(scenario.cost or {}), **(cost or {})})
    graph = build_graph(scenario)
    return cost_cluster(
        graph,
        spec,
        nic_model=scenario.cluster.nic.model,
        layout=scenario.cluster.layout,
    )
