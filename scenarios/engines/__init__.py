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
``@register_engine(name, description, faults=..., storage=..., ...)`` (declaring what it
models, :class:`Engine`) and one line in that tuple. Nothing outside an engine's module branches
on its name.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pandas as pd
from podsim.fabric.registry import Registry
from podsim.scenarios.results.phase_links import LinkBytes
from podsim.scenarios.results.tables import conform, summarise

if TYPE_CHECKING:
    from podsim.scenarios.build.cluster import Cluster
    from podsim.scenarios.input.schema import Scenario
    from podsim.workloads.graph import OpGraph

__all__ = [
    "ENGINES",
    "ENGINE_MODULES",
    "Engine",
    "EngineOutput",
    "RunContext",
    "register_engine",
]


@dataclass
class RunContext:
    """Everything an engine needs for one run."""

    scenario: Scenario
    cluster: Cluster
    trace: pd.DataFrame
    compute: pd.DataFrame
    graph: OpGraph | None = None
    progress: Callable[[float, int | None], None] = lambda t, n: None
    allow_plugins: bool = False

    @property
    def seed(self) -> int:
        return self.scenario.seed


@dataclass(frozen=True)
class Engine:
    """An engine and what it models: the runner and the checks ask these, never an engine's name.

    ``faults`` are the fault kinds (``faults[].kind``) the engine models; a scenario with any
    other kind is refused before the run. ``storage``: it models GPUDirect Storage background
    reads (``workload.storage``). ``graphs``: it executes operation graphs
    (:mod:`podsim.workloads.graph`: collectives, training steps, imported traces), not only the
    layer timeline. ``sm_copy``: it limits the rows a GPU's kernel copies into it
    (``workload.moe.deepep.copy_rate``). ``per_packet``: every packet is simulated, so per-packet
    effects apply (PFC pauses and drops, ``sim.cell`` bursts). ``classes``: it schedules
    traffic classes (``cluster.traffic_classes`` with two or more). ``preflight(sc, cluster,
    trace)`` makes the engine's own input checks (fault targets the cluster lacks, runs that
    could never end); ``check_size(sc, cluster, trace, compute, budget=, force=)`` refuses a
    run too large for it (:mod:`podsim.scenarios.build.limits`). Calling the engine refuses what
    it does not model, then runs it.
    """

    name: str
    run: Callable[[RunContext], EngineOutput]
    description: str = ""
    faults: frozenset[str] = frozenset()
    storage: bool = False
    graphs: bool = False
    per_packet: bool = False
    preflight: Callable[[Scenario, Cluster, pd.DataFrame], None] | None = None
    check_size: Callable[..., Any] | None = None
    classes: bool = False
    sm_copy: bool = False

    def __call__(self, ctx: RunContext) -> EngineOutput:
        self.refuse_unmodelled(ctx.scenario)
        return self.run(ctx)

    def refuse_unmodelled(self, sc: Scenario) -> None:
        """Refuse what this engine does not model (ScenarioError at ``faults`` or
        ``workload.storage``), rather than silently ignoring it."""
        from podsim.scenarios.errors import ScenarioError

        kinds = sorted({f.kind for f in sc.faults if f.kind not in self.faults})
        if kinds:
            why = (
                " (bit errors act through per-packet frame loss and retries, which a fluid model "
                "does not have)"
                if kinds == ["ber"] and not self.per_packet
                else ""
            )
            only = ", ".join(sorted(self.faults)) or "none"
            raise ScenarioError(
                f"the {self.name} engine does not model {', '.join(kinds)} faults "
                f"(only {only}){why}; {_suggest(lambda e: set(kinds) <= e.faults)}"
                "or remove those faults",
                path="faults",
            )
        if sc.workload.builds_graph and not self.graphs:
            raise ScenarioError(
                f"the {self.name} engine does not execute operation graphs (workload."
                f"{sc.workload.kind}); {_suggest(lambda e: e.graphs)}or use another workload",
                path="engine",
            )
        tcs = sc.cluster.traffic_classes
        if tcs is not None and len(tcs.classes) > 1 and not self.classes:
            raise ScenarioError(
                f"the {self.name} engine does not model traffic classes (it shares each link "
                "among flows without priorities, weights or per-class PFC); "
                f"{_suggest(lambda e: e.classes)}or remove cluster.traffic_classes",
                path="cluster.traffic_classes",
            )
        moe = sc.workload.moe
        if moe is not None and moe.deepep.copy_rate is not None and not self.sm_copy:
            raise ScenarioError(
                f"the {self.name} engine does not model the SMs' copy path (its scale-up side "
                f"is the links alone); {_suggest(lambda e: e.sm_copy)}or remove "
                "workload.moe.deepep.copy_rate",
                path="workload.moe.deepep.copy_rate",
            )
        if sc.workload.storage is not None and not self.storage:
            raise ScenarioError(
                f"the {self.name} engine does not model GPUDirect Storage reads; "
                f"{_suggest(lambda e: e.storage)}or remove workload.storage",
                path="workload.storage",
            )


def _suggest(can: Callable[[Engine], bool]) -> str:
    """'run this scenario with engine: X, ' for the engines that model what is asked, if any."""
    names = [n for n in ENGINES.names() if can(ENGINES.get(n))]
    if not names:
        return ""
    return f"run this scenario with engine: {' or '.join(names)}, "


def register_engine(
    name: str,
    description: str,
    *,
    faults: frozenset[str] | set[str] = frozenset(),
    storage: bool = False,
    graphs: bool = False,
    per_packet: bool = False,
    preflight: Callable[[Scenario, Cluster, pd.DataFrame], None] | None = None,
    check_size: Callable[..., Any] | None = None,
    classes: bool = False,
    sm_copy: bool = False,
) -> Callable[[Callable[[RunContext], EngineOutput]], Callable[[RunContext], EngineOutput]]:
    """Register the decorated ``run(ctx)`` as engine ``name`` with what it models
    (:class:`Engine`). Returns the function unchanged."""

    def deco(run: Callable[[RunContext], EngineOutput]) -> Callable[[RunContext], EngineOutput]:
        eng = Engine(
            name,
            run,
            description,
            frozenset(faults),
            storage=storage,
            graphs=graphs,
            per_packet=per_packet,
            preflight=preflight,
            check_size=check_size,
            classes=classes,
            sm_copy=sm_copy,
        )
        ENGINES.add(name, eng, description)
        return run

    return deco


@dataclass
class EngineOutput:
    """Raw tables of one run (schemas in :mod:`podsim.scenarios.results.tables`).

    ``link_series`` (optional): the links' transmitted bytes over time
    (:mod:`podsim.scenarios.results.phase_links`: sampled counters or transfers spread over their
    sending time), from which the runner measures
    each link per phase. ``status`` is ``complete``, ``time-limit`` (stopped at
    ``sim.time_limit``), ``interrupted`` (Ctrl-C) or ``stalled`` (no event left but messages
    unfinished, e.g. a dead path).
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
    #: cumulative transmitted bytes of the links over time, for link utilisation per phase
    #: (:mod:`podsim.scenarios.results.phase_links`); None when the engine records none
    link_series: LinkBytes | None = None

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

ENGINES: Registry[Engine] = Registry("engine", ENGINE_MODULES)
