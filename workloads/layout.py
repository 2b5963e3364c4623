"""Dispatch layout, exactly as DeepEP's ``Buffer.get_dispatch_layout`` defines it, stored sparsely.

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

(docs/physics.md, MoE section.) Storage: DeepEP's is_token_in_rank is a dense [tokens, ranks]
boolean matrix, which at 10,240 ranks x 4096 tokens per rank would be 430 GB. Here each token
keeps its distinct destination ranks instead, ``token_ranks`` [N, K] (ascending, -1 padding),
the same size as the routing; the dense matrix is built only on request
(:meth:`DispatchLayout.is_token_in_rank`, refused above :data:`DENSE_LIMIT` cells) and one rank's
column on demand (:meth:`DispatchLayout.tokens_in_rank`). Every count is an ``np.bincount`` of
int64 keys (src x ranks + dst) over blocks of whole source ranks, so no temporary grows with
tokens x ranks either.

:func:`ep_layout` applies the same definitions to a whole EP group at once, keeping the source
rank of every token so that per (source, destination) counts fall out; :func:`ep_layout_blocks`
does the same from blocks of source ranks that the caller may draw one at a time (the routing
of a 10,240-rank layer need not be held whole).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

__all__ = [
    "DENSE_LIMIT",
    "DispatchLayout",
    "EPLayout",
    "block_ranks",
    "check_topk",
    "ep_layout",
    "ep_layout_blocks",
    "get_dispatch_layout",
    "token_ranks",
]

DENSE_LIMIT = 1 << 31
"""Most cells of a dense is_token_in_rank that :meth:`DispatchLayout.is_token_in_rank` builds
(2 GiB of bool); larger layouts answer per rank (:meth:`DispatchLayout.tokens_in_rank`)."""

_BLOCK_CELLS = 1 << 20
"""Most cells of one block's (source ranks x destinations) count vector and of its
(token, slot) arrays (8 MiB of int64 each)."""


def _index_dtype(bound: int) -> np.dtype:
    """Narrowest signed integer type holding -1 .. bound - 1 (ids stored per token slot)."""
    for t in (np.int16, np.int32):
        if bound <= np.iinfo(t).max:
            return np.dtype(t)
    return np.dtype(np.int64)


def _sorted_ranks(
    topk_idx: np.ndarray, experts_per_rank: int, num_ranks: int
) -> tuple[np.ndarray, np.ndarray]:
    """Each token's destination ranks sorted ascending (masked slots: ``num_ranks``, last) and
    the mask of the slots that repeat the slot before them (the same rank again)."""
    dt = _index_dtype(num_ranks)
    ranks = np.where(topk_idx >= 0, topk_idx // experts_per_rank, num_ranks).astype(dt)
    ranks.sort(axis=1)
    dup = np.zeros(ranks.shape, dtype=bool)
    np.equal(ranks[:, 1:], ranks[:, :-1], out=dup[:, 1:])
    dup |= ranks == num_ranks
    return ranks, dup


def token_ranks(topk_idx: np.ndarray, experts_per_rank: int, num_ranks: int) -> np.ndarray:
    """Each token's distinct destination ranks [N, K], ascending, -1 padding at the end.

    The sparse form of DeepEP's is_token_in_rank: rank r appears in row t iff
    is_token_in_rank[t, r]. ``topk_idx`` is checked (-1 = masked).
    """
    ranks, dup = _sorted_ranks(topk_idx, experts_per_rank, num_ranks)
    ranks[dup] = num_ranks
    ranks.sort(axis=1)  # repeats to the end
    ranks[ranks == num_ranks] = -1
    return ranks


def _distinct_groups(ranks: np.ndarray, dup: np.ndarray, group_size: int) -> np.ndarray:
    """Mask of the slots of ``_sorted_ranks`` output that start a new group (rank //
    group_size) in their row: rows are ascending, so a group's slots are neighbours."""
    groups = ranks // group_size
    new = ~dup
    new[:, 1:] &= groups[:, 1:] != groups[:, :-1]
    return new


