"""The ``flow`` engine (issue 7): registered now so that scenarios may name it; it reports that
it is not available until its implementation lands (replace this module's body)."""

from __future__ import annotations

from scenarios.engines import ENGINES, EngineOutput, EngineUnavailable, RunContext


@ENGINES.register("flow", "flow-level: max-min fair rates between flow starts and ends")
def run_flow(ctx: RunContext) -> EngineOutput:
    """Not implemented yet: see issue 7."""
    raise EngineUnavailable("the flow engine has not landed yet (issue 7); use engine: packet")
