"""Engines: the ways a scenario can be run, behind one registry.

An engine is a callable ``engine(ctx: RunContext) -> EngineOutput``. It reads the built cluster
and the workload trace from the context and returns the raw result tables whose schemas are
documented in :mod:`scenarios.results.tables`. Simulating engines (``packet``, ``flow``) offer a
:class:`scenarios.execution.timeline.Transport` and let
:func:`scenarios.execution.timeline.run_timeline` play the
layer timeline (dispatch -> compute -> combine per rank) over it; an analytic engine (``bound``)
fills the tables itself.

Built-ins register by importing their adapter modules (:data:`ENGINE_MODULES`, loaded on the
registry's first lookup); adding an engine is a module that registers itself with
``@ENGINES.register(name, description)`` and one line in that tuple.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pandas as pd
from podsim.fabric.registry import Registry
from podsim.scenarios.results.tables import conform, summarise

if TYPE_CHECKING:
    from podsim.scenarios.build.cluster import Cluster
    from podsim.scenarios.input.schema import Scenario

__all__ = [
    "ENGINES",
    "ENGINE_MODULES",
    "EngineOutput",
    "RunContext",
    "refuse_unmodelled",
]


@dataclass
class RunContext:
    """Everything an engine needs for one run."""

    scenario: Scenario
    cluster: Cluster
    trace: pd.DataFrame
    compute: pd.DataFrame
    progress: Callable[[float, int | None], None] = lambda t, n: None
    allow_plugins: bool = False

    @property
    def seed(self) -> int:
        return self.scenario.seed


def refuse_unmodelled(ctx: RunContext, engine: str) -> None:
    """Refuse what a fluid engine does not model, rather than silently ignoring it.

    The ``flow`` engine models straggler GPUs and link, switch and NIC failures and link
    degradation as capacity changes (:mod:`podsim.fabric.flow.faults`) but not ``ber`` faults: their
    effect is frame loss and link-level retries, which happen per packet. The ``bound`` engine
    models straggler GPUs only. Neither models GPUDirect Storage background reads. A scenario
    that asks for these must run on ``packet``.
    """
    from podsim.scenarios.errors import ScenarioError

    sc = ctx.scenario
    modelled = {"straggler"}
    if engine == "flow":
        modelled |= {"link_down", "link_degrade", "switch_down", "nic_down"}
    kinds = sorted({f.kind for f in sc.faults if f.kind not in modelled})
    if kinds:
        why = (
            " (bit errors act through per-packet frame loss and retries, which a fluid model "
            "does not have)"
            if kinds == ["ber"]
            else ""
        )
        raise ScenarioError(
            f"the {engine} engine does not model {', '.join(kinds)} faults "
            f"(only {', '.join(sorted(modelled))}){why}; "
            "run this scenario with engine: packet, or remove those faults",
            path="faults",
        )
    if sc.workload.storage is not None:
        raise ScenarioError(
            f"the {engine} engine does not model GPUDirect Storage reads; "
            "run this scenario with engine: packet, or remove workload.storage",
            path="workload.storage",
        )


@dataclass
class EngineOutput:
    """Raw tables of one run (schemas in :mod:`podsim.scenarios.results.tables`).

    ``status`` is ``complete``, ``time-limit`` (stopped at ``sim.time_limit``), ``interrupted``
    (Ctrl-C) or ``stalled`` (no event left but messages unfinished, e.g. a dead path).
    """

    messages: pd.DataFrame
    phases: pd.DataFrame
    links: pd.DataFrame
    qps: pd.DataFrame
    queues: pd.DataFrame
    sim_time_s: float
    events: int | None = None
    status: str = "complete"
    extra: dict[str, Any] = field(default_factory=dict)

    def summary(self, num_ranks: int) -> dict[str, Any]:
        """The run's figures (:func:`scenarios.results.tables.summarise`) straight from the raw
        tables,
        the makespan taken as the last phase end. For benchmarks and tests that call an engine
        directly; the runner's own assembly also settles undelivered messages first."""
        phases = conform("phases", self.phases)
        return summarise(
            messages=conform("messages", self.messages),
            phases=phases,
            links=conform("links", self.links),
            qps=conform("qps", self.qps),
            num_ranks=num_ranks,
            makespan_s=float(phases["end_s"].max()),
        )


#: Modules that register engines when imported; loaded on the registry's first lookup. An engine
#: module that fails to import is an error there, never a silently missing engine.
ENGINE_MODULES = (
    "podsim.scenarios.engines.packet",
    "podsim.scenarios.engines.flow",
    "podsim.scenarios.engines.bound",
)

ENGINES: Registry[Callable[[RunContext], EngineOutput]] = Registry("engine", ENGINE_MODULES)
