"""Max-min fair rate allocation by progressive filling, vectorised over all flows at once.

The model: ``L`` capacity constraints ("links": a directed link, a switch's shared fabric, a
NIC's DMA engine, ...) and ``F`` flows. The sparse incidence matrix ``A`` (``L x F``) holds the
fraction of flow ``f`` that loads constraint ``l`` (1 for a single-path flow, ``1/k`` on each of
``k`` equal multipath branches, 0 = does not cross). Feasibility: ``A @ r <= capacity`` and
``r <= cap`` (a per-flow demand or line-rate cap).

Weighted max-min fairness: every flow grows as ``r_f = w_f * t`` with a common fill level ``t``
until it is frozen by a saturated constraint or by its own cap (progressive filling, Bertsekas &
Gallager, *Data Networks*, sec. 6.5.2). The result is the unique allocation in which every flow
either meets its cap or crosses a saturated constraint on which no other flow has a larger
normalised rate ``r/w`` (the bottleneck condition).

Algorithm. Classic progressive filling freezes one level per iteration; with thousands of
distinct capacities that is thousands of passes. Here each pass freezes every constraint that is
a *local* minimum: with the current frozen set, constraint ``l`` would saturate at level
``t_l = residual_l / sum_{f active on l} a_lf w_f``. These ``t_l`` only grow as other flows are
frozen below them, so they are lower bounds of the final levels; if ``t_l`` is no larger than the
smallest level any of its flows sees elsewhere (another constraint or its cap), nothing can stop
those flows before ``t_l``, and ``l`` is a true bottleneck at ``t_l``. All such constraints are
frozen together, so the number of passes is the depth of the bottleneck dependency chain, not the
number of distinct levels.

Each pass is NumPy over all active flows at once (no Python loop per flow): flows are bucketed
by link count into padded ``(K, n)`` tables, so a per-flow minimum is ``K`` gathers, and one
segmented reduction over the nonzeros sorted by constraint gives the per-constraint minimum;
frozen flows are compacted away lazily. ``benchmarks/bench_maxmin.py``: 1e5 flows x 1e4
constraints, 4 per flow, random capacities and caps: about 0.25 s and 90 passes on one core.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import scipy.sparse as sp

__all__ = [
    "CAP",
    "UNCONSTRAINED",
    "MaxMinResult",
    "build_incidence",
    "maxmin_pairs",
    "maxmin_rates",
    "maxmin_rows",
]

CAP = -1
"""Bottleneck code: the flow is limited by its own cap (demand or line rate)."""
UNCONSTRAINED = -2
"""Bottleneck code: nothing limits the flow (no constraint crossed, infinite cap): rate is inf."""


@dataclass(frozen=True)
class MaxMinResult:
    """The allocation and why each flow got it.

    ``rates[f]`` in the units of ``capacity`` (bits/s by convention); ``bottleneck[f]`` is the
    index of the saturated constraint that froze flow ``f``, or :data:`CAP` /
    :data:`UNCONSTRAINED`; ``link_load`` is ``A @ rates``; ``iterations`` is the number of
    filling passes (the depth of the bottleneck chain).
    """

    rates: np.ndarray
    bottleneck: np.ndarray
    link_load: np.ndarray
    iterations: int

    def saturated(self, capacity: np.ndarray, rtol: float = 1e-6) -> np.ndarray:
        """Boolean mask of constraints loaded to within ``rtol`` of their capacity."""
        capacity = np.asarray(capacity, dtype=float)
        return self.link_load >= capacity * (1.0 - rtol)


def build_incidence(
    link_idx: np.ndarray,
    flow_idx: np.ndarray,
    n_links: int,
    n_flows: int,
    fraction: np.ndarray | None = None,
) -> sp.csc_array:
    """The ``n_links x n_flows`` incidence matrix from flat (link, flow[, fraction]) triples.

    Duplicate (link, flow) pairs are summed (a flow split over two branches that rejoin on one
    link loads it with both fractions). ``fraction`` defaults to 1.
    """
    link_idx = np.asarray(link_idx, dtype=np.int64)
    flow_idx = np.asarray(flow_idx, dtype=np.int64)
    if link_idx.shape != flow_idx.shape or link_idx.ndim != 1:
        raise ValueError(
            f"link_idx and flow_idx must be 1-D arrays of equal length, got shapes "
            f"{link_idx.shape} and {flow_idx.shape}"
        )
    if fraction is None:
        fraction = np.ones(link_idx.shape, dtype=float)
    fraction = np.asarray(fraction, dtype=float)
    if fraction.shape != link_idx.shape:
        raise ValueError(
            f"fraction must match link_idx in shape, got {fraction.shape} vs {link_idx.shape}"
        )
    if link_idx.size:
        if link_idx.min() < 0 or link_idx.max() >= n_links:
            raise ValueError(
                f"link_idx out of range [0, {n_links}): {link_idx.min()}..{link_idx.max()}"
            )
        if flow_idx.min() < 0 or flow_idx.max() >= n_flows:
            raise ValueError(
                f"flow_idx out of range [0, {n_flows}): {flow_idx.min()}..{flow_idx.max()}"
            )
    import scipy.sparse as sp  # imported when first used: a packet run may never need it

    m = sp.csc_array((fraction, (link_idx, flow_idx)), shape=(n_links, n_flows))
    m.sum_duplicates()
    return m


def _vector(x: object, n: int, default: float, what: str) -> np.ndarray:
    if x is None:
        return np.full(n, default, dtype=float)
    arr = np.asarray(x, dtype=float)
    if arr.ndim == 0:
        return np.full(n, float(arr), dtype=float)
    if arr.shape != (n,):
        raise ValueError(f"{what} must be a scalar or have shape ({n},), got shape {arr.shape}")
    return arr.astype(float, copy=True)


def _starts(counts: np.ndarray) -> np.ndarray:
    """Start offsets of consecutive segments of the given (positive) lengths."""
    out = np.zeros(counts.size, dtype=np.int64)
    np.cumsum(counts[:-1], out=out[1:])
    return out


class _FlowGroup:
    """Active flows with similar link counts, as a padded ``(K, n)`` table of link indices.

    Short fixed-width columns make the per-flow minimum ``K`` gathers of length ``n`` instead of
    a segmented reduction, which is several times faster for the 2-8 links of a typical path.
    """

    def __init__(self, flow_ids: np.ndarray, idx: np.ndarray, frac: np.ndarray) -> None:
        self.flow_ids, self.idx, self.frac = flow_ids, idx, frac
        # Frozen columns stay in the table until they are a third of it (compaction is costly).
        self.alive = np.ones(flow_ids.size, dtype=bool)
        self.n_alive = flow_ids.size
        self.m_link = np.empty(0)
        self.m_flow = np.empty(0)

    def reduce_min(self, per_link: np.ndarray) -> np.ndarray:
        out = per_link[self.idx[0]]
        for k in range(1, self.idx.shape[0]):
            np.minimum(out, per_link[self.idx[k]], out=out)
        return out

    def reduce_any(self, per_link: np.ndarray) -> np.ndarray:
        out = per_link[self.idx[0]]
        for k in range(1, self.idx.shape[0]):
            np.logical_or(out, per_link[self.idx[k]], out=out)
        return out

    def drop(self, mask: np.ndarray) -> None:
        """Mark the columns in ``mask`` frozen; compact the table once they are a third."""
        self.alive &= ~mask
        self.n_alive = int(np.count_nonzero(self.alive))
        if self.n_alive < 2 * self.flow_ids.size // 3:
            keep = self.alive
            self.flow_ids, self.idx, self.frac = (
                self.flow_ids[keep],
                self.idx[:, keep],
                self.frac[:, keep],
            )
            self.alive = np.ones(self.flow_ids.size, dtype=bool)


def _flow_groups(a: sp.csc_array, counts: np.ndarray, n_links: int) -> list[_FlowGroup]:
    """Bucket flows by link count (powers of two) so padding at most doubles the table."""
    groups = []
    nz = counts > 0
    width = np.zeros(counts.size, dtype=np.int64)
    width[nz] = 1 << np.ceil(np.log2(counts[nz])).astype(np.int64)
    for k in np.unique(width[nz]):
        ids = np.flatnonzero(width == k)
        cnt = counts[ids]
        # Position of every nonzero of these flows inside its column of the padded table.
        starts = a.indptr[ids]
        offs = np.arange(cnt.sum()) - np.repeat(np.cumsum(cnt) - cnt, cnt)
        pos = np.repeat(starts, cnt) + offs
        col = np.repeat(np.arange(ids.size), cnt)
        idx = np.full((int(k), ids.size), n_links, dtype=np.intp)
        frac = np.zeros((int(k), ids.size), dtype=float)
        idx[offs, col] = a.indices[pos]
        frac[offs, col] = a.data[pos]
        groups.append(_FlowGroup(ids, idx, frac))
    return groups


def maxmin_rates(
    incidence: sp.sparray | sp.spmatrix | np.ndarray,
    capacity: np.ndarray,
    caps: np.ndarray | float | None = None,
    weights: np.ndarray | float | None = None,
    *,
    rtol: float = 1e-9,
) -> MaxMinResult:
    """Weighted max-min fair rates of all flows (progressive filling, see the module doc).

    Parameters
    ----------
    incidence
        ``L x F`` sparse (or dense) matrix; entry ``(l, f)`` is the fraction of flow ``f`` that
        crosses constraint ``l`` (> 0; explicit zeros mean "does not cross").
    capacity
        ``(L,)`` capacities, >= 0; ``inf`` for a constraint that never binds.
    caps
        per-flow upper bound (demand, NIC line rate), scalar or ``(F,)``, >= 0; default inf.
    weights
        max-min weights, scalar or ``(F,)``, > 0; default 1 (plain max-min). A flow of weight 2
        gets twice the share of a weight-1 flow on a common bottleneck.
    rtol
        constraints whose fill levels agree within ``rtol`` are frozen in the same pass.

    A flow that crosses no constraint gets its cap (``inf`` and :data:`UNCONSTRAINED` when the
    cap is infinite too).
    """
    import scipy.sparse as sp  # imported when first used: a packet run may never need it

    a = sp.csc_array(incidence, dtype=float, copy=True)
    if a.ndim != 2:
        raise ValueError(f"incidence must be 2-D (links x flows), got {a.ndim}-D")
    a.sum_duplicates()
    a.eliminate_zeros()
    n_links, n_flows = a.shape
    capacity = np.asarray(capacity, dtype=float)
    if capacity.shape != (n_links,):
        raise ValueError(f"capacity must have shape ({n_links},), got {capacity.shape}")
    if np.isnan(capacity).any() or (capacity < 0).any():
        raise ValueError("capacity must be >= 0 and not NaN (use inf for 'never binds')")
    caps_v = _vector(caps, n_flows, np.inf, "caps")
    if np.isnan(caps_v).any() or (caps_v < 0).any():
        raise ValueError("caps must be >= 0 and not NaN (use inf for 'no cap')")
    w = _vector(weights, n_flows, 1.0, "weights")
    if not np.isfinite(w).all() or (w <= 0).any():
        raise ValueError("weights must be finite and > 0")
    if a.data.size and (not np.isfinite(a.data).all() or (a.data < 0).any()):
        raise ValueError(
            "incidence entries (fractions of a flow on a link) must be finite and >= 0"
        )
    if not rtol >= 0:
        raise ValueError(f"rtol must be >= 0, got {rtol!r}")

    counts = np.diff(a.indptr)
    groups = _flow_groups(a, counts, n_links)
    # Per-link view of the active nonzeros (flow ids grouped by link) for the per-link minimum.
    by_link = a.tocsr()
    link_cnt = np.diff(by_link.indptr).astype(np.int64)
    cols_r = by_link.indices.astype(np.intp)
    del by_link
    slope = np.asarray(a @ w, dtype=float)
    rates, bottleneck, iterations = _fill(
        groups, counts, link_cnt, cols_r, slope, capacity, caps_v, w, rtol
    )
    # Sparse products touch stored entries only, so an infinite rate loads only its own links.
    link_load = np.asarray(a @ rates, dtype=float)
    return MaxMinResult(rates, bottleneck, link_load, iterations)


def maxmin_rows(
    idx: np.ndarray,
    coef: np.ndarray,
    capacity: np.ndarray,
    caps: np.ndarray,
    weights: np.ndarray,
    *,
    rtol: float = 1e-9,
) -> MaxMinResult | None:
    """:func:`maxmin_rates` of flows given as padded rows, bit for bit: flow ``f`` loads
    constraint ``idx[f, k]`` (-1: none) with ``coef[f, k]``; ``caps`` and ``weights`` per flow,
    already valid (the flow engine checks them when flows are posted). The incidence the
    readable path builds as a SciPy matrix (its per-call construction, sorting and
    conversion cost more than the filling on the flow engine's many small solves) is made here
    with NumPy: each row's constraints sorted (SciPy's canonical order), the same padded
    tables, the per-link flow lists in flow order, and ``A @ w`` as a bincount in the order
    SciPy's CSC product adds. Returns None when a row names a constraint twice (SciPy sums
    such entries: the caller takes the readable path). A differential test checks both give
    the same arrays."""
    capacity = np.asarray(capacity, dtype=float)
    n_links = capacity.size
    n_flows, k = idx.shape
    valid = (idx >= 0) & (coef != 0)
    key = np.where(valid, idx, n_links).astype(np.intp)
    if k > 1:
        order = np.argsort(key, axis=1, kind="stable")
        key = np.take_along_axis(key, order, axis=1)
        val = np.take_along_axis(np.where(valid, coef, 0.0), order, axis=1)
        if ((key[:, 1:] == key[:, :-1]) & (key[:, 1:] < n_links)).any():
            return None
    else:
        val = np.where(valid, coef, 0.0).astype(float)
    counts = np.count_nonzero(key < n_links, axis=1)
    caps_v = np.asarray(caps, dtype=float)
    w = np.asarray(weights, dtype=float)
    # the padded tables of _flow_groups: widths are powers of two, padding is the sentinel
    groups = []
    nz = counts > 0
    width = np.zeros(n_flows, dtype=np.int64)
    width[nz] = 1 << np.ceil(np.log2(counts[nz])).astype(np.int64)
    widest = int(width.max(initial=0))
    if widest > k:
        key = np.pad(key, ((0, 0), (0, widest - k)), constant_values=n_links)
        val = np.pad(val, ((0, 0), (0, widest - k)))
    for kk in np.unique(width[nz]).tolist():
        ids = np.flatnonzero(width == kk)
        groups.append(
            _FlowGroup(
                ids, np.ascontiguousarray(key[ids, :kk].T), np.ascontiguousarray(val[ids, :kk].T)
            )
        )
    live = key < n_links
    rows = key[live]  # flow-major, constraints ascending: SciPy's CSC order
    flows = np.nonzero(live)[0]
    data = val[live]
    link_cnt = np.bincount(rows, minlength=n_links).astype(np.int64)
    cols_r = flows[np.argsort(rows, kind="stable")].astype(np.intp)
    slope = np.bincount(rows, weights=data * w[flows], minlength=n_links).astype(float)
    rates, bottleneck, iterations = _fill(
        groups, counts, link_cnt, cols_r, slope, capacity, caps_v, w, rtol
    )
    link_load = np.bincount(rows, weights=data * rates[flows], minlength=n_links).astype(float)
    return MaxMinResult(rates, bottleneck, link_load, iterations)


def _fill(
    groups: list[_FlowGroup],
    counts: np.ndarray,
    link_cnt: np.ndarray,
    cols_r: np.ndarray,
    slope: np.ndarray,
    capacity: np.ndarray,
    caps_v: np.ndarray,
    w: np.ndarray,
    rtol: float,
) -> tuple[np.ndarray, np.ndarray, int]:
    """The progressive filling of :func:`maxmin_rates` (module docstring) over prepared
    tables: the flows' padded groups, the per-link flow lists ``cols_r`` (``link_cnt`` each)
    and ``slope = A @ w``; returns (rates, bottleneck, passes)."""
    n_links = capacity.size
    n_flows = caps_v.size
    cap_level = caps_v / w
    rates = np.zeros(n_flows, dtype=float)
    bottleneck = np.full(n_flows, UNCONSTRAINED, dtype=np.int64)
    active = np.ones(n_flows, dtype=bool)
    no_links = counts == 0
    rates[no_links] = caps_v[no_links]
    bottleneck[no_links & np.isfinite(caps_v)] = CAP
    active[no_links] = False
    # It is compacted lazily: frozen flows read as +inf in m_full until then.
    link_cnt_r = link_cnt.copy()
    frozen_load = np.zeros(n_links, dtype=float)
    m_full = np.full(n_flows, np.inf, dtype=float)
    # Index n_links is the padding sentinel of the per-flow tables: level inf, never free.
    t_ext = np.full(n_links + 1, np.inf, dtype=float)
    free_ext = np.zeros(n_links + 1, dtype=bool)
    n_active_entries = cols_r.size

    infinite = np.isinf(capacity)

    iterations = 0
    while any(g.n_alive for g in groups):
        iterations += 1
        with np.errstate(invalid="ignore"):  # inf - inf on never-binding constraints
            residual = np.where(infinite, np.inf, np.maximum(capacity - frozen_load, 0.0))
        with np.errstate(divide="ignore", invalid="ignore"):
            t_ext[:n_links] = np.where((link_cnt > 0) & (slope > 0), residual / slope, np.inf)

        # Lowest level each active flow sees on its constraints, then on its cap.
        for g in groups:
            g.m_link = g.reduce_min(t_ext)
            g.m_flow = np.minimum(g.m_link, cap_level[g.flow_ids])
            if g.n_alive < g.flow_ids.size:
                g.m_flow[~g.alive] = np.inf
            m_full[g.flow_ids] = g.m_flow
        # A constraint is a bottleneck now if none of its flows sees a lower level elsewhere.
        alive_ids = np.flatnonzero(link_cnt_r)
        lowest_seen = np.minimum.reduceat(m_full[cols_r], _starts(link_cnt_r[alive_ids]))
        t_alive = t_ext[alive_ids]
        free_ext[:] = False
        free_ext[alive_ids[np.isfinite(t_alive) & (t_alive <= lowest_seen * (1.0 + rtol))]] = True

        progressed = False
        for g in groups:
            if not g.n_alive:
                continue
            cl = cap_level[g.flow_ids]
            by_cap = cl <= g.m_link
            freeze = (by_cap | g.reduce_any(free_ext)) & g.alive
            if not freeze.any():
                continue
            progressed = True
            fz = g.flow_ids[freeze]
            fz_rate = w[fz] * g.m_flow[freeze]
            rates[fz] = fz_rate
            fz_capped = by_cap[freeze]
            bottleneck[fz[fz_capped]] = np.where(
                np.isfinite(cl[freeze][fz_capped]), CAP, UNCONSTRAINED
            )
            f_idx, f_frac = g.idx[:, freeze], g.frac[:, freeze]
            if not fz_capped.all():
                # Report the saturated constraint that froze each flow: its lowest free link.
                lvl = np.where(free_ext[f_idx], t_ext[f_idx], np.inf)
                pick = f_idx[np.argmin(lvl, axis=0), np.arange(fz.size)]
                bottleneck[fz[~fz_capped]] = pick[~fz_capped]
            rows = f_idx.ravel()
            # padding entries (frac 0) of an unconstrained flow (rate inf) would give 0 x inf
            load = np.multiply(f_frac, fz_rate, out=np.zeros(f_frac.shape), where=f_frac > 0)
            frozen_load += np.bincount(rows, weights=load.ravel(), minlength=n_links + 1)[:n_links]
            slope -= np.bincount(rows, weights=(f_frac * w[fz]).ravel(), minlength=n_links + 1)[
                :n_links
            ]
            link_cnt -= np.bincount(rows, weights=(f_frac > 0).ravel(), minlength=n_links + 1)[
                :n_links
            ].astype(np.int64)
            active[fz] = False
            m_full[fz] = np.inf
            n_active_entries -= int(np.count_nonzero(f_frac))
            g.drop(freeze)
        if not progressed:  # pragma: no cover - the global minimum is always freezable
            raise RuntimeError("max-min filling made no progress; please report this input")
        slope[link_cnt == 0] = 0.0
        if cols_r.size > 1.5 * n_active_entries:
            cols_r = cols_r[active[cols_r]]
            link_cnt_r = link_cnt.copy()

    return rates, bottleneck, iterations


def maxmin_pairs(
    a: np.ndarray, b: np.ndarray, capacity: np.ndarray, *, rtol: float = 1e-9
) -> np.ndarray:
    """Max-min fair rates of unit-weight flows that each cross exactly two constraints.

    Flow ``f`` loads constraints ``a[f]`` and ``b[f]`` (distinct, fully: fraction 1) of
    ``capacity``; no caps. The result equals :func:`maxmin_rates` on the same incidence (same
    local-minimum progressive filling, same ``rtol``), computed without a sparse matrix: a
    pass is a dozen NumPy operations over the flows still growing. That makes it several
    times faster for the fluid scale-up domain (podsim.fabric.scaleup: a GPU's egress and
    a GPU's ingress per transfer), which solves thousands of times per MoE phase, often for
    a few hundred flows, where the general solver's fixed cost dominates.
    """
    a = np.asarray(a, dtype=np.intp)
    b = np.asarray(b, dtype=np.intp)
    capacity = np.asarray(capacity, dtype=float)
    n_links = capacity.size
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"a and b must be 1-D of one length; got {a.shape} and {b.shape}")
    if a.size and (min(a.min(), b.min()) < 0 or max(a.max(), b.max()) >= n_links or (a == b).any()):
        raise ValueError(f"a and b must be distinct constraint ids in [0, {n_links})")
    if np.isnan(capacity).any() or (capacity < 0).any():
        raise ValueError("capacity must be >= 0 and not NaN (use inf for 'never binds')")
    rates = np.empty(a.size, dtype=float)
    ids = np.arange(a.size)
    count = (np.bincount(a, minlength=n_links) + np.bincount(b, minlength=n_links)).astype(float)
    residual = capacity.copy()
    lowest = np.empty(n_links, dtype=float)
    inf_cap = np.isinf(capacity)
    # (one errstate for the whole filling: entering it every pass cost about 10 % of a solve;
    # x / 0 on constraints with no flow left, inf - inf on never-binding ones)
    with np.errstate(divide="ignore", invalid="ignore"):
        while ids.size:
            level = np.where(count > 0, residual / count, np.inf)
            seen = np.minimum(level[a], level[b])  # the level at which each flow would stop
            # a constraint no flow of which stops lower elsewhere saturates at its own level
            lowest.fill(np.inf)
            np.minimum.at(lowest, a, seen)
            np.minimum.at(lowest, b, seen)
            free = level <= lowest * (1.0 + rtol)
            freeze = free[a] | free[b]
            r, fa, fb = seen[freeze], a[freeze], b[freeze]
            rates[ids[freeze]] = r
            residual -= np.bincount(fa, r, n_links) + np.bincount(fb, r, n_links)
            np.maximum(residual, 0.0, out=residual)
            residual[inf_cap] = np.inf
            count -= np.bincount(fa, minlength=n_links) + np.bincount(fb, minlength=n_links)
            keep = ~freeze
            a, b, ids = a[keep], b[keep], ids[keep]
    return rates
