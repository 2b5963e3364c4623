"""The layer timeline: each rank plays dispatch -> compute -> combine, layer after layer.

:func:`layer_graph` compiles a trace and its compute table into an operation graph
(:mod:`podsim.workloads.graph`) and :func:`run_timeline` runs it with the executor
(:func:`podsim.scenarios.execution.executor.execute`) over an engine's transport. The model, per
rank ``r`` and per (step, layer), in trace order of phases (``dispatch``, then expert
``compute``, then ``combine``, then any ``other`` traffic):

- a communication phase starts on ``r`` when ``r`` finished its previous phase; ``r`` posts its
  outgoing messages of the phase, each at the phase start plus the message's ``start_s``;
- hierarchical dispatch (trace column ``stage``, deepep-normal): ``r`` posts its stage-1 rows
  (forwarding inside the node what arrived over RDMA) once every stage-0 message addressed to
  ``r`` in the phase has been delivered, and not before the phase start plus the row's
  ``start_s``; with chunk rounds (trace column ``chunk``, DeepEP's pipelined kernels) a stage-1
  row of round ``k`` waits only for the stage-0 messages of round ``k`` into ``r``, and the
  rounds of one (src, dst, stage) go in order: an ``rdma`` row of round ``k`` is posted no
  earlier than the latest earlier round of its connection was (its queue pair then sends them
  back to back, in posting order: DeepEP's RDMA sender coordinator issues each chunk as a
  non-blocking put, ``nvshmemi_ibgda_put_nbi_warp``, without waiting for the previous one to
  complete: csrc/kernels/legacy/internode.cu @dd758ca), any other row waits for the delivery
  of that earlier round (a scale-up copy has no send queue that would keep them in order); a
  stage-0 message marked ``final`` (trace column: a direct delivery no forwarder carries on,
  such as DeepEP's own-node traffic) is waited for by no stage-1 row;
- the phase ends on ``r`` when every message ``r`` sends *and* every message ``r`` receives in
  that phase has been delivered (as DeepEP's dispatch/combine kernels return only when both the
  send and the receive side are done), plus the rank's kernel *tail* of the phase when the trace
  carries one (``attrs["kernel_tail"]``: arrays [step, layer, rank] of seconds per phase,
  podsim.workloads.deepep_ll: GPU-side work after the last arrival). A sender that runs ahead may
  deliver into a receiver that has not reached the phase yet: RDMA writes land in pre-registered
  buffers;
- ``compute`` takes the rank's expert-compute time for that layer (from the workload's compute
  model, scaled by straggler faults) and starts when the dispatch phase ended on that rank.

There is no global barrier: ranks drift apart exactly as far as the data dependencies allow.
``local`` hop messages (a rank to itself) are delivered at once, without the transport (unless
it ``carries_local``: :func:`podsim.scenarios.execution.executor.execute`). The
event loop, progress, time limit and Ctrl-C are the executor's.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd
import simpy
from podsim.scenarios.execution.executor import PROGRESS_EVENTS, GraphRun, Transport, execute
from podsim.workloads.graph import OpGraph

__all__ = [
    "PHASE_ORDER",
    "PROGRESS_EVENTS",
    "TimelineResult",
    "Transport",
    "kernel_tails",
    "layer_graph",
    "layer_plan",
    "run_timeline",
]

PHASE_ORDER = ("dispatch", "compute", "combine", "other")


@dataclass
class TimelineResult:
    """Posting and delivery time of every trace message (NaN if never), per-rank phases."""

    post_s: np.ndarray
    end_s: np.ndarray
    phases: pd.DataFrame
    status: str
    sim_time_s: float


def layer_plan(
    trace: pd.DataFrame, compute: pd.DataFrame | None
) -> list[tuple[int, int, list[str]]]:
    """(step, layer, phases in play order) of a trace: ``compute`` sits between dispatch and
    combine when the layer has either, or when it has a compute time."""
    have: dict[tuple[int, int], set[str]] = defaultdict(set)
    for s, l_, ph in trace[["step", "layer", "phase"]].drop_duplicates().itertuples(index=False):
        have[(int(s), int(l_))].add(str(ph))
    if compute is not None and len(compute):
        busy = compute[compute["compute_s"] > 0]
        for s, l_ in busy[["step", "layer"]].drop_duplicates().itertuples(index=False):
            have[(int(s), int(l_))].add("compute")
    return [
        (
            s,
            l_,
            [
                p
                for p in PHASE_ORDER
                if p in ph or (p == "compute" and {"dispatch", "combine"} & ph)
            ],
        )
        for (s, l_), ph in sorted(have.items())
    ]


def layer_graph(trace: pd.DataFrame, compute: pd.DataFrame, num_ranks: int) -> OpGraph:
    """The operation graph of the layer timeline (module docstring): per (step, layer, phase)
    and rank a ``begin`` join after the rank's previous phase, the rank's messages (send node
    ``m`` is trace row ``m``), an ``end`` join after every message the rank sends or receives;
    expert compute is a compute node. Each phase on each rank is a span tagged step, layer,
    phase, bytes_out, bytes_in."""
    n = len(trace)
    steps = trace["step"].to_numpy(np.int64)
    layers = trace["layer"].to_numpy(np.int64)
    phases = trace["phase"].to_numpy()
    src = trace["src_rank"].to_numpy(np.int64)
    dst = trace["dst_rank"].to_numpy(np.int64)
    nbytes = trace["bytes"].to_numpy(np.int64)
    start = trace["start_s"].to_numpy(dtype=float)
    hops = trace["hop"].to_numpy()
    stage = trace["stage"].to_numpy(np.int64) if "stage" in trace.columns else np.zeros(n, np.int64)
    chunked = "chunk" in trace.columns
    chunk = trace["chunk"].to_numpy(np.int64) if chunked else np.zeros(n, np.int64)
    final = trace["final"].to_numpy(np.int64) if "final" in trace.columns else np.zeros(n, np.int64)

    comp: dict[tuple[int, int, int], float] = {}
    if len(compute):
        for s, l_, r, c in compute[["step", "layer", "rank", "compute_s"]].itertuples(index=False):
            comp[(int(s), int(l_), int(r))] = float(c)

    tail = kernel_tails(trace.attrs.get("kernel_tail"))
    rows_of: dict[tuple[int, int, str], list[int]] = defaultdict(list)
    for i, key in enumerate(zip(steps.tolist(), layers.tolist(), phases.tolist(), strict=True)):
        rows_of[key].append(i)

    g = OpGraph()
    prev = [-1] * num_ranks  # each rank's last node so far

    def after(r: int) -> tuple[int, ...]:
        return () if prev[r] < 0 else (prev[r],)

    for s, l_, ps in layer_plan(trace, compute):
        for p in ps:
            if p == "compute":
                for r in range(num_ranks):
                    c = g.compute(r, comp.get((s, l_, r), 0.0), after(r), stream=None)
                    g.span(r, c, c, step=s, layer=l_, phase=p, bytes_out=0, bytes_in=0)
                    prev[r] = c
                continue
            begin = [g.join(after(r), rank=r) for r in range(num_ranks)]
            rows = rows_of.get((s, l_, p), [])
            node: dict[int, int] = {}
            # stage-0 nodes into a rank, per round: a stage-1 row forwards what they deliver
            arriving: dict[tuple[int, int], list[int]] = defaultdict(list)
            # per (src, dst, stage): [its latest round, the nodes that round's successor waits
            # for, the round before's]: an rdma row's posting gate, any other row's send
            rounds: dict[tuple[int, int, int], list] = {}
            # stage 0 first, each stage in round order (rows of one round keep trace order)
            for i in sorted(rows, key=lambda j: (stage[j] > 0, chunk[j])):
                a, b, st, k = int(src[i]), int(dst[i]), int(stage[i]), int(chunk[i])
                deps = [begin[a]]
                if st > 0:
                    deps += arriving[(a, k)]
                seen = rounds.get((a, b, st))
                if seen is None:
                    seen = rounds[(a, b, st)] = [k, [], []]
                elif k > seen[0]:  # a new round follows the pair's previous one
                    seen[:] = [k, [], seen[1]]
                deps += seen[2]
                posted_in_order = chunked and hops[i] == "rdma"
                if posted_in_order:
                    # the row's posting gate: ends when the row may be posted, after the gate
                    # of the connection's previous round (so rows post in round order)
                    deps = [g.join(tuple(deps), rank=a)]
                node[i] = g.send(
                    a,
                    b,
                    int(nbytes[i]),
                    tuple(deps),
                    hop=str(hops[i]),
                    delay_s=float(start[i]),
                    step=s,
                    layer=l_,
                    phase=p,
                    msg=i,
                    anchor=begin[a],
                    stage=st,
                )
                seen[1].append(deps[0] if posted_in_order else node[i])
                if st == 0 and not final[i]:  # a final delivery feeds no forward
                    arriving[(b, k)].append(node[i])
            touching: dict[int, list[int]] = defaultdict(list)  # sent or received by a rank
            out_b: dict[int, int] = defaultdict(int)
            in_b: dict[int, int] = defaultdict(int)
            for i in rows:
                a, b = int(src[i]), int(dst[i])
                touching[a].append(node[i])
                touching[b].append(node[i])
                out_b[a] += int(nbytes[i])
                in_b[b] += int(nbytes[i])
            tails = tail.get((s, l_, p))
            for r in range(num_ranks):
                end = g.join(
                    (begin[r], *touching.get(r, ())),
                    rank=r,
                    delay_s=0.0 if tails is None else float(tails[r]),
                )
                g.span(
                    r,
                    begin[r],
                    end,
                    step=s,
                    layer=l_,
                    phase=p,
                    bytes_out=out_b.get(r, 0),
                    bytes_in=in_b.get(r, 0),
                )
                prev[r] = end
    return g


def kernel_tails(kt: dict | None) -> dict[tuple[int, int, str], np.ndarray]:
    """``attrs["kernel_tail"]`` as {(step, layer, phase): seconds per rank} (empty: none)."""
    if not kt:
        return {}
    out = {}
    for ph, arr in kt.items():
        if ph in ("steps", "layers"):
            continue
        a = np.asarray(arr, dtype=float)
        for i, s in enumerate(np.asarray(kt["steps"]).tolist()):
            for j, l_ in enumerate(np.asarray(kt["layers"]).tolist()):
                out[(int(s), int(l_), str(ph))] = a[i, j]
    return out


def run_timeline(
    env: simpy.Environment,
    transport: Transport,
    trace: pd.DataFrame,
    compute: pd.DataFrame,
    *,
    num_ranks: int,
    time_limit: float | None = None,
    progress: Callable[[float, int | None], None] | None = None,
    progress_every: int = PROGRESS_EVENTS,
    graph: OpGraph | None = None,
    clock: Callable[[], float] | None = None,
) -> TimelineResult:
    """Play ``trace`` (row i is message i) over ``transport``: compile the layer timeline
    (:func:`layer_graph`, or run ``graph`` when the workload built one; its messages are
    ``trace``) and execute it. ``compute`` has columns step, layer, rank, compute_s (missing
    rows mean zero). ``clock``: see :func:`podsim.scenarios.execution.executor.execute`."""
    g = layer_graph(trace, compute, num_ranks) if graph is None else graph
    run = execute(
        env,
        transport,
        g,
        trace["hop"].to_numpy(),
        time_limit=time_limit,
        progress=progress,
        progress_every=progress_every,
        clock=clock,
    )
    a = g.arrays()
    post_s = np.full(len(trace), np.nan)
    end_s = np.full(len(trace), np.nan)
    sends = np.flatnonzero(a.msg >= 0)
    post_s[a.msg[sends]] = run.start_s[sends]
    end_s[a.msg[sends]] = run.end_s[sends]
    return TimelineResult(post_s, end_s, span_table(g, run), run.status, run.sim_time_s)


def span_table(g: OpGraph, run: GraphRun) -> pd.DataFrame:
    """The graph's spans as the phase table: one row per span that ended, with its tags,
    rank, start_s, end_s and duration_s, in (step, layer, phase order,
    rank) order when those tags are present."""
    rank, first, last, tag, tag_dicts = g.span_columns()
    t1 = run.end_s[last]
    kept = ~np.isnan(t1)
    rank, first, tag, t1 = rank[kept], first[kept], tag[kept], t1[kept]
    # one column per tag key (in order of first use, as records would have them), gathered
    # from the distinct tag dicts; a span without the key gets NaN
    used = np.zeros(len(tag_dicts), dtype=bool)
    used[tag] = True
    first_use = np.full(len(tag_dicts), len(tag), dtype=np.int64)
    np.minimum.at(first_use, tag, np.arange(len(tag)))
    keys: dict[str, None] = {}
    for t in np.argsort(first_use, kind="stable").tolist():
        if used[t]:
            keys.update(dict.fromkeys(tag_dicts[t]))
    data: dict[str, object] = {}
    for key in keys:
        values = np.empty(len(tag_dicts), dtype=object)
        values[:] = [d.get(key, np.nan) for d in tag_dicts]
        data[key] = values[tag].tolist()  # lists: pandas infers each column's dtype
    data.update(rank=rank.tolist(), start_s=run.start_s[first], end_s=t1)
    records = len(rank)
    cols = ["step", "layer", "phase", "rank", "start_s", "end_s", "bytes_out", "bytes_in"]
    ph = pd.DataFrame(data) if records else pd.DataFrame(columns=cols)
    ph = ph[[c for c in cols if c in ph.columns] + [c for c in ph.columns if c not in cols]]
    if {"step", "layer", "phase"} <= set(ph.columns) and len(ph):
        order = {p: i for i, p in enumerate(PHASE_ORDER)}
        ph["_order"] = ph["phase"].map(order).fillna(len(PHASE_ORDER))
        ph = ph.sort_values(["step", "layer", "_order", "rank"], kind="stable")
        ph = ph.drop(columns="_order")
    ph["duration_s"] = ph["end_s"] - ph["start_s"]
    return ph.reset_index(drop=True)
