"""The physical lower bound on a phase's completion time: no simulation, just load / capacity.

Given the flows of one communication phase (constraint ids and coefficients per payload bit, as
:mod:`podsim.fabric.flow` builds them) the phase cannot finish faster than

- **the most loaded constraint**: all bytes that cross constraint ``c`` must do so between the
  phase's first start and its last delivery, so ``T >= offered_c / capacity_c`` (wire bits over
  link bit/s; packets over a NIC's packets/s; payload over a PCIe path's rate);
- **the slowest lone flow**: a flow alone in the network runs no faster than its tightest
  constraint or its own cap allows and still pays its path latency, so
  ``T >= 8 B / min(cap, min_c capacity_c / coef_c) + latency``.

``T_bound = max`` of the two, and the constraint or flow that attains it is *the limit*.
This holds for any engine, any congestion control and any path choice, provided the routes
given here are the least loading ones: callers route every multipath-capable flow over all
equal-cost paths at once (``FlowPaths.route(mode="spread")``; the bundle constraints are what
a perfect split of the traffic gives) and may merge the planes of a multi-plane fabric
(``groups``), so a smarter split in the real run cannot beat the bound. Pass ``groups`` to
merge constraints into one of summed capacity (e.g. :meth:`fabric.flow.FlowPaths.plane_groups`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["PhaseBound", "lower_bound"]


@dataclass(frozen=True)
class PhaseBound:
    """The bound of one phase.

    ``time_s`` the lower bound; ``limit`` the name of what sets it (a constraint, or
    ``flow <i>``); ``limit_kind`` ``"constraint"`` or ``"flow"``; ``limit_index`` the
    constraint (group) or flow index; ``load_time_s`` per constraint (group): offered / capacity
    (s); ``flow_time_s`` per flow: its lone-flow time including latency (s).
    """

    time_s: float
    limit: str
    limit_kind: str
    limit_index: int
    load_time_s: np.ndarray
    flow_time_s: np.ndarray

    def as_dict(self) -> dict[str, object]:
        return {
            "bound_s": self.time_s,
            "limit": self.limit,
            "limit_kind": self.limit_kind,
        }


def lower_bound(
    capacity: np.ndarray,
    idx: np.ndarray,
    coef: np.ndarray,
    nbytes: np.ndarray,
    latency_s: np.ndarray | float = 0.0,
    *,
    caps: np.ndarray | float | None = None,
    groups: np.ndarray | None = None,
    names: list[str] | None = None,
) -> PhaseBound:
    """Lower bound on the completion time of the flows given (module docstring).

    ``capacity`` (C,) per constraint; ``idx``/``coef`` (F, K) constraint ids (-1 = none) and
    units per payload bit; ``nbytes`` (F,) payload bytes; ``latency_s`` (F,) or scalar;
    ``caps`` per-flow rate caps (payload bit/s); ``groups`` (C,) merges constraints into
    groups of summed capacity; ``names`` (C,) for the limit's name (the first member of a
    group names it).
    """
    cap = np.asarray(capacity, dtype=float)
    idx = np.atleast_2d(np.asarray(idx, dtype=np.int64))
    coef = np.atleast_2d(np.asarray(coef, dtype=float))
    b = np.asarray(nbytes, dtype=float)
    n_f = idx.shape[0]
    if coef.shape != idx.shape or b.shape != (n_f,):
        raise ValueError(
            f"idx {idx.shape}, coef {coef.shape} and nbytes {b.shape} must describe the same flows"
        )
    if n_f == 0:
        return PhaseBound(0.0, "", "none", -1, np.zeros(0), np.zeros(0))
    lat = np.broadcast_to(np.asarray(latency_s, dtype=float), (n_f,))
    g = np.arange(cap.size) if groups is None else np.asarray(groups, dtype=np.int64)
    if g.shape != cap.shape:
        raise ValueError(f"groups must have one entry per constraint ({cap.size})")
    n_g = int(g.max()) + 1 if g.size else 0
    g_cap = np.bincount(g, weights=cap, minlength=n_g)
    valid = idx >= 0
    gi = np.where(valid, g[np.where(valid, idx, 0)], -1)
    bits = 8.0 * b
    offered = np.bincount(gi[valid], weights=(coef * bits[:, None])[valid], minlength=n_g)
    with np.errstate(divide="ignore", invalid="ignore"):
        load_t = np.where(offered > 0, offered / g_cap, 0.0)
    # a lone flow: per group, the sum of its coefficients on that group's members
    flow_ids = np.broadcast_to(np.arange(n_f)[:, None], idx.shape)[valid]
    key = flow_ids * n_g + gi[valid]
    uniq, inv = np.unique(key, return_inverse=True)
    coef_g = np.bincount(inv, weights=coef[valid])
    f_of = uniq // n_g
    with np.errstate(divide="ignore", invalid="ignore"):
        r_g = np.where(coef_g > 0, g_cap[uniq % n_g] / coef_g, np.inf)
    alone = np.full(n_f, np.inf)
    np.minimum.at(alone, f_of, r_g)
    if caps is not None:
        alone = np.minimum(alone, np.broadcast_to(np.asarray(caps, dtype=float), (n_f,)))
    with np.errstate(divide="ignore", invalid="ignore"):
        flow_t = np.where(bits > 0, bits / alone, 0.0) + lat
    c_best = int(np.argmax(load_t)) if load_t.size else -1
    f_best = int(np.argmax(flow_t))
    t_c = float(load_t[c_best]) if c_best >= 0 else 0.0
    t_f = float(flow_t[f_best])
    if t_c >= t_f and c_best >= 0:
        first = int(np.flatnonzero(g == c_best)[0])
        name = names[first] if names is not None else f"constraint {c_best}"
        return PhaseBound(t_c, name, "constraint", c_best, load_t, flow_t)
    return PhaseBound(t_f, f"flow {f_best}", "flow", f_best, load_t, flow_t)
