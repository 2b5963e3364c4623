"""The cost of a scenario's cluster, built as the runner builds it but never simulated.

The graph comes from :func:`scenarios.build.cluster.build_graph` (the same preset or builder,
validated
against the topology contract); the NIC model is ``cluster.nic.model`` (catalog item
``nic-<model>`` when the catalog has one), the node layout ``cluster.layout``, and the options
the scenario's ``cost:`` section (:class:`podsim.scenarios.cost.spec.CostSpec`).

Every ``podsim run`` prices its cluster with :func:`cost_report` and writes the two files of
:func:`write_cost_files` (``bom.csv``, ``cost.json``) next to its other results.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd
from podsim.scenarios.cost.model import CostBreakdown, cost_cluster, efficiency
from podsim.scenarios.cost.spec import parse_cost_spec
from podsim.scenarios.errors import ScenarioError

__all__ = [
    "check_catalog",
    "cost_document",
    "cost_of_scenario",
    "cost_report",
    "write_cost",
    "write_cost_files",
]


def cost_of_scenario(
    scenario: Any,
    overrides: Iterable[str] = (),
    *,
    cost: Mapping[str, Any] | None = None,
    graph: Any = None,
    seed: int | None = None,
    force: bool = False,
) -> CostBreakdown:
    """Price a scenario (a :class:`scenarios.input.schema.Scenario`, a file, a built-in name or a
    mapping; ``overrides`` are ``--set`` strings, ``seed`` the ``--seed``). ``cost`` entries
    replace the scenario's own ``cost:`` keys; ``graph`` is the already built cluster graph
    (else it is built; ``force``: even over the size budget, see
    :func:`podsim.scenarios.build.limits.check_cluster_size`)."""
    from podsim.scenarios.build.cluster import build_graph
    from podsim.scenarios.input.loader import load_scenario
    from podsim.scenarios.input.schema import Scenario

    if not isinstance(scenario, Scenario) or overrides or seed is not None:
        ref = scenario if not isinstance(scenario, Path) else str(scenario)
        if isinstance(ref, Scenario):
            ref = ref.resolved()
        scenario, doc = load_scenario(ref, list(overrides), seed=seed)
    else:
        doc = None
    own = scenario.cost.model_dump() if scenario.cost is not None else {}
    spec = parse_cost_spec({**own, **(cost or {})}) if cost else parse_cost_spec(scenario.cost)
    if graph is None:
        try:
            graph = build_graph(scenario, force=force)
        except ScenarioError as exc:
            raise (doc.locate(exc) if doc is not None else exc) from None
    return cost_cluster(
        graph,
        spec,
        nic_model=scenario.cluster.nic.model,
        layout=scenario.cluster.layout,
        link_layer=getattr(scenario.cluster.nic, "link_layer", None),
        layout_params=scenario.cluster.layout_params,
    )


def check_catalog(scenario: Any) -> None:
    """Load the catalog a scenario's ``cost:`` section names (with its price overrides) and
    resolve its ``cost.accelerator``, so that a bad catalog file, price or accelerator name is
    reported before anything is simulated.

    Raises :class:`podsim.scenarios.cost.catalog.CatalogError` or
    :class:`podsim.scenarios.cost.bom.BomError` (both ``ValueError``)."""
    from podsim.scenarios.cost.bom import accelerator_item
    from podsim.scenarios.cost.catalog import load_catalog

    spec = parse_cost_spec(scenario.cost)
    if spec.catalog is not None or spec.prices or spec.accelerator or spec.gpu:
        catalog = load_catalog(spec.catalog, spec.prices)
        accelerator_item(catalog, spec)  # an unknown cost.accelerator fails before the run


def cost_document(
    cost: CostBreakdown, performance: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """What ``cost.json`` holds: ``summary`` (capex and power totals and per category, TCO,
    interconnect fraction next to the rule of thumb), ``tco``, ``capex_by_category``,
    ``power_by_category``, ``capex_by_confidence``, ``items`` (:meth:`CostBreakdown.items_row`)
    and, given a run's figures (its summary or
    :meth:`podsim.scenarios.results.tables.Results.performance`), ``efficiency``."""
    doc: dict[str, Any] = {
        "summary": cost.summary(),
        "tco": cost.tco(),
        "capex_by_category": cost.capex_by_category(),
        "power_by_category": cost.power_by_category(),
        "capex_by_confidence": cost.capex_by_confidence(),
        # per item: priced units by category, unit price, price confidence (what a study's
        # price sensitivity recomputes capex from, scenarios/cost/sensitivity.py)
        "items": cost.items_row(),
    }
    if performance is not None:
        doc["efficiency"] = efficiency(cost, performance)
    return doc


def cost_report(
    scenario: Any, *, graph: Any = None, performance: Mapping[str, Any] | None = None
) -> tuple[dict[str, Any], pd.DataFrame]:
    """The :func:`cost_document` and the BOM table of a scenario's cluster."""
    cost = cost_of_scenario(scenario, graph=graph)
    return cost_document(cost, performance), cost.bom


def write_cost_files(
    out_dir: str | Path, doc: Mapping[str, Any], bom: pd.DataFrame | None
) -> list[Path]:
    """Write ``bom.csv`` (when there is a BOM) and ``cost.json`` (NaN as null) under
    ``out_dir``; returns the paths."""
    from podsim.scenarios.results.tables import json_safe

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    if bom is not None:
        p = out / "bom.csv"
        bom.to_csv(p, index=False)
        written.append(p)
    p = out / "cost.json"
    p.write_text(json.dumps(json_safe(dict(doc)), indent=2) + "\n")
    written.append(p)
    return written


def write_cost(
    scenario: Any,
    out_dir: str | Path,
    *,
    graph: Any = None,
    summary: Mapping[str, Any] | None = None,
) -> list[Path]:
    """Price ``scenario`` and write its cost files under ``out_dir``: ``bom.csv`` (the BOM
    lines) and ``cost.json`` (:func:`cost_document`; the efficiency figures given the run's
    ``summary``). Returns the paths."""
    return write_cost_files(out_dir, *cost_report(scenario, graph=graph, performance=summary))