@dataclass(frozen=True, eq=False)
class DispatchLayout:
    """The four outputs of DeepEP's get_dispatch_layout (plus the inputs' sizes).

    ``token_ranks`` (sparse is_token_in_rank, module docstring) may be None for a layout built
    block by block (:func:`ep_layout_blocks`), which keeps only the counts.
    """

    num_tokens_per_rank: np.ndarray
    num_tokens_per_rdma_rank: np.ndarray | None
    num_tokens_per_expert: np.ndarray
    token_ranks: np.ndarray | None
    num_ranks: int
    gpus_per_node: int | None

    def _ranks(self) -> np.ndarray:
        if self.token_ranks is None:
            raise ValueError(
                "this layout keeps only counts (built block by block); rebuild it with "
                "ep_layout to read which token goes to which rank"
            )
        return self.token_ranks

    @property
    def is_token_in_rank(self) -> np.ndarray:
        """DeepEP's dense [tokens, ranks] bool matrix, built on request (<= DENSE_LIMIT cells)."""
        ranks = self._ranks()
        n = ranks.shape[0]
        if n * self.num_ranks > DENSE_LIMIT:
            raise ValueError(
                f"is_token_in_rank would be {n} x {self.num_ranks} cells (> {DENSE_LIMIT}); "
                "use tokens_in_rank(rank) instead"
            )
        in_rank = np.zeros((n, self.num_ranks), dtype=bool)
        valid = ranks >= 0
        rows = np.broadcast_to(np.arange(n)[:, None], ranks.shape)[valid]
        in_rank[rows, ranks[valid]] = True
        return in_rank

    def tokens_in_rank(self, rank: int) -> np.ndarray:
        """Ascending ids of the tokens with an expert on ``rank`` (one column of the matrix)."""
        if not 0 <= rank < self.num_ranks:
            raise ValueError(f"rank {rank} out of range 0..{self.num_ranks - 1}")
        return np.flatnonzero((self._ranks() == rank).any(axis=1))


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


