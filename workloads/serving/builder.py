"""PD-disaggregated serving as an operation graph: prefill, KV-cache transfer, batched decode.

The cluster serves with separate *prefill* and *decode* instances (DistServe, arXiv 2401.09670;
Mooncake, arXiv 2407.00079): each instance is a set of ranks (its nodes' GPUs) that runs the
whole model with TP/EP inside. Per request, in the graph (:mod:`podsim.workloads.graph`):

1. **arrival**: a join at the request's arrival time;
2. **prefill** on the prefill instance that frees up first (ties: the lowest index), one request
   at a time per instance, FIFO in arrival order. It is compute on the instance's first rank
   (its *lead*, which carries the instance's timeline: the other ranks compute in lock-step and
   carry no nodes of their own), taking :meth:`InstancePerf.prefill_s`;
3. **KV transfer** to the chosen decode instance over the fabric: the cache
   (:meth:`Attention.cache_bytes` of the prompt) is split evenly over rank pairs, prefill rank
   ``k mod P`` -> decode rank ``k mod D`` for ``k < max(P, D)`` (the cache sharded evenly over an
   instance's ranks, as head- or sequence-sharded caches are [E]). ``whole``: one message per
   pair once the prefill ended. ``layerwise`` (as transfer engines such as Mooncake's stream it):
   the prefill runs as one compute node per group of ``stream_layers`` layers and each group's
   cache leaves as soon as that group is computed, one message per pair and group;
4. **decode** with continuous batching (Orca, OSDI'22) on the decode instance: iterations run
   back to back while any request is resident; an iteration takes
   :meth:`InstancePerf.decode_step_s` of the resident requests' contexts and gives each one
   token; a request joins at the first iteration that starts after its cache arrived (at most
   ``max_batch`` resident) and leaves after ``output_tokens`` iterations. Its first token is the
   end of its first iteration (TTFT = arrival -> that end).

The graph is static, so batch membership is planned before the run: the planner replays the
instances with an idle-fabric estimate of every transfer (``pair_rate`` bytes/s per rank pair
plus ``pair_latency`` seconds). The iteration a request was planned to join depends on its
cache's real arrival in the graph: a transfer slower than planned (contention) delays that
iteration and all later ones on the instance; one faster than planned does not move it earlier.
The decode instance of a request is the one with the fewest resident and waiting requests at
its planned cache arrival (ties: fewer resident tokens, then the lowest index).

Graph size: iterations with the same members are merged into one compute node (an iteration in
which a request joins stays alone, to mark first tokens), so decode costs about two nodes per
request and instance; the transfer costs ``pairs x groups`` messages per request.

Spans (the run's phase table, one row each, ``step`` = request id, ``layer`` 0) record the
request's parts: ``phase`` ``compute`` with ``part`` ``prefill`` / ``first_token`` / ``decode``,
and ``phase`` ``kv`` (first byte posted -> last byte delivered), each tagged with ``request``,
``arrival_s``, ``prompt_tokens``, ``output_tokens``, ``kv_bytes``, ``prefill_instance``,
``decode_instance`` (:mod:`podsim.workloads.serving.metrics` turns them into the requests table).
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from podsim.workloads.graph import OpGraph
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


@dataclass
class _DecodeInstance:
    """The planner's replay of one decode instance (module docstring, step 4)."""

    perf: InstancePerf
    max_batch: int
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
            dur = self.perf.decode_step_s(ctx)
            self.iterations.append(
                _Iteration(self.t, dur, tuple(r[0] for r in self.resident), tuple(joins))
            )
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
) -> ServingPlan:
    """The operation graph of serving ``requests`` (module docstring). ``prefill``/``decode``
    are the instances' ranks; ``pair_rate`` (bytes/s) and ``pair_latency`` (s) estimate an idle
    rank pair's transfer for the plan."""
    if kv_transfer not in KV_MODES:
        raise ValueError(f"kv_transfer {kv_transfer!r} not in {KV_MODES}")
    if not prefill or not decode or any(not i for i in (*prefill, *decode)):
        raise ValueError("need at least one prefill and one decode instance, each with ranks")
    if stream_layers <= 0 or max_batch <= 0 or not pair_rate > 0 or pair_latency < 0:
        raise ValueError("stream_layers, max_batch and pair_rate must be > 0, pair_latency >= 0")
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
    chunks: list[list[tuple[int, int]]] = []  # per request: (compute node, cache bytes) per group
    pre_nodes: list[tuple[int, int]] = []
    # 1-3: arrivals and prefills (requests are in arrival order)
    for r in range(n):
        arr = float(requests.arrival_s[r])
        prompt = int(requests.prompt_tokens[r])
        i = min(range(len(prefill)), key=lambda k: (free[k], k))
        p_inst[r] = i
        lead = prefill[i][0]
        layer_s = prefill_perf.prefill_layer_s(prompt)
        layer_b = att.layer_bytes(prompt, kv_b)
        pre_s[r] = float(layer_s.sum())
        kv_total[r] = float(layer_b.sum())
        prev = g.join(delay_s=arr, label=f"arrival {r}")
        t = link_t = max(arr, free[i])
        mine: list[tuple[int, int]] = []
        for a, b in groups:
            dur = float(layer_s[a:b].sum())
            prev = g.compute(lead, dur, (prev,), stream="prefill", label=f"prefill {r} {a}-{b}")
            t += dur
            nbytes = float(layer_b[a:b].sum())
            mine.append((prev, round(nbytes)))
            # planned: a pair's link carries the group after its compute and earlier groups
            link_t = max(link_t, t) + nbytes / len(prefill[i]) / pair_rate
        free[i] = t
        ready[r] = link_t + pair_latency
        pre_nodes.append((mine[0][0], prev))
        chunks.append(mine)
    # 4: decode instances, replayed in order of planned cache arrival
    dec = [_DecodeInstance(decode_perf, max_batch) for _ in decode]
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
        for grp, (node, nbytes) in enumerate(chunks[r]):
            for k, part in enumerate(_split(nbytes, pairs)):
                if part == 0 and sends:
                    continue  # an empty share (a group smaller than the pairs)
                sends.append(
                    g.send(src[k % len(src)], dst[k % len(dst)], part, (node,), step=r,
                           layer=grp, phase="other", label=f"kv {r} group {grp} pair {k}")
                )  # fmt: skip
        first_send[r] = sends[0]
        kv_done[r] = g.join(sends, rank=dst[0], label=f"kv done {r}")
    # decode nodes
    first_node = np.full(n, -1, dtype=np.int64)
    last_node = np.full(n, -1, dtype=np.int64)
    decode_nodes = 0
    for j, d in enumerate(dec):
        lead = decode[j][0]
        its = d.iterations
        k = 0
        while k < len(its):
            it = its[k]
            m = k + 1
            if not it.joins:
                while m < len(its) and not its[m].joins and its[m].members == it.members:
                    m += 1
            dur = float(sum(x.duration for x in its[k:m]))
            deps = [int(kv_done[q]) for q in it.joins]
            node = g.compute(lead, dur, deps, stream="decode", label=f"decode {j} it {k}-{m - 1}")
            decode_nodes += 1
            for q in it.joins:
                first_node[q] = node
            for q in it.members:
                last_node[q] = node
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
        g.span(dlead, int(first_node[r]), int(first_node[r]), step=r, layer=0,
               phase="compute", part="first_token", bytes_out=0, bytes_in=0, **tags)  # fmt: skip
        g.span(dlead, int(first_node[r]), int(last_node[r]), step=r, layer=0, phase="compute",
               part="decode", bytes_out=0, bytes_in=0, **tags)  # fmt: skip
    peaks = np.array([d.peak_kv for d in dec])
    return ServingPlan(g, p_inst, d_inst, kv_total, pre_s, ready, decode_nodes, peaks)
