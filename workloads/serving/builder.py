"""PD-disaggregated serving as an operation graph: prefill, KV-cache transfer, batched decode.

The cluster serves with separate *prefill* and *decode* instances (DistServe, arXiv 2401.09670;
Mooncake, arXiv 2407.00079): each instance is a set of ranks (its nodes' GPUs) that runs the
whole model with TP/EP inside. Per request, in the graph (:mod:`podsim.workloads.graph`):

1. **arrival**: a join at the request's arrival time;
2. **prefill** on the prefill instance that frees up first (ties: the lowest index), one request
   at a time per instance, FIFO in arrival order. Every rank of the instance computes (the
   instance works in lock-step), taking :meth:`InstancePerf.prefill_layer_parts` per layer,
   and the instance's TP and EP exchanges of each layer run over the fabric between the part
   before the MoE dispatch and the routed experts' part
   (:func:`podsim.workloads.serving.exchange.exchange_block`); the next prefill on the instance
   starts when every rank finished the previous one;
3. **KV transfer** to the chosen decode instance over the fabric: the cache
   (:meth:`Attention.cache_bytes` of the prompt) is split evenly over rank pairs, prefill rank
   ``k mod P`` -> decode rank ``k mod D`` for ``k < max(P, D)`` (the cache sharded evenly over an
   instance's ranks, as head- or sequence-sharded caches are [E]). ``whole``: one message per
   pair once the prefill ended. ``layerwise`` (as transfer engines such as Mooncake's stream it):
   the prefill runs as one compute node per group of ``stream_layers`` layers and each group's
   cache leaves as soon as that group is computed, one message per pair and group;
4. **decode** with continuous batching (Orca, OSDI'22) on the decode instance: iterations run
   back to back while any request is resident; an iteration takes
   :meth:`InstancePerf.decode_step_parts` of the resident requests' contexts on every rank of
   the instance, with the step's EP dispatch/combine (and TP all-reduces) on the fabric, and
   gives each one token; a request joins at the first iteration that starts after its cache
   arrived (at most ``max_batch`` resident) and leaves after ``output_tokens`` iterations. Its
   first token is the end of its first iteration (TTFT = arrival -> that end).

The graph is static, so batch membership is planned before the run: the planner replays the
instances with an idle-fabric estimate of every transfer (``pair_rate`` bytes/s per rank pair
plus ``pair_latency`` seconds) and of every exchange
(:meth:`podsim.workloads.serving.exchange.InstanceComm.estimate_s`). The iteration a request was
planned to join depends on its cache's real arrival in the graph: a transfer or exchange slower
than planned (contention) delays that iteration and all later ones on the instance; one faster
than planned does not move it earlier, and no request joins or leaves a batch the plan did not
put it in (a dynamic scheduler would need the executor to build nodes during the run). The
decode instance of a request is the one with the fewest resident and waiting requests at its
planned cache arrival (ties: fewer resident tokens, then the lowest index). Prefill is not
chunked: one prompt runs at a time, whole.

Graph size: consecutive iterations with the same members are merged into one block (at most
``exchange_steps``; an iteration in which a request joins stays alone, to mark first tokens),
whose exchanges travel as one message per rank pair and phase with the latency of the merged
exchanges put back (:mod:`podsim.workloads.serving.exchange`); so decode costs about
``2 x ranks x (ranks - 1)`` messages per block, prefill as many per group of ``stream_layers``
layers (fewer with the two-hop normal mode), and the transfer ``pairs x groups`` messages per
request.

Spans (the run's phase table, one row each, ``step`` = request id, ``layer`` 0) record the
request's parts: ``phase`` ``compute`` with ``part`` ``prefill`` / ``first_token`` / ``decode``,
and ``phase`` ``kv`` (first byte posted -> last byte delivered), each tagged with ``request``,
``arrival_s``, ``prompt_tokens``, ``output_tokens``, ``kv_bytes``, ``prefill_instance``,
``decode_instance`` (:mod:`podsim.workloads.serving.metrics` turns them into the requests table).
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from podsim.workloads.graph import OpGraph
from podsim.workloads.serving.exchange import InstanceComm, exchange_block
from podsim.workloads.serving.perf import InstancePerf
from podsim.workloads.serving.requests import Requests

__all__ = ["KV_MODES", "ServingPlan", "build_serving_graph"]

KV_MODES = ("layerwise", "whole")


@dataclass
class _Iteration:
    start: float
    duration: float
    members: tuple[int, ...]
    joins: tuple[int, ...]
    attn_s: float  # compute before the MoE dispatch (all layers)
    expert_s: float  # the routed experts' compute


@dataclass
class _DecodeInstance:
    """The planner's replay of one decode instance (module docstring, step 4); ``comm_s`` is
    the idle-fabric estimate of a step's exchanges for a batch size."""

    perf: InstancePerf
    max_batch: int
    comm_s: Callable[[int], float]
    t: float = 0.0
    resident: list[list[int]] = field(default_factory=list)  # [request, context, left]
    pending: list[tuple[float, int, int, int]] = field(default_factory=list)  # heap
    iterations: list[_Iteration] = field(default_factory=list)
    peak_kv: float = 0.0  # most cache bytes resident at once (planned)

    def add(self, ready: float, req: int, context: int, outputs: int) -> None:
        heapq.heappush(self.pending, (ready, req, context, outputs))

    def load(self) -> tuple[int, int]:
        return (
            len(self.resident) + len(self.pending),
            sum(r[1] for r in self.resident) + sum(p[2] for p in self.pending),
        )

    def advance(self, until: float) -> None:
        """Run the iterations that start before ``until``."""
        while True:
            if not self.resident:
                if not self.pending:
                    return
                self.t = max(self.t, self.pending[0][0])
            if self.t >= until:
                return
            joins: list[int] = []
            while (
                self.pending
                and self.pending[0][0] <= self.t
                and len(self.resident) < self.max_batch
            ):
                _, req, ctx, outs = heapq.heappop(self.pending)
                self.resident.append([req, ctx, outs])
                joins.append(req)
            ctx = [r[1] for r in self.resident]
            att, kvb = self.perf.model.attention, self.perf.kv_bytes
            held = sum(ctx) * att.bytes_per_token(kvb) + att.state_bytes * len(ctx)
            self.peak_kv = max(self.peak_kv, held)
            attn_s, expert_s = self.perf.decode_step_parts(ctx)
            dur = attn_s + expert_s + self.comm_s(len(ctx))
            members = tuple(r[0] for r in self.resident)
            self.iterations.append(_Iteration(self.t, dur, members, tuple(joins), attn_s, expert_s))
            self.t += dur
            for r in self.resident:
                r[1] += 1
                r[2] -= 1
            self.resident = [r for r in self.resident if r[2] > 0]


