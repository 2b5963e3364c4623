"""The ``bound`` engine (issue 7): registered now so that scenarios may name it; it reports that
it is not available until its implementation lands (replace this module's body)."""

from __future__ import annotations

from scenarios.engines import ENGINES, EngineOutput, EngineUnavailable, RunContext


@ENGINES.register("bound", "no simulation: per-link load / capacity, the physical lower bound")
def run_bound(ctx: RunContext) -> EngineOutput:
    """Not implemented yet: see issue 7."""
    raise EngineUnavailable("the bound engine has not landed yet (issue 7); use engine: packet")
