"""Invariant checks of a flow-engine run, made once at its end.

A fluid model has no packets or queues to audit, but its bytes must still add up. Three
checks, each independent of how the engine computed the quantity it checks:

- ``flow_bytes``: every byte a flow was given is either delivered or still to send: the sizes
  of the committed (sent) flows plus what the unfinished ones have left equal the bytes the
  workload handed to the fabric, and no flow has a negative remainder;
- ``switch_bytes`` (only when every flow was sent): at every switch, the wire bytes that came in
  on its links equal the bytes that went out (a switch neither creates nor absorbs traffic);
  this is Kirchhoff's current law on the link table, computed from the per-link counters, not
  from the per-flow paths that produced them;
- ``completion``: a run whose status is ``complete`` delivered every message.

A violation raises :class:`podsim.fabric.invariants.InvariantViolation` (a model bug, not bad
input). The packet engine's checks are in :mod:`podsim.fabric.invariants`.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd
from podsim.fabric.flow.sim import FlowSim
from podsim.fabric.invariants import InvariantViolation

__all__ = ["FLOW_CHECKS", "check_flow_run"]

FLOW_CHECKS = ("flow_bytes", "switch_bytes", "completion")

#: relative tolerance of a byte balance (float sums over many flows and links)
RTOL = 1e-6


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= RTOL * max(abs(a), abs(b)) + 1.0


def check_flow_run(
    sim: FlowSim,
    injected_bytes: float,
    links: pd.DataFrame,
    switches: Iterable[str],
    end_s: np.ndarray,
    status: str,
) -> list[str]:
    """Run the checks of the module docstring on a finished run; return their names.

    ``injected_bytes``: payload bytes the workload handed to the fabric as flows; ``links``:
    the run's link table (``u``, ``v``, ``tx_bytes``); ``switches``: switch node names;
    ``end_s``: each message's delivery time (NaN/inf when undelivered)."""
    now = float(sim.env.now)
    n = sim.n
    size, rem, committed = sim.size[:n], sim.rem[:n], sim.committed[:n]
    done_bytes = float(size[committed].sum())
    left = float(np.maximum(rem[~committed], 0.0).sum())
    if not _close(done_bytes + left, injected_bytes) or (
        n and float(rem[~committed].min(initial=0.0)) < -1e-6 * float(size.max(initial=1.0))
    ):
        raise InvariantViolation(
            "flow_bytes",
            now,
            "bytes not conserved in the flow model",
            [f"sent {done_bytes:,.0f} B + left {left:,.0f} B != injected {injected_bytes:,.0f} B"],
        )
    ran = ["flow_bytes"]
    if n and committed.all() and len(links):
        tx = links["tx_bytes"].to_numpy(float)
        into = pd.Series(tx).groupby(links["v"].to_numpy()).sum()
        out = pd.Series(tx).groupby(links["u"].to_numpy()).sum()
        bad = []
        for sw in switches:
            a, b = float(into.get(sw, 0.0)), float(out.get(sw, 0.0))
            # rounding: each link's counter is rounded to whole bytes
            slack = 1.0 + float((links["v"] == sw).sum() + (links["u"] == sw).sum())
            if abs(a - b) > RTOL * max(a, b) + slack:
                bad.append(f"switch {sw}: {a:,.0f} B in, {b:,.0f} B out")
        if bad:
            raise InvariantViolation("switch_bytes", now, "a switch created or lost bytes", bad)
        ran.append("switch_bytes")
    if status == "complete":
        missing = np.flatnonzero(~np.isfinite(end_s))
        if missing.size:
            raise InvariantViolation(
                "completion",
                now,
                f"the run completed but {missing.size} message(s) were never delivered",
                [f"message {int(m)}" for m in missing[:12]],
            )
        ran.append("completion")
    return ran
