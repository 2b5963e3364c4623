"""Dispatch layout, exactly as DeepEP's ``Buffer.get_dispatch_layout`` defines it.

For one rank's batch of tokens with routing ``topk_idx`` [N, K] (physical expert ids, -1 for
a masked slot) over ``num_experts`` experts on ``num_ranks`` ranks (expert e on rank
e // (num_experts / num_ranks)):

- ``num_tokens_per_expert[e]``: number of (token, k) with topk_idx == e;
- ``is_token_in_rank[t, r]``: token t has at least one expert on rank r (a token is sent to a
  rank once however many of its experts live there);
- ``num_tokens_per_rank[r]``: sum over t of is_token_in_rank[t, r];
- ``num_tokens_per_rdma_rank[n]``: tokens with at least one expert on node n (rank // GPUs per
  node), the deduplicated RDMA count of DeepEP's internode kernels. DeepEP returns None for a
  single node; here it is computed whenever ``gpus_per_node`` is given.

(docs/physics.md, MoE section.) :func:`ep_layout` applies the same definitions to a whole EP group
at once, keeping the source rank of every token so that per (source, destination) counts fall out.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = [
    "DispatchLayout",
    "EPLayout",
    "check_topk",
    "ep_layout",
    "get_dispatch_layout",
    "token_rank_matrix",
]


@dataclass(frozen=True, eq=False)
class DispatchLayout:
    """The four outputs of DeepEP's get_dispatch_layout (plus the inputs' sizes)."""

    num_tokens_per_rank: np.ndarray
    num_tokens_per_rdma_rank: np.ndarray | None
    num_tokens_per_expert: np.ndarray
    is_token_in_rank: np.ndarray
    gpus_per_node: int | None

    @property
    def num_ranks(self) -> int:
        return int(self.is_token_in_rank.shape[1])


def check_topk(topk_idx: np.ndarray, num_experts: int, num_ranks: int) -> np.ndarray:
    """``topk_idx`` as int64 after checking shape, expert range and experts per rank."""
    topk_idx = np.asarray(topk_idx)
    if topk_idx.ndim != 2 or not np.issubdtype(topk_idx.dtype, np.integer):
        raise ValueError(
            f"topk_idx must be an integer [tokens, k] array; got {topk_idx.dtype} {topk_idx.shape}"
        )
    if num_ranks <= 0 or num_experts % num_ranks:
        raise ValueError(
            f"num_experts={num_experts} must be a positive multiple of num_ranks={num_ranks}"
        )
    if topk_idx.size and (topk_idx.min() < -1 or topk_idx.max() >= num_experts):
        bad = topk_idx[(topk_idx < -1) | (topk_idx >= num_experts)][0]
        raise ValueError(
            f"topk_idx holds expert id {bad}; expected -1 (masked) or 0..{num_experts - 1}"
        )
    return topk_idx.astype(np.int64, copy=False)


def _nodes(num_ranks: int, gpus_per_node: int | None) -> int | None:
    if gpus_per_node is None:
        return None
    if gpus_per_node <= 0:
        raise ValueError(f"gpus_per_node must be > 0; got {gpus_per_node}")
    return -(-num_ranks // gpus_per_node)


def token_rank_matrix(topk_idx: np.ndarray, experts_per_rank: int, num_ranks: int) -> np.ndarray:
    """DeepEP's is_token_in_rank [tokens, ranks] for checked ``topk_idx`` (-1 = masked)."""
    n = topk_idx.shape[0]
    valid = topk_idx >= 0
    rows = np.broadcast_to(np.arange(n)[:, None], topk_idx.shape)[valid]
    in_rank = np.zeros((n, num_ranks), dtype=bool)
    in_rank[rows, topk_idx[valid] // experts_per_rank] = True
    return in_rank


def get_dispatch_layout(
    topk_idx: np.ndarray, num_experts: int, num_ranks: int, gpus_per_node: int | None = None
) -> DispatchLayout:
    """DeepEP's get_dispatch_layout on one batch of tokens (see the module docstring)."""
    topk_idx = check_topk(topk_idx, num_experts, num_ranks)
    nodes = _nodes(num_ranks, gpus_per_node)
    in_rank = token_rank_matrix(topk_idx, num_experts // num_ranks, num_ranks)
    per_expert = np.bincount(topk_idx[topk_idx >= 0], minlength=num_experts).astype(np.int64)
    per_rdma = None
    if nodes is not None:
        padded = np.zeros((in_rank.shape[0], nodes * gpus_per_node), dtype=bool)
        padded[:, :num_ranks] = in_rank
        per_rdma = padded.reshape(-1, nodes, gpus_per_node).any(axis=2).sum(axis=0)
    return DispatchLayout(
        num_tokens_per_rank=in_rank.sum(axis=0).astype(np.int64),
        num_tokens_per_rdma_rank=None if per_rdma is None else per_rdma.astype(np.int64),
        num_tokens_per_expert=per_expert,
        is_token_in_rank=in_rank,
        gpus_per_node=gpus_per_node,
    )


@dataclass(frozen=True, eq=False)
class EPLayout:
    """Dispatch layout of a whole EP group: every rank's tokens stacked in rank order.

    ``token_offsets[r]:token_offsets[r+1]`` are rank r's tokens. Matrices are [src, dst]:
    ``pair_tokens`` deduplicated token count per (source rank, destination rank),
    ``pair_copies`` (token, expert) count per pair (no dedup), ``node_tokens`` [src, node]
    deduplicated token count per (source rank, destination node).
    """

    layout: DispatchLayout
    token_offsets: np.ndarray
    src_rank: np.ndarray
    pair_tokens: np.ndarray
    pair_copies: np.ndarray
    node_tokens: np.ndarray | None

    @property
    def num_ranks(self) -> int:
        return self.layout.num_ranks

    @property
    def gpus_per_node(self) -> int | None:
        return self.layout.gpus_per_node

    def stats(self) -> dict[str, float]:
        """Average target ranks and nodes per token and per-rank load max/mean."""
        in_rank = self.layout.is_token_in_rank
        n = max(in_rank.shape[0], 1)
        out = {"avg_ranks_per_token": float(in_rank.sum()) / n}
        if self.node_tokens is not None:
            out["avg_nodes_per_token"] = float(self.node_tokens.sum()) / n
        recv = self.pair_copies.sum(axis=0)
        out["rank_load_max_mean"] = float(recv.max() / recv.mean()) if recv.sum() else 1.0
        return out


def ep_layout(
    topk_idx: np.ndarray,
    num_experts: int,
    num_ranks: int,
    tokens_per_rank: int | np.ndarray,
    gpus_per_node: int | None = None,
) -> EPLayout:
    """Layout of all ranks' tokens at once (rank r's tokens are rows of block r).

    ``tokens_per_rank`` is one int (same for every rank) or one count per rank.
    """
    topk_idx = check_topk(topk_idx, num_experts, num_ranks)
    counts = np.broadcast_to(np.asarray(tokens_per_rank, dtype=np.int64), (num_ranks,))
    if (counts < 0).any() or counts.sum() != topk_idx.shape[0]:
        raise ValueError(
            f"tokens_per_rank must be >= 0 and sum to the {topk_idx.shape[0]} routed tokens; "
            f"got a total of {int(counts.sum())}"
        )
    layout = get_dispatch_layout(topk_idx, num_experts, num_ranks, gpus_per_node)
    offsets = np.concatenate([[0], np.cumsum(counts)])
    src = np.repeat(np.arange(num_ranks), counts)
    tok, dst = np.nonzero(layout.is_token_in_rank)
    pair_tokens = np.bincount(src[tok] * num_ranks + dst, minlength=num_ranks * num_ranks)
    valid = topk_idx >= 0
    copies_src = np.broadcast_to(src[:, None], topk_idx.shape)[valid]
    copies_dst = topk_idx[valid] // (num_experts // num_ranks)
    pair_copies = np.bincount(copies_src * num_ranks + copies_dst, minlength=num_ranks**2)
    node_tokens = None
    nodes = _nodes(num_ranks, gpus_per_node)
    if nodes is not None:
        node_of = np.arange(num_ranks) // gpus_per_node
        in_node = np.zeros((topk_idx.shape[0], nodes), dtype=bool)
        in_node[tok, node_of[dst]] = True
        t2, n2 = np.nonzero(in_node)
        node_tokens = np.bincount(src[t2] * nodes + n2, minlength=num_ranks * nodes)
        node_tokens = node_tokens.reshape(num_ranks, nodes).astype(np.int64)
    return EPLayout(
        layout=layout,
        token_offsets=offsets,
        src_rank=src,
        pair_tokens=pair_tokens.reshape(num_ranks, num_ranks).astype(np.int64),
        pair_copies=pair_copies.reshape(num_ranks, num_ranks).astype(np.int64),
        node_tokens=node_tokens,
    )
