"""MoE dispatch on NumPy: permute a token tensor into per-destination-rank receive buffers.

Three modes (the ``MODES`` registry), after the kernels they model (docs/physics.md, MoE section):

- ``deepep-normal`` (DeepEP normal/internode kernels): a token goes to a rank once, however many
  of its experts live there (per-rank dedup). Across nodes the path is hierarchical: one RDMA
  transfer to the GPU with the same local index on each target node (per-node dedup), then an
  NVLink forward to the target ranks there. Rank r's receive buffer holds its tokens ordered by
  source rank, then token, with ``recv_topk_idx`` (local expert ids, -1 where the expert is
  elsewhere) and ``recv_topk_weights``, as DeepEP returns them.
- ``deepep-low-latency`` (DeepEP low-latency kernels): one message per (token, expert), each with
  a 16 B header; received rows are grouped per local expert. The kernels put every message
  straight to its rank: over NVLink to intra-node peers with ``allow_nvlink_for_low_latency_mode``
  (DeepEP's default), else over RDMA (IBGDA), intra-node peers included (podsim.workloads.traffic).
- ``megatron-alltoall`` (Megatron-LM's all-to-all token dispatcher): one row per (token, expert),
  no dedup; rows grouped per expert, as the grouped GEMM wants them.

The data movement is one vectorised gather (``np.take`` of whole rows) per buffer; the receive
order and the combine plan come from a counting pass over the routing (no loop over tokens).
With ``threads`` > 1 the gather is cut into tasks of contiguous receive rows (at least 4 MB
each) run on podsim.workloads.parallel's pool; the buffers are the same for any thread count. On the
project's 2-core VM (benchmarks/bench_workloads.py, 4096 tokens x 7168, FP8, top-8 over 64
ranks) one thread takes 32-34 ms (55-60 % of np.copyto's rate for the same bytes; ~7 ms of it is
index work in ``deepep-normal``), two threads on an idle second core 18-22 ms (1.8x; 1.65x in
``deepep-normal``, whose index work stays serial), while np.copyto gains 1.9x.
The multi-hop route of ``deepep-normal`` only changes which links carry the bytes, not the
final receive buffers, so it lives in the trace (podsim.workloads.traffic), not in the data path.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from podsim.fabric.registry import Registry
from podsim.workloads.layout import check_topk, token_ranks
from podsim.workloads.parallel import resolve_threads, run_chunks
from podsim.workloads.precision import WireTokens
from podsim.workloads.workspace import Workspace

__all__ = ["MODES", "DispatchHandle", "DispatchMode", "dispatch", "get_mode", "rank_share"]

_CHUNK_BYTES = 1 << 22
"""Least receive-buffer bytes per threaded task (4 MB: hand-overs stay rare)."""


@dataclass(frozen=True)
class DispatchMode:
    """How a mode turns routed (token, expert) copies into messages.

    ``rdma_peers``: the kernel reaches every other rank over RDMA, peers in its own node too
    (DeepEP low-latency: IBGDA puts), unless NVLink is allowed for them (podsim.workloads.traffic).
    """

    name: str
    dedup: bool
    hierarchical: bool
    header_bytes: int
    rdma_peers: bool = False

    def pair_copies(self, tokens: float, experts: int, top_k: int, ranks: int) -> float:
        """Expected token copies one rank sends one EP peer for ``tokens`` tokens it routes,
        under uniform routing (each token's ``top_k`` of ``experts`` drawn without
        replacement, ``experts / ranks`` per rank): ``tokens x P(rank)`` with per-rank dedup
        (:func:`rank_share`), else ``tokens x top_k / ranks``, one per (token, expert)."""
        if self.dedup:
            return tokens * rank_share(experts, top_k, ranks)
        return tokens * top_k / ranks

    def collective(self, local: int, ranks: int) -> str:
        """The all-to-all algorithm (:mod:`podsim.workloads.collectives`) of this mode over
        ``ranks`` ranks, ``local`` of them per scale-up domain: a hierarchical mode's two hops
        (scale-up and one rail) with the second forwarding as the first delivers
        (``pipelined``: DeepEP normal's chunked RDMA -> NVLink forwarding) when the group spans
        several domains of several ranks; else ``direct``."""
        return "pipelined" if self.hierarchical and 1 < local < ranks else "direct"


def rank_share(experts: int, top_k: int, ranks: int) -> float:
    """Probability that a token's ``top_k`` of ``experts`` (drawn uniformly without
    replacement) include one of a rank's ``experts / ranks``: ``1 - C(E - e, k) / C(E, k)``."""
    own = experts / ranks
    miss = 1.0
    for i in range(top_k):  # C(E - e, k) / C(E, k) as a product, e need not be an integer
        miss *= max(experts - own - i, 0.0) / (experts - i)
    return 1.0 - miss


