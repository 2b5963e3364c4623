"""Invariant checks of a flow-engine run, made once at its end.

A fluid model has no packets or queues to audit, but its bytes must still add up. Three
checks, each independent of how the engine computed the quantity it checks:

- ``flow_bytes``: the fluid model holds every byte the workload handed to the fabric (its
  flows' sizes add up to the injected bytes, counted separately by the transport) and no
  unfinished flow has sent more than its size or less than nothing (its remainder, brought
  up to the end of the run, lies in [0, size]);
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
    size, committed = sim.size[:n], sim.committed[:n]
    total = float(size.sum())
    # an unfinished flow's remainder as of now (the model updates it at each re-solve)
    open_ = np.flatnonzero(~committed)
    rem_now = sim.rem[open_] - sim.rate[open_] * (now - sim._t_last) / 8.0
    tol = 1e-6 * size[open_] + 1e-3
    bad = open_[(rem_now < -tol) | (rem_now > size[open_] + tol)]
    if not _close(total, injected_bytes) or bad.size:
        details = [f"flows hold {total:,.0f} B; the transport injected {injected_bytes:,.0f} B"]
        details += [
            f"flow {int(f)}: remainder {float(sim.rem[f]):,.0f} B of {float(sim.size[f]):,.0f} B"
            for f in bad[:10]
        ]
        raise InvariantViolation(
            "flow_bytes", now, "bytes not conserved in the flow model", details
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