def get_dispatch_layout(
    topk_idx: np.ndarray, num_experts: int, num_ranks: int, gpus_per_node: int | None = None
) -> DispatchLayout:
    """DeepEP's get_dispatch_layout on one batch of tokens (see the module docstring)."""
    topk_idx = check_topk(topk_idx, num_experts, num_ranks)
    nodes = _nodes(num_ranks, gpus_per_node)
    ranks, dup = _sorted_ranks(topk_idx, num_experts // num_ranks, num_ranks)
    per_rdma = None
    if nodes is not None:
        first = _distinct_groups(ranks, dup, gpus_per_node)
        per_rdma = np.bincount(ranks[first] // gpus_per_node, minlength=nodes).astype(np.int64)
    return DispatchLayout(
        num_tokens_per_rank=np.bincount(ranks[~dup], minlength=num_ranks).astype(np.int64),
        num_tokens_per_rdma_rank=per_rdma,
        num_tokens_per_expert=np.bincount(topk_idx[topk_idx >= 0], minlength=num_experts).astype(
            np.int64
        ),
        token_ranks=token_ranks(topk_idx, num_experts // num_ranks, num_ranks),
        num_ranks=num_ranks,
        gpus_per_node=gpus_per_node,
    )


@dataclass(frozen=True, eq=False)
class EPLayout:
    """Dispatch layout of a whole EP group: every rank's tokens stacked in rank order.

    ``token_offsets[r]:token_offsets[r+1]`` are rank r's tokens. Matrices are [src, dst]:
    ``pair_tokens`` deduplicated token count per (source rank, destination rank),
    ``pair_copies`` (token, expert) count per pair (no dedup), ``node_tokens`` [src, node]
    deduplicated token count per (source rank, destination node). They are ranks x ranks, the
    size of the all-to-all itself (every pair can carry a message), never tokens x ranks;
    int32 when a rank's tokens x experts fits (always, for real batches), else int64.
    """

    layout: DispatchLayout
    token_offsets: np.ndarray
    pair_tokens: np.ndarray
    pair_copies: np.ndarray
    node_tokens: np.ndarray | None

    @property
    def num_ranks(self) -> int:
        return self.layout.num_ranks

    @property
    def gpus_per_node(self) -> int | None:
        return self.layout.gpus_per_node

    @property
    def src_rank(self) -> np.ndarray:
        """Source rank of every token."""
        return np.repeat(np.arange(self.num_ranks), np.diff(self.token_offsets))

    def stats(self) -> dict[str, float]:
        """Average target ranks and nodes per token and per-rank load max/mean."""
        n = max(int(self.token_offsets[-1]), 1)
        out = {"avg_ranks_per_token": float(self.pair_tokens.sum()) / n}
        if self.node_tokens is not None:
            out["avg_nodes_per_token"] = float(self.node_tokens.sum()) / n
        recv = self.pair_copies.sum(axis=0)
        out["rank_load_max_mean"] = float(recv.max() / recv.mean()) if recv.sum() else 1.0
        return out


def _rank_counts(tokens_per_rank: int | np.ndarray, num_ranks: int, total: int) -> np.ndarray:
    counts = np.broadcast_to(np.asarray(tokens_per_rank, dtype=np.int64), (num_ranks,))
    if (counts < 0).any() or counts.sum() != total:
        raise ValueError(
            f"tokens_per_rank must be >= 0 and sum to the {total} routed tokens; "
            f"got a total of {int(counts.sum())}"
        )
    return counts


def _step(num_ranks: int, tokens: np.ndarray, k: int) -> int:
    """Source ranks per block: its count vector and its (token, slot) temporaries both stay
    below _BLOCK_CELLS, small enough for the allocator to reuse instead of mapping fresh pages
    (glibc maps blocks above 32 MiB anew on every call: that page-fault time was a third of the
    CPU time of a 10,240-rank layout)."""
    per_rank = max(1, int(tokens.max(initial=1)) * max(k, 1))
    return max(1, min(_BLOCK_CELLS // num_ranks, _BLOCK_CELLS // per_rank))


def ep_layout(
    topk_idx: np.ndarray,
    num_experts: int,
    num_ranks: int,
    tokens_per_rank: int | np.ndarray,
    gpus_per_node: int | None = None,
) -> EPLayout:
    """Layout of all ranks' tokens at once (rank r's tokens are rows of block r).

    ``tokens_per_rank`` is one int (same for every rank) or one count per rank. The layout keeps
    each token's destination ranks (``layout.token_ranks``).
    """
    topk_idx = check_topk(topk_idx, num_experts, num_ranks)
    counts = _rank_counts(tokens_per_rank, num_ranks, topk_idx.shape[0])
    offsets = np.concatenate([[0], np.cumsum(counts)])
    step = _step(num_ranks, counts, topk_idx.shape[1])
    blocks = (
        (r0, min(num_ranks, r0 + step), topk_idx[offsets[r0] : offsets[min(num_ranks, r0 + step)]])
        for r0 in range(0, num_ranks, step)
    )
    kept = token_ranks(topk_idx, num_experts // num_ranks, num_ranks)
    return _layout(blocks, num_experts, num_ranks, counts, gpus_per_node, kept)


def ep_layout_blocks(
    blocks: Iterable[tuple[int, int, np.ndarray]],
    num_experts: int,
    num_ranks: int,
    tokens_per_rank: int | np.ndarray,
    gpus_per_node: int | None = None,
) -> EPLayout:
    """The layout from blocks ``(r0, r1, topk_idx of the tokens of source ranks r0..r1-1)``.

    Blocks cover ranks 0..num_ranks-1 in order; they may be drawn lazily, so the routing of the
    whole group need not exist at once (:func:`block_ranks` gives block bounds of a size this
    module handles well). The result keeps counts only (``layout.token_ranks`` is None); it
    equals :func:`ep_layout` of the stacked blocks otherwise.
    """
    if num_ranks <= 0 or num_experts % num_ranks:
        raise ValueError(
            f"num_experts={num_experts} must be a positive multiple of num_ranks={num_ranks}"
        )
    counts = np.broadcast_to(np.asarray(tokens_per_rank, dtype=np.int64), (num_ranks,))
    if (counts < 0).any():
        raise ValueError(f"tokens_per_rank must be >= 0; got {int(counts.min())}")
    checked = ((r0, r1, check_topk(b, num_experts, num_ranks)) for r0, r1, b in blocks)
    return _layout(checked, num_experts, num_ranks, counts, gpus_per_node, None)


def block_ranks(num_ranks: int, tokens_per_rank: int, top_k: int) -> list[tuple[int, int]]:
    """Bounds (r0, r1) of the blocks of source ranks that :func:`ep_layout` itself uses."""
    step = _step(num_ranks, np.asarray([tokens_per_rank]), top_k)
    return [(r0, min(num_ranks, r0 + step)) for r0 in range(0, num_ranks, step)]


def _layout(
    blocks: Iterable[tuple[int, int, np.ndarray]],
    num_experts: int,
    num_ranks: int,
    counts: np.ndarray,
    gpus_per_node: int | None,
    ranks_kept: np.ndarray | None,
) -> EPLayout:
    """Accumulate the counts of checked blocks (r0, r1, topk_idx)."""
    offsets = np.concatenate([[0], np.cumsum(counts)])
    per_rank = num_experts // num_ranks
    nodes = _nodes(num_ranks, gpus_per_node)
    # a pair count is at most a rank's tokens x k: int32 halves the [R, R] matrices (840 MB at
    # 10,240 ranks) whenever that fits, which it does for any real batch
    dt = np.int32 if int(counts.max(initial=0)) * num_experts < 2**31 else np.int64
    pair_tokens = np.zeros((num_ranks, num_ranks), dtype=dt)
    pair_copies = np.zeros((num_ranks, num_ranks), dtype=dt)
    node_tokens = None if nodes is None else np.zeros((num_ranks, nodes), dtype=dt)
    per_expert = np.zeros(num_experts, dtype=np.int64)
    per_rdma = None if nodes is None else np.zeros(nodes, dtype=np.int64)
    nxt = 0
    for r0, r1, block in blocks:  # one pass per block of whole source ranks
        if r0 != nxt or not r0 < r1 <= num_ranks or offsets[r1] - offsets[r0] != len(block):
            raise ValueError(
                f"layout block of ranks {r0}..{r1 - 1} with {len(block)} tokens: blocks must "
                f"follow each other from rank {nxt} and hold those ranks' tokens"
            )
        nxt = r1
        ranks, dup = _sorted_ranks(block, per_rank, num_ranks)
        # key = source rank in the block x width + column: one bincount per count matrix
        src = np.repeat(np.arange(r1 - r0, dtype=np.int64), counts[r0:r1])[:, None]
        cells = (r1 - r0) * num_ranks
        key = np.broadcast_to(src * num_ranks, ranks.shape) + ranks
        pair_tokens[r0:r1] = np.bincount(key[~dup], minlength=cells).reshape(-1, num_ranks)
        valid = ranks < num_ranks
        pair_copies[r0:r1] = np.bincount(key[valid], minlength=cells).reshape(-1, num_ranks)
        per_expert += np.bincount(block[block >= 0], minlength=num_experts)
        if nodes is not None:
            first = _distinct_groups(ranks, dup, gpus_per_node)
            node = ranks[first] // gpus_per_node
            key = np.broadcast_to(src * nodes, ranks.shape)[first] + node
            node_tokens[r0:r1] = np.bincount(key, minlength=(r1 - r0) * nodes).reshape(-1, nodes)
            per_rdma += np.bincount(node, minlength=nodes)
    if nxt != num_ranks:
        raise ValueError(f"layout blocks cover ranks 0..{nxt - 1}; expected 0..{num_ranks - 1}")
    layout = DispatchLayout(
        num_tokens_per_rank=pair_tokens.sum(axis=0, dtype=np.int64),
        num_tokens_per_rdma_rank=per_rdma,
        num_tokens_per_expert=per_expert,
        token_ranks=ranks_kept,
        num_ranks=num_ranks,
        gpus_per_node=gpus_per_node,
    )
    return EPLayout(layout, offsets, pair_tokens, pair_copies, node_tokens)