MODES: Registry[DispatchMode] = Registry("dispatch mode")
MODES.add(
    "deepep-normal",
    DispatchMode("deepep-normal", dedup=True, hierarchical=True, header_bytes=0),
    "DeepEP normal: per-rank dedup; RDMA to the same local index per node, then NVLink forward",
)
MODES.add(
    "deepep-low-latency",
    DispatchMode(
        "deepep-low-latency", dedup=False, hierarchical=False, header_bytes=16, rdma_peers=True
    ),
    "DeepEP low-latency: one message per (token, expert), 16 B header, direct over RDMA",
)
MODES.add(
    "megatron-alltoall",
    DispatchMode("megatron-alltoall", dedup=False, hierarchical=False, header_bytes=0),
    "Megatron all-to-all dispatcher: one row per (token, expert), no dedup",
)


def get_mode(mode: str | DispatchMode) -> DispatchMode:
    return mode if isinstance(mode, DispatchMode) else MODES.get(mode)


@dataclass(frozen=True, eq=False)
class DispatchHandle:
    """Everything combine needs to undo a dispatch.

    Received rows of rank r are ``rank_offsets[r]:rank_offsets[r+1]``; ``row_token`` is each
    row's source token. Per-copy modes set ``row_expert`` (physical expert) and ``row_weight``;
    ``deepep-normal`` sets ``recv_topk_idx`` (local expert id or -1) and ``recv_topk_weights``.
    ``combine_rows[t]`` lists the rows of token t (per-copy modes: one per top-k slot, in slot
    order; ``deepep-normal``: one per destination rank, ascending), padded with row 0 at
    ``combine_weight`` 0; ``combine_weight`` is the gate weight of each row (1 for
    ``deepep-normal``, whose rows come back already weighted).
    """

    mode: DispatchMode
    num_tokens: int
    num_ranks: int
    experts_per_rank: int
    row_token: np.ndarray
    rank_offsets: np.ndarray
    combine_rows: np.ndarray
    combine_weight: np.ndarray
    row_expert: np.ndarray | None = None
    row_weight: np.ndarray | None = None
    recv_topk_idx: np.ndarray | None = None
    recv_topk_weights: np.ndarray | None = None

    @property
    def num_rows(self) -> int:
        return int(self.row_token.shape[0])

    def row_rank(self) -> np.ndarray:
        """Destination rank of each received row."""
        return np.repeat(np.arange(self.num_ranks), np.diff(self.rank_offsets))


def _check_routing(
    x: WireTokens, topk_idx: np.ndarray, topk_weights: np.ndarray, num_experts: int, num_ranks: int
) -> tuple[np.ndarray, np.ndarray]:
    topk_idx = check_topk(topk_idx, num_experts, num_ranks)
    topk_weights = np.asarray(topk_weights, dtype=np.float32)
    if topk_idx.shape[0] != x.num_tokens:
        raise ValueError(f"topk_idx must be [tokens={x.num_tokens}, k]; got shape {topk_idx.shape}")
    if topk_weights.shape != topk_idx.shape:
        raise ValueError(f"topk_weights shape {topk_weights.shape} != topk_idx {topk_idx.shape}")
    return topk_idx, topk_weights