@dataclass
class ServingPlan:
    """The built graph and what was planned per request (arrays indexed by request)."""

    graph: OpGraph
    prefill_instance: np.ndarray
    decode_instance: np.ndarray
    kv_bytes: np.ndarray
    prefill_s: np.ndarray
    planned_kv_ready_s: np.ndarray
    decode_nodes: int
    #: per decode instance: the most KV-cache bytes resident at once in the plan
    decode_peak_kv_bytes: np.ndarray = field(default_factory=lambda: np.zeros(0))


def _split(total: int, parts: int) -> list[int]:
    base, extra = divmod(int(total), parts)
    return [base + (1 if k < extra else 0) for k in range(parts)]


def _default_comm(perf: InstancePerf, ranks: int, mode: str) -> InstanceComm:
    """An instance's exchanges when none are given: no TP, the instance one scale-up group."""
    return InstanceComm(perf.model, ranks, 1, ranks, mode, perf.weights.activations)


def build_serving_graph(
    requests: Requests,
    prefill: Sequence[Sequence[int]],
    decode: Sequence[Sequence[int]],
    prefill_perf: InstancePerf,
    decode_perf: InstancePerf,
    *,
    kv_transfer: str = "layerwise",
    stream_layers: int = 1,
    max_batch: int = 256,
    pair_rate: float = 50e9,
    pair_latency: float = 5e-6,
    prefill_comm: InstanceComm | None = None,
    decode_comm: InstanceComm | None = None,
    exchange_steps: int = 1,
    exchange_latency: float = 0.0,
) -> ServingPlan:
    """The operation graph of serving ``requests`` (module docstring). ``prefill``/``decode``
    are the instances' ranks (every instance of a role has as many); ``pair_rate`` (bytes/s)
    and ``pair_latency`` (s) estimate an idle rank pair's transfer for the plan;
    ``prefill_comm``/``decode_comm`` what an instance's layers exchange (default: DeepEP normal
    and low-latency, no TP); ``exchange_steps`` the most decode steps merged into one exchange
    and ``exchange_latency`` the latency put back per merged exchange
    (:mod:`podsim.workloads.serving.exchange`)."""
    if kv_transfer not in KV_MODES:
        raise ValueError(f"kv_transfer {kv_transfer!r} not in {KV_MODES}")
    if not prefill or not decode or any(not i for i in (*prefill, *decode)):
        raise ValueError("need at least one prefill and one decode instance, each with ranks")
    if stream_layers <= 0 or max_batch <= 0 or not pair_rate > 0 or pair_latency < 0:
        raise ValueError("stream_layers, max_batch and pair_rate must be > 0, pair_latency >= 0")
    if exchange_steps <= 0 or exchange_latency < 0:
        raise ValueError("exchange_steps must be > 0 and exchange_latency >= 0")
    pcomm = prefill_comm or _default_comm(prefill_perf, len(prefill[0]), "deepep-normal")
    dcomm = decode_comm or _default_comm(decode_perf, len(decode[0]), "deepep-low-latency")
    for role, insts, comm in (("prefill", prefill, pcomm), ("decode", decode, dcomm)):
        if any(len(i) != comm.ranks for i in insts):
            raise ValueError(f"every {role} instance must have the {comm.ranks} ranks of its comm")
    model = prefill_perf.model
    att = model.attention
    kv_b = prefill_perf.kv_bytes
    n = len(requests)
    g = OpGraph()
    bounds = [*range(0, att.layers, stream_layers), att.layers]
    whole = [(0, att.layers)]
    groups = list(itertools.pairwise(bounds)) if kv_transfer == "layerwise" else whole
    p_inst = np.zeros(n, dtype=np.int64)
    d_inst = np.zeros(n, dtype=np.int64)
    kv_total = np.zeros(n)
    pre_s = np.zeros(n)
    ready = np.zeros(n)
    free = [0.0] * len(prefill)
    # per prefill instance and rank: where its previous prefill ended
    tails = [{q: g.join((), rank=q) for q in inst} for inst in prefill]
    # per request: (rank -> end of the group on it, cache bytes) per group
    chunks: list[list[tuple[dict[int, int], int]]] = []
    pre_nodes: list[tuple[int, int]] = []
    # 1-3: arrivals and prefills (requests are in arrival order)
    for r in range(n):
        arr = float(requests.arrival_s[r])
        prompt = int(requests.prompt_tokens[r])
        i = min(range(len(prefill)), key=lambda k: (free[k], k))
        p_inst[r] = i
        ranks = list(prefill[i])
        lead = ranks[0]
        attn_l, exp_l = prefill_perf.prefill_layer_parts(prompt)
        layer_b = att.layer_bytes(prompt, kv_b)
        kv_total[r] = float(layer_b.sum())
        arrival = g.join(delay_s=arr, label=f"arrival {r}")
        cur = {q: g.join((arrival, tails[i][q]), rank=q) for q in ranks}
        t = link_t = max(arr, free[i])
        mine: list[tuple[dict[int, int], int]] = []
        first = -1
        for a, b in groups:
            compute_s = float(attn_l[a:b].sum() + exp_l[a:b].sum())
            moe = pcomm.moe_layers(a, b)
            starts = exchange_block(
                g, pcomm, ranks, cur, attn_s=float(attn_l[a:b].sum()),
                expert_s=float(exp_l[a:b].sum()), tokens=prompt, layers=b - a, moe_layers=moe,
                merged=1, exchange_latency=exchange_latency, stream="prefill",
                label=f"prefill {r} {a}-{b}",
            )  # fmt: skip
            first = starts[lead] if first < 0 else first
            pre_s[r] += compute_s
            t += compute_s + pcomm.estimate_s(prompt, moe, b - a, pair_rate, pair_latency)
            nbytes = float(layer_b[a:b].sum())
            mine.append((dict(cur), round(nbytes)))
            # planned: a pair's link carries the group after its compute and earlier groups
            link_t = max(link_t, t) + nbytes / len(ranks) / pair_rate
        tails[i] = dict(cur)
        free[i] = t
        ready[r] = link_t + pair_latency
        pre_nodes.append((first, g.join(cur.values(), rank=lead, label=f"prefill end {r}")))
        chunks.append(mine)
    # 4: decode instances, replayed in order of planned cache arrival
    layers, moe_layers = att.layers, dcomm.moe_layers(0, att.layers)

    def step_comm_s(batch: int) -> float:
        return dcomm.estimate_s(batch, moe_layers, layers, pair_rate, pair_latency)

    dec = [_DecodeInstance(decode_perf, max_batch, step_comm_s) for _ in decode]
    for r in sorted(range(n), key=lambda k: (ready[k], k)):
        for d in dec:
            d.advance(float(ready[r]))
        j = min(range(len(dec)), key=lambda k: (*dec[k].load(), k))
        d_inst[r] = j
        dec[j].add(
            float(ready[r]), r, int(requests.prompt_tokens[r]), int(requests.output_tokens[r])
        )
    for d in dec:
        d.advance(float("inf"))
    # the transfers, now that every request has its decode instance
    kv_done = np.zeros(n, dtype=np.int64)
    first_send = np.zeros(n, dtype=np.int64)
    for r in range(n):
        src = list(prefill[int(p_inst[r])])
        dst = list(decode[int(d_inst[r])])
        pairs = max(len(src), len(dst))
        sends: list[int] = []
        for grp, (ends, nbytes) in enumerate(chunks[r]):
            for k, part in enumerate(_split(nbytes, pairs)):
                if part == 0 and sends:
                    continue  # an empty share (a group smaller than the pairs)
                s = src[k % len(src)]
                sends.append(
                    g.send(s, dst[k % len(dst)], part, (ends[s],), step=r, layer=grp,
                           phase="other", label=f"kv {r} group {grp} pair {k}")
                )  # fmt: skip
        first_send[r] = sends[0]
        kv_done[r] = g.join(sends, rank=dst[0], label=f"kv done {r}")
    # decode blocks: up to exchange_steps iterations with the same batch
    first_node = np.full((n, 2), -1, dtype=np.int64)  # (start, end) of the first iteration
    last_node = np.full(n, -1, dtype=np.int64)
    decode_nodes = 0
    for j, d in enumerate(dec):
        ranks = list(decode[j])
        lead = ranks[0]
        tail = {q: g.join((), rank=q) for q in ranks}
        its = d.iterations
        k = 0
        while k < len(its):
            it = its[k]
            m = k + 1
            if not it.joins:
                while (
                    m < len(its)
                    and m - k < exchange_steps
                    and not its[m].joins
                    and its[m].members == it.members
                ):
                    m += 1
            if it.joins:
                deps = [int(kv_done[q]) for q in it.joins]
                tail = {q: g.join((tail[q], *deps), rank=q) for q in ranks}
            starts = exchange_block(
                g, dcomm, ranks, tail, attn_s=float(sum(x.attn_s for x in its[k:m])),
                expert_s=float(sum(x.expert_s for x in its[k:m])), tokens=len(it.members),
                layers=layers, moe_layers=moe_layers, merged=m - k,
                exchange_latency=exchange_latency, stream="decode",
                label=f"decode {j} it {k}-{m - 1}",
            )  # fmt: skip
            end = g.join(tail.values(), rank=lead, label=f"decode {j} it {k}-{m - 1} end")
            decode_nodes += 1
            for q in it.joins:
                first_node[q] = (starts[lead], end)
            for q in it.members:
                last_node[q] = end
            k = m
    # spans
    for r in range(n):
        tags = {
            "request": r,
            "arrival_s": float(requests.arrival_s[r]),
            "prompt_tokens": int(requests.prompt_tokens[r]),
            "output_tokens": int(requests.output_tokens[r]),
            "kv_bytes": float(kv_total[r]),
            "prefill_instance": int(p_inst[r]),
            "decode_instance": int(d_inst[r]),
        }
        plead, dlead = prefill[int(p_inst[r])][0], decode[int(d_inst[r])][0]
        f, last = pre_nodes[r]
        g.span(plead, f, last, step=r, layer=0, phase="compute", part="prefill",
               bytes_out=0, bytes_in=0, **tags)  # fmt: skip
        kvb = int(kv_total[r])
        g.span(dlead, int(first_send[r]), int(kv_done[r]), step=r, layer=0, phase="other",
               part="kv", bytes_out=kvb, bytes_in=kvb, **tags)  # fmt: skip
        s0, e0 = (int(x) for x in first_node[r])
        g.span(dlead, s0, e0, step=r, layer=0, phase="compute", part="first_token",
               bytes_out=0, bytes_in=0, **tags)  # fmt: skip
        g.span(dlead, s0, int(last_node[r]), step=r, layer=0, phase="compute",
               part="decode", bytes_out=0, bytes_in=0, **tags)  # fmt: skip
    peaks = np.array([d.peak_kv for d in dec])
    return ServingPlan(g, p_inst, d_inst, kv_total, pre_s, ready, decode_nodes, peaks)
