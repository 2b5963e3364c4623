"""The ``bound`` engine and the bound every run is measured against.

No simulation: for every communication phase (step, layer, phase) the physical lower bound of
:func:`fabric.bound.lower_bound` over the phase's messages, routed the least loading way (every
RDMA message spread over all equal-cost paths and all planes of its NIC, planes merged; see
:class:`podsim.scenarios.engines.flow.FlowCluster` with ``spread_all``), with the same wire framing,
NIC packet-rate and PCIe constraints as the flow engine and no congestion-control loss. PCIe
(with ``cluster.layout``): every resource of every server's tree is a constraint, each RDMA
message loads its sender's GPU -> NIC and its receiver's NIC -> GPU path and a same-card message
its GPU -> GPU path, so a phase whose traffic the tree cannot carry faster is bounded by it
(``limit_kind`` ``pcie``). The SMs' copy path of DeepEP's normal kernels
(``workload.moe.deepep.copy_rate``) is one constraint per GPU as in the flow engine, loaded by
every scale-up row into the GPU and by its rows to itself. GPUDirect Storage reads are left out:
they only take capacity away, so the bound stays a lower bound. Two uses:

- :func:`bound_summary` (``ctx -> dict``): per phase kind the bound on the all-to-all
  completion time (mean over layers, as the summary averages the measured one), what sets it
  (a link, a bundle of links, a NIC's packet rate or PCIe path, or one message alone) and a
  lower bound on the makespan. :func:`add_bound` puts it into a run's summary together with the
  run's result as a fraction of the bound (``bound_s / completion_time_s``: 1.0 means the run
  reached the physical limit). The runner calls these for every engine.
- the ``bound`` engine fills the result tables from the bounds: each message takes its lone flow
  time (serialisation at its tightest constraint plus path latency); in each phase every rank with
  traffic ends at the later of its own messages' bound and the phase's first start plus the phase
  bound, plus its kernel tail when the trace has one (the layer timeline's ``kernel_tail``,
  podsim.workloads.deepep_ll); compute takes the workload's compute time. Links carry the phase's
  offered wire bytes. (So each phase's completion time in its summary is the phase bound; its
  makespan is that bound-paced timeline, while ``bound.makespan_bound_s`` is the strict lower
  bound.)

Makespan bound: no run ends before its longest phase bound, nor before any rank's own chain
(the sum over its phases of its own messages' bounds plus its compute times).

Operation graphs (``workload.collective`` and the other graph workloads): the graph is executed
(:func:`podsim.scenarios.execution.executor.execute`) over an ideal transport on which every
message takes its lone-flow bound above (its bytes at the tightest constraint of its least
loading route, the link layer's wire framing P/(P+overhead) included, plus the path's unloaded
latency) whatever else is in flight. Every node then starts and ends no later than in any
simulation of the same graph (induction over the graph: its dependencies end no later and its
own duration is no longer), so the run is a lower bound that keeps the graph's dependencies: a
ring all-reduce on an idle fabric takes exactly its closed form ``2 (n - 1) (S / (n B) + L)``.
Contention is left to the phase bound: per phase the bound is the larger of the two, and the
makespan bound the larger of the graph run and the longest phase bound. The tables are those of
the graph run.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import simpy
from podsim.fabric.bound import lower_bound
from podsim.scenarios.build.limits import check_fluid
from podsim.scenarios.engines import EngineOutput, RunContext, register_engine
from podsim.scenarios.engines.flow import FlowCluster
from podsim.scenarios.execution.timeline import (
    TimelineResult,
    kernel_tails,
    layer_plan,
    run_timeline,
)
from podsim.scenarios.results.tables import link_table, message_table

__all__ = [
    "IdealTransport",
    "PhaseBounds",
    "add_bound",
    "bound_summary",
    "graph_bound",
    "phase_bounds",
    "run_bound",
]


class PhaseBounds:
    """Bounds of every communication phase of a run (built by :func:`phase_bounds`).

    ``table``: one row per (step, layer, phase) with ``bound_s``, ``limit``, ``limit_kind``
    (``link``, ``bundle``, ``nic-pps``, ``pcie``, ``gpu-scaleup`` or ``message``),
    ``limit_tier``, ``messages``; ``msg_time_s`` per trace row: the message's lone-flow bound
    (0 for local and same-NIC messages); ``offered_bits`` per constraint summed over phases;
    ``own_s`` per (step, layer, phase, rank): the longest bound of a message the rank sends or
    receives; ``fc`` the :class:`FlowCluster`.
    """

    def __init__(
        self,
        table: pd.DataFrame,
        msg_time_s: np.ndarray,
        offered_bits: np.ndarray,
        offered_packets: np.ndarray,
        own_s: dict[tuple[int, int, str], np.ndarray],
        fc: FlowCluster,
    ) -> None:
        self.table = table
        self.msg_time_s = msg_time_s
        self.offered_bits = offered_bits
        self.offered_packets = offered_packets
        self.own_s = own_s
        self.fc = fc


def _kind(fc: FlowCluster, cid: int) -> str:
    p = fc.paths
    if cid in p.members and p.tier[cid] != "gpu-scaleup":
        return "bundle"
    tier = str(p.tier[cid])
    if tier in ("nic-pps", "pcie", "gpu-scaleup"):
        return tier
    return "link"


def phase_bounds(ctx: RunContext) -> PhaseBounds:
    """The bound of every (step, layer, phase) of ``ctx.trace`` (see the module docstring)."""
    fc = FlowCluster(ctx, spread_all=True, sm_copy=True)
    p = fc.paths
    groups = p.plane_groups()
    tr = ctx.trace.reset_index(drop=True)
    n = len(tr)
    msg_t = np.zeros(n)
    offered = np.zeros(p.n_constraints)
    offered_pk = np.zeros(p.n_constraints)
    src = tr["src_rank"].to_numpy(np.int64)
    dst = tr["dst_rank"].to_numpy(np.int64)
    nbytes = tr["bytes"].to_numpy(np.int64)
    hop = tr["hop"].astype(str).to_numpy()
    moving = (src != dst) & (hop != "local")
    if fc.copy_ids is not None:  # the SMs' copy path carries a GPU's rows to itself too
        moving |= hop == "local"
    rows_out: list[dict[str, Any]] = []
    own: dict[tuple[int, int, str], np.ndarray] = {}
    num_ranks = ctx.cluster.num_ranks
    keys = ["step", "layer", "phase"]
    for (s, l_, ph), grp in tr.groupby(keys, sort=True):
        rows = grp.index.to_numpy()
        rows = rows[moving[rows]]
        own_r = np.zeros(num_ranks)
        rec: dict[str, Any] = {
            "step": int(s),
            "layer": int(l_),
            "phase": str(ph),
            "messages": len(grp),
        }
        if rows.size:
            r = fc.route(rows, src[rows], dst[rows], nbytes[rows], hop[rows])
            go = r.kind == 0
            rr = rows[go]
            b = lower_bound(
                p.capacity,
                r.idx[go],
                r.coef[go],
                nbytes[rr].astype(float),
                r.latency_s[go],
                groups=groups,
                names=p.names,
            )
            msg_t[rr] = b.flow_time_s
            valid = r.idx[go] >= 0
            offered += np.bincount(
                r.idx[go][valid],
                weights=(r.coef[go] * (8.0 * nbytes[rr])[:, None])[valid],
                minlength=p.n_constraints,
            )
            offered_pk += np.bincount(
                r.idx[go][valid],
                weights=(r.frac[go] * r.packets[go][:, None])[valid],
                minlength=p.n_constraints,
            )
            np.maximum.at(own_r, src[rr], b.flow_time_s)
            np.maximum.at(own_r, dst[rr], b.flow_time_s)
            if b.limit_kind == "constraint":
                cid = int(np.flatnonzero(groups == b.limit_index)[0])
                rec.update(
                    bound_s=b.time_s,
                    limit=b.limit,
                    limit_kind=_kind(fc, cid),
                    limit_tier=str(p.tier[cid]),
                )
            elif b.limit_kind == "flow":
                m = int(rr[b.limit_index])
                rec.update(
                    bound_s=b.time_s,
                    limit=f"message {m} ({src[m]}->{dst[m]})",
                    limit_kind="message",
                    limit_tier="",
                )
            else:
                rec.update(bound_s=0.0, limit="", limit_kind="none", limit_tier="")
        else:
            rec.update(bound_s=0.0, limit="", limit_kind="none", limit_tier="")
        own[(int(s), int(l_), str(ph))] = own_r
        rows_out.append(rec)
    cols = ["step", "layer", "phase", "bound_s", "limit", "limit_kind", "limit_tier", "messages"]
    table = pd.DataFrame(rows_out, columns=cols)
    return PhaseBounds(table, msg_t, offered, offered_pk, own, fc)


def _compute_times(ctx: RunContext) -> dict[tuple[int, int], np.ndarray]:
    out: dict[tuple[int, int], np.ndarray] = {}
    c = ctx.compute
    if c is None or not len(c):
        return out
    n = ctx.cluster.num_ranks
    for (s, l_), grp in c.groupby(["step", "layer"], sort=True):
        arr = np.zeros(n)
        arr[grp["rank"].to_numpy(np.int64)] = grp["compute_s"].to_numpy(float)
        out[(int(s), int(l_))] = arr
    return out


def _plan(ctx: RunContext) -> list[tuple[int, int, list[str]]]:
    """(step, layer, phases in order) as the layer timeline plays them
    (:func:`podsim.scenarios.execution.timeline.layer_plan`)."""
    return layer_plan(ctx.trace, ctx.compute)


def _chain(ctx: RunContext, pb: PhaseBounds, paced: bool) -> tuple[np.ndarray, pd.DataFrame]:
    """Per-rank timeline: ``paced`` ends each phase at max(own bound, first start + phase
    bound) (the bound engine's tables); otherwise at the rank's own bound (a strict per-rank
    lower bound). Returns (per-rank end time, phases table)."""
    n = ctx.cluster.num_ranks
    t = np.zeros(n)
    comp = _compute_times(ctx)
    tr = ctx.trace
    tails = kernel_tails(tr.attrs.get("kernel_tail"))
    out_b = tr.groupby(["step", "layer", "phase", "src_rank"])["bytes"].sum()
    in_b = tr.groupby(["step", "layer", "phase", "dst_rank"])["bytes"].sum()
    bound_of = {
        (int(s), int(l_), str(p)): float(b)
        for s, l_, p, b in pb.table[["step", "layer", "phase", "bound_s"]].itertuples(index=False)
    }
    frames = []
    ranks = np.arange(n)
    for s, l_, phases in _plan(ctx):
        for ph in phases:
            start = t.copy()
            bo = np.zeros(n, dtype=np.int64)
            bi = np.zeros(n, dtype=np.int64)
            if ph == "compute":
                end = start + comp.get((s, l_), np.zeros(n))
            else:
                key = (s, l_, ph)
                own = pb.own_s.get(key, np.zeros(n))
                if key in out_b.index.droplevel(3):
                    part = out_b.loc[key]
                    bo[part.index.to_numpy()] = part.to_numpy()
                if key in in_b.index.droplevel(3):
                    part = in_b.loc[key]
                    bi[part.index.to_numpy()] = part.to_numpy()
                end = start + own
                if paced:
                    busy = (bo > 0) | (bi > 0)
                    if busy.any():
                        floor = start[busy].min() + bound_of.get(key, 0.0)
                        end = np.where(busy, np.maximum(end, floor), end)
                # the kernels' GPU-side time after their last message (podsim.workloads.deepep_ll)
                end = end + tails.get(key, 0.0)
            frames.append(
                pd.DataFrame(
                    {
                        "step": s,
                        "layer": l_,
                        "phase": ph,
                        "rank": ranks,
                        "start_s": start,
                        "end_s": end,
                        "bytes_out": bo,
                        "bytes_in": bi,
                    }
                )
            )
            t = end
    if not frames:
        return t, pd.DataFrame()
    df = pd.concat(frames, ignore_index=True)
    df["duration_s"] = df["end_s"] - df["start_s"]
    return t, df


def _summarise(pb: PhaseBounds, chain_end: np.ndarray) -> dict[str, Any]:
    phases: dict[str, Any] = {}
    tab = pb.table
    for ph, grp in tab.groupby("phase", sort=False):
        worst = grp.loc[grp["bound_s"].idxmax()]
        phases[str(ph)] = {
            "layers": len(grp),
            "bound_s": float(grp["bound_s"].mean()),
            "bound_max_s": float(grp["bound_s"].max()),
            "limit": str(worst["limit"]),
            "limit_kind": str(worst["limit_kind"]),
            "limit_tier": str(worst["limit_tier"]),
        }
    longest = float(tab["bound_s"].max()) if len(tab) else 0.0
    chain = float(chain_end.max()) if chain_end.size else 0.0
    return {"phases": phases, "makespan_bound_s": max(longest, chain)}


class IdealTransport:
    """Delivers message ``m`` ``msg_time_s[m]`` after it is posted, whatever else is in flight
    (the executor's :class:`~podsim.scenarios.execution.executor.Transport`)."""

    def __init__(self, msg_time_s: np.ndarray) -> None:
        self.env = simpy.Environment()
        self.msg_time_s = msg_time_s

    def send(
        self,
        msg: int,
        src_rank: int,
        dst_rank: int,
        nbytes: int,
        hop: str,
        on_done: Callable[[int], None],
    ) -> None:
        self.env.timeout(float(self.msg_time_s[msg])).callbacks.append(lambda _e: on_done(msg))


def graph_bound(ctx: RunContext, pb: PhaseBounds) -> tuple[TimelineResult, PhaseBounds]:
    """Run ``ctx.graph`` over the :class:`IdealTransport` of ``pb``'s lone-flow bounds (module
    docstring). Returns the run and ``pb`` with each phase's bound raised to the phase's extent
    in that run where it is longer (``limit_kind`` ``dependencies``)."""
    assert ctx.graph is not None
    t = IdealTransport(pb.msg_time_s)
    tl = run_timeline(
        t.env,
        t,
        ctx.trace,
        ctx.compute,
        num_ranks=ctx.cluster.num_ranks,
        progress=ctx.progress,
        graph=ctx.graph,
    )
    table = pb.table.copy()
    ph = tl.phases
    if len(ph) and len(table):
        keys = ["step", "layer", "phase"]
        span = ph.groupby(keys)["end_s"].max() - ph.groupby(keys)["start_s"].min()
        extent = span.reindex(pd.MultiIndex.from_frame(table[keys])).to_numpy(float)
        longer = np.nan_to_num(extent) > table["bound_s"].to_numpy(float)
        table.loc[longer, "bound_s"] = extent[longer]
        table.loc[longer, "limit"] = "dependencies, each message alone"
        table.loc[longer, "limit_kind"] = "dependencies"
        table.loc[longer, "limit_tier"] = ""
    out = PhaseBounds(table, pb.msg_time_s, pb.offered_bits, pb.offered_packets, pb.own_s, pb.fc)
    return tl, out


def _graph_end(tl: TimelineResult) -> np.ndarray:
    return np.asarray([tl.sim_time_s])


def bound_summary(ctx: RunContext) -> dict[str, Any]:
    """Per phase kind: ``bound_s`` (mean over layers), ``bound_max_s``, ``limit``,
    ``limit_kind``, ``limit_tier``; and ``makespan_bound_s`` (module docstring)."""
    pb = phase_bounds(ctx)
    if ctx.graph is not None:
        tl, pb = graph_bound(ctx, pb)
        return _summarise(pb, _graph_end(tl))
    end, _ = _chain(ctx, pb, paced=False)
    return _summarise(pb, end)


def add_bound(summary: dict[str, Any], bound: dict[str, Any]) -> dict[str, Any]:
    """``summary`` (as :func:`scenarios.results.tables.summarise` makes it) with ``bound`` attached
    and, per phase, ``bound_s`` and ``fraction_of_bound`` = bound / measured completion time
    (1.0 = at the physical limit); likewise ``makespan_fraction_of_bound``."""
    out = dict(summary)
    out["bound"] = bound
    phases = {k: dict(v) for k, v in summary.get("phases", {}).items()}
    for ph, b in bound.get("phases", {}).items():
        m = phases.get(ph)
        if m is None or "completion_time_s" not in m:
            continue
        t = m.get("completion_time_s")
        m["bound_s"] = b["bound_s"]
        m["fraction_of_bound"] = (b["bound_s"] / t) if t else None
    out["phases"] = phases
    mk = summary.get("makespan_s")
    out["makespan_fraction_of_bound"] = (bound["makespan_bound_s"] / mk) if mk else None
    return out


@register_engine(
    "bound",
    "no simulation: per-link load / capacity, the physical lower bound",
    faults={"straggler"},  # a slower GPU lengthens its compute; the links are taken as built
    graphs=True,
    check_size=check_fluid,
    sm_copy=True,
)
def run_bound(ctx: RunContext) -> EngineOutput:
    """Fill the result tables from the bounds (see the module docstring)."""
    pb = phase_bounds(ctx)
    if ctx.graph is not None:
        return _run_graph_bound(ctx, pb)
    strict_end, _ = _chain(ctx, pb, paced=False)
    _, phases = _chain(ctx, pb, paced=True)
    tr = ctx.trace
    post = np.zeros(len(tr))
    if len(phases) and len(tr):
        starts = phases.set_index(["step", "layer", "phase", "rank"])["start_s"]
        key = pd.MultiIndex.from_arrays(
            [tr["step"], tr["layer"], tr["phase"].astype(str), tr["src_rank"]]
        )
        post = starts.reindex(key).to_numpy(float) + tr["start_s"].to_numpy(float)
    end = post + pb.msg_time_s
    fc = pb.fc
    links = link_table(ctx.cluster.graph, fc.link_counters(pb.offered_bits, pb.offered_packets))
    makespan = float(phases["end_s"].max()) if len(phases) else 0.0
    return EngineOutput(
        messages=message_table(tr, post, end),
        phases=phases,
        links=links,
        qps=pd.DataFrame(),
        queues=pd.DataFrame(),
        sim_time_s=makespan,
        events=0,
        status="complete",
        extra={"bound": _summarise(pb, strict_end), "phase_bounds": pb.table.to_dict("list")},
    )


def _run_graph_bound(ctx: RunContext, pb: PhaseBounds) -> EngineOutput:
    """The bound engine's tables for an operation graph: the graph run over the ideal
    transport (module docstring)."""
    tl, pb = graph_bound(ctx, pb)
    links = link_table(ctx.cluster.graph, pb.fc.link_counters(pb.offered_bits, pb.offered_packets))
    return EngineOutput(
        messages=message_table(ctx.trace, tl.post_s, tl.end_s),
        phases=tl.phases,
        links=links,
        qps=pd.DataFrame(),
        queues=pd.DataFrame(),
        sim_time_s=tl.sim_time_s,
        events=0,
        status=tl.status,
        extra={
            "bound": _summarise(pb, _graph_end(tl)),
            "phase_bounds": pb.table.to_dict("list"),
            "transport": "ideal: each message its lone-flow bound",
        },
    )