def _sort_key(values: np.ndarray, bound: int) -> np.ndarray:
    """``values`` (0 <= v < bound) in the narrowest unsigned type: NumPy's stable argsort is a
    radix sort (linear time) for 8- and 16-bit keys, a merge sort for wider ones."""
    if bound <= 1 << 8:
        return values.astype(np.uint8)
    if bound <= 1 << 16:
        return values.astype(np.uint16)
    return values


def _copy_plan(
    order: np.ndarray, topk_idx: np.ndarray, topk_weights: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Combine plan of a per-copy mode: row of each (token, slot), the inverse of ``order``.

    Masked slots point at row 0 with weight 0; the plan is [tokens, k] in slot order, the order
    in which DeepEP's low-latency combine and Megatron's unpermute add a token's copies.
    """
    n, k = topk_idx.shape
    plan = np.zeros(n * k, dtype=np.int64)
    plan[order] = np.arange(order.shape[0])
    weight = np.where(topk_idx >= 0, topk_weights, np.float32(0))
    return plan.reshape(n, k), np.ascontiguousarray(weight, dtype=np.float32)


def _dedup_plan(ranks: np.ndarray, order: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Combine plan of ``deepep-normal``: each token's rows, by destination rank, weight 1.

    ``ranks`` is each token's distinct ranks, ascending with -1 padding at the end
    (podsim.workloads.layout.token_ranks); receive row i holds the (token, rank) pair at flat
    position ``order[i]`` of ``ranks``. Inverting ``order`` gives each pair's row in the
    row-major order of ``ranks``: grouped by token, ranks ascending. The plan is
    [tokens, max ranks per token]; padding is row 0 with weight 0.
    """
    n = ranks.shape[0]
    row_of = np.zeros(ranks.size, dtype=np.int64)
    row_of[order] = np.arange(order.shape[0])
    counts = (ranks >= 0).sum(axis=1)
    width = max(int(counts.max(initial=0)), 1)
    plan = np.ascontiguousarray(row_of.reshape(ranks.shape)[:, :width])
    weight = np.zeros((n, width), dtype=np.float32)
    weight[np.arange(width)[None, :] < counts[:, None]] = 1.0
    plan[weight == 0] = 0
    return plan, weight


def _gather(
    x: WireTokens, rows: np.ndarray, out: WireTokens | None, threads: int = 1
) -> WireTokens:
    """Rows of ``x`` into (a prefix of) ``out``'s buffers: the data movement of dispatch.

    Threaded, each task copies a contiguous range of receive rows (podsim.workloads.parallel).
    """
    n = rows.shape[0]
    if out is None:
        data = np.empty((n, x.hidden), dtype=x.data.dtype)
        scales = None if x.scales is None else np.empty((n, x.scales.shape[1]), np.float32)
    else:
        if out.dtype != x.dtype or out.hidden != x.hidden or out.num_tokens < n:
            raise ValueError(
                f"out buffer ({out.dtype}, {out.num_tokens} x {out.hidden}) cannot hold "
                f"{n} x {x.hidden} {x.dtype} rows"
            )
        data = out.data[:n]
        scales = None if out.scales is None else out.scales[:n]

    def copy_rows(_worker: int, lo: int, hi: int) -> None:
        # mode="clip" avoids NumPy's defensive buffering of `out` (rows are in range already).
        np.take(x.data, rows[lo:hi], axis=0, out=data[lo:hi], mode="clip")
        if scales is not None:
            np.take(x.scales, rows[lo:hi], axis=0, out=scales[lo:hi], mode="clip")

    row_bytes = x.data.strides[0] + (0 if x.scales is None else x.scales.strides[0])
    chunk = n if threads <= 1 else max(_CHUNK_BYTES // max(1, row_bytes), -(-n // (8 * threads)))
    run_chunks(copy_rows, n, chunk, threads)
    return WireTokens(x.dtype, data, scales)


def _workspace_tokens(ws: Workspace, x: WireTokens, rows: int) -> WireTokens:
    data = ws.array("dispatch.data", (rows, x.hidden), x.data.dtype)
    scales = None
    if x.scales is not None:
        scales = ws.array("dispatch.scales", (rows, x.scales.shape[1]), np.float32)
    return WireTokens(x.dtype, data, scales)


def dispatch(
    x: WireTokens,
    topk_idx: np.ndarray,
    topk_weights: np.ndarray,
    num_experts: int,
    num_ranks: int,
    mode: str | DispatchMode = "deepep-normal",
    *,
    out: WireTokens | None = None,
    workspace: Workspace | None = None,
    threads: int | None = None,
) -> tuple[WireTokens, DispatchHandle]:
    """Dispatch the tokens of a whole EP group (all ranks' tokens stacked, any order).

    ``topk_idx`` holds *physical* expert ids (see podsim.workloads.placement), expert p on rank
    p // (num_experts / num_ranks). Returns the receive rows of all ranks (rank r's rows are
    ``handle.rank_offsets[r]:...[r+1]``) and the handle for :func:`workloads.combine.combine`.
    ``out`` may be a preallocated receive buffer (its first rows are filled); without it,
    ``workspace`` (workloads.workspace, DeepEP's ``Buffer``) provides one that is reused across
    calls (valid until the next dispatch with that workspace), else a new one is allocated.
    ``threads``: worker threads for the row copies (None: podsim.workloads.parallel's default); the
    result is the same for any count.
    """
    m = get_mode(mode)
    nthreads = resolve_threads(threads)
    topk_idx, topk_weights = _check_routing(x, topk_idx, topk_weights, num_experts, num_ranks)
    n, k = topk_idx.shape
    per_rank = num_experts // num_ranks
    rank_offsets = np.zeros(num_ranks + 1, dtype=np.int64)
    if m.dedup:
        # the deduplicated (token, rank) pairs sorted by destination, then source token
        # (DeepEP's order): a stable sort of the flat pairs by rank keeps tokens ascending
        ranks = token_ranks(topk_idx, per_rank, num_ranks)
        flat = ranks.ravel()
        pos = np.flatnonzero(flat >= 0)
        order = pos[np.argsort(_sort_key(flat[pos].astype(np.int64), num_ranks), kind="stable")]
        row_token, dst = order // ranks.shape[1], flat[order].astype(np.int64)
        np.cumsum(np.bincount(dst, minlength=num_ranks), out=rank_offsets[1:])
        row_topk = topk_idx[row_token]
        here = (row_topk >= 0) & (row_topk // per_rank == dst[:, None])
        recv_idx = np.where(here, row_topk - (dst * per_rank)[:, None], -1)
        recv_w = np.where(here, topk_weights[row_token], np.float32(0))
        extra = {"recv_topk_idx": recv_idx, "recv_topk_weights": recv_w}
        combine_rows, combine_weight = _dedup_plan(ranks, order)
    else:
        flat_e = topk_idx.ravel()
        pos = np.flatnonzero(flat_e >= 0)
        key = _sort_key(flat_e[pos], num_experts)
        order = pos[np.argsort(key, kind="stable")]  # by expert, then token
        row_token = order // k
        row_expert = flat_e[order]
        row_weight = topk_weights.ravel()[order]
        np.cumsum(np.bincount(row_expert // per_rank, minlength=num_ranks), out=rank_offsets[1:])
        extra = {"row_expert": row_expert, "row_weight": row_weight}
        combine_rows, combine_weight = _copy_plan(order, topk_idx, topk_weights)
    if out is None and workspace is not None:
        out = _workspace_tokens(workspace, x, row_token.shape[0])
    recv = _gather(x, row_token, out, nthreads)
    handle = DispatchHandle(
        mode=m,
        num_tokens=n,
        num_ranks=num_ranks,
        experts_per_rank=per_rank,
        row_token=row_token,
        rank_offsets=rank_offsets,
        combine_rows=combine_rows,
        combine_weight=combine_weight,
        **extra,
    )
    return recv, handle
