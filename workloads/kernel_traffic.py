"""MoE traffic read from the buffers the NumPy dispatch and combine kernels fill.

``podsim run`` takes an MoE layer's messages from one of two sources (``TRAFFIC_SOURCES``):

- ``kernels``: the dispatch kernel of the mode (podsim.workloads.dispatch: DeepEP normal, DeepEP
  low latency, Megatron's all-to-all) runs on real token tensors of every rank and the combine
  kernel (podsim.workloads.combine) on real expert outputs; every message is read from the
  buffers they fill (below) and then turned into stages and hops exactly as the counts are
  (podsim.workloads.traffic).
- ``counts``: the fast path: the same messages from the layout counts (podsim.workloads.layout),
  with no tensor moved.

``auto`` (the default) runs the kernels on every rank when their buffers fit ``kernel_memory``
bytes, else on ``kernel_sample_ranks`` source ranks spread evenly over the group (fewer if even
those do not fit), and checks every counted message of those ranks against the kernels'
buffers before it uses the counts. Any disagreement is an error, never a silent choice.

Reading the buffers, for source ranks S:

1. each token of S becomes a wire row of the dispatch dtype (FP8: ``hidden`` E4M3 codes and one
   float32 scale per 128 channels, as DeepEP sends; BF16: ``2 x hidden`` bytes) whose first
   8 bytes hold its global token id;
2. dispatch fills the receive buffers; each received row's source token is read back from those
   8 bytes, its destination is the rank whose region of the buffer holds it, its size is the
   buffer's row size (codes + scales). DeepEP low latency's 16 B per-message header is metadata
   outside these buffers and is added by the mode, as for the counts;
3. combine runs on an expert-output buffer of BF16 ones in receive order with unit gate weights,
   so every combined token must come back equal to the number of rows that carried it (checked);
   the combine messages are those rows sent back, each of the combine dtype's row size (BF16:
   the expert-output buffer's row; FP8: a row quantised by podsim.workloads.precision, since
   the combine kernel reduces BF16 only, as DeepEP's normal-mode combine).

From the rows: per (source, destination) deduplicated tokens and (token, expert) copies (from
``recv_topk_idx`` for deepep-normal) and per (source, node) tokens, i.e. the layout's
``pair_tokens``, ``pair_copies`` and ``node_tokens`` rows of S, compared entry by entry.

Memory: x (tokens x dispatch row), the receive buffer and the expert-output buffer (rows x
(dispatch row + BF16 row)), combine's output (tokens x BF16 row) and 64 B of handle per row;
:func:`kernel_bytes` estimates it from the layout before anything is allocated.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from podsim.workloads.combine import combine
from podsim.workloads.dispatch import DispatchMode, dispatch
from podsim.workloads.layout import EPLayout
from podsim.workloads.precision import FP8_BLOCK, WireTokens, bf16_bits_to_f32, quantize

__all__ = [
    "DEFAULT_KERNEL_MEMORY",
    "DEFAULT_SAMPLE_RANKS",
    "TRAFFIC_SOURCES",
    "KernelMemoryError",
    "KernelTraffic",
    "check_against_counts",
    "kernel_bytes",
    "kernel_traffic",
    "pick_ranks",
]

TRAFFIC_SOURCES = ("auto", "kernels", "counts")
DEFAULT_KERNEL_MEMORY = 1 << 30
"""[E] Buffer bytes the kernels may fill per layer in a run (1 GiB: a tenth of a 16 GiB
laptop; quickstart needs ~0.2 GB). A scenario parameter (workload.moe.kernel_memory)."""
DEFAULT_SAMPLE_RANKS = 4
"""[E] Source ranks checked per layer when the whole group does not fit the budget (a scenario
parameter, workload.moe.kernel_sample_ranks)."""
_HANDLE_BYTES_PER_ROW = 64
"""Dispatch handle arrays per received row (row token, expert or local ids, weights, plan)."""
_ONE_BF16 = np.uint16(0x3F80)
"""BF16 code of 1.0."""


class KernelMemoryError(ValueError):
    """The kernels' buffers do not fit ``kernel_memory`` (scenario key
    workload.moe.kernel_memory)."""


@dataclass(frozen=True, eq=False)
class KernelTraffic:
    """What the kernels put in their buffers for source ranks ``ranks``.

    ``layout`` holds the counts read from the buffers in the rows of ``ranks`` (all rows when
    every rank ran); ``dispatch_row`` / ``combine_row`` are the bytes of one buffer row.
    """

    ranks: np.ndarray
    layout: EPLayout
    dispatch_row: int
    combine_row: int


def _rows(lay: EPLayout, mode: DispatchMode, ranks: np.ndarray) -> int:
    mat = lay.pair_tokens if mode.dedup else lay.pair_copies
    return int(mat[ranks].sum())


def kernel_bytes(
    lay: EPLayout, mode: DispatchMode, ranks: np.ndarray, dispatch_row: int, hidden: int
) -> int:
    """Estimated bytes of the buffers the kernels fill for source ranks ``ranks``."""
    tokens = int(np.diff(lay.token_offsets)[ranks].sum())
    rows = _rows(lay, mode, ranks)
    return tokens * (dispatch_row + 2 * hidden) + rows * (
        dispatch_row + 2 * hidden + _HANDLE_BYTES_PER_ROW
    )


def pick_ranks(
    lay: EPLayout,
    mode: DispatchMode,
    source: str,
    memory: int,
    sample: int,
    dispatch_row: int,
    hidden: int,
) -> np.ndarray | None:
    """Source ranks the kernels run on (module docstring); None for ``counts``."""
    if source not in TRAFFIC_SOURCES:
        raise ValueError(f"traffic_source {source!r}: expected one of {', '.join(TRAFFIC_SOURCES)}")
    if source == "counts":
        return None
    r = lay.num_ranks
    every = np.arange(r)
    need = kernel_bytes(lay, mode, every, dispatch_row, hidden)
    if need <= memory:
        return every
    if source == "kernels":
        raise KernelMemoryError(
            f"traffic_source 'kernels' needs about {need / 2**30:.2f} GiB of kernel buffers for "
            f"all {r} ranks, more than kernel_memory = {memory} B; raise kernel_memory, or use "
            "'auto' (a sample of ranks checked against the counts) or 'counts'"
        )
    if sample <= 0:
        raise ValueError(f"kernel_sample_ranks must be >= 1; got {sample}")
    for m in range(min(sample, r), 0, -1):
        ranks = np.unique(np.linspace(0, r - 1, m).round().astype(np.int64))
        if kernel_bytes(lay, mode, ranks, dispatch_row, hidden) <= memory:
            return ranks
    one = kernel_bytes(lay, mode, ranks, dispatch_row, hidden)
    raise KernelMemoryError(
        f"kernel_memory = {memory} B cannot hold the kernel buffers of even one rank (about "
        f"{one} B); raise kernel_memory or use traffic_source 'counts'"
    )


def _src_of(token: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Source rank of each global token id."""
    return np.searchsorted(offsets, token, side="right") - 1


def _count(
    a: np.ndarray, b: np.ndarray, na: int, nb: int, weights: np.ndarray | None = None
) -> np.ndarray:
    """[na, nb] int64 counts of the pairs (a, b), weighted when given."""
    c = np.bincount(a * nb + b, weights=weights, minlength=na * nb)
    return c.astype(np.int64).reshape(na, nb)


def _tokens(ids: np.ndarray, dtype: str, hidden: int) -> WireTokens:
    """Wire rows of ``dtype`` holding zeros, except each row's first 8 bytes: its token id."""
    if dtype == "fp8":
        data = np.zeros((ids.size, hidden), dtype=np.uint8)
        scales = np.ones((ids.size, hidden // FP8_BLOCK), dtype=np.float32)
    else:
        data, scales = np.zeros((ids.size, hidden), dtype=np.uint16), None
    data.view(np.uint8)[:, :8] = ids.astype("<i8").view(np.uint8).reshape(-1, 8)
    return WireTokens(dtype, data, scales)


def _stamps(recv: WireTokens) -> np.ndarray:
    return np.ascontiguousarray(recv.data.view(np.uint8)[:, :8]).view("<i8").ravel()


def _row_bytes(t: WireTokens) -> int:
    return t.data[:1].nbytes + (0 if t.scales is None else t.scales[:1].nbytes)


def kernel_traffic(
    lay: EPLayout,
    physical_topk: np.ndarray,
    num_physical: int,
    mode: DispatchMode,
    ranks: np.ndarray,
    dispatch_dtype: str,
    combine_dtype: str,
    hidden: int,
) -> KernelTraffic:
    """Run dispatch and combine for the tokens of source ranks ``ranks`` and read the counts
    from their buffers (module docstring). Raises ValueError if combine's output disagrees."""
    r = lay.num_ranks
    off = lay.token_offsets
    ids = np.concatenate([np.arange(off[s], off[s + 1]) for s in ranks]).astype(np.int64)
    x = _tokens(ids, dispatch_dtype, hidden)
    topk = physical_topk[ids]
    recv, handle = dispatch(
        x, topk, np.ones(topk.shape, np.float32), num_physical, r, mode, threads=1
    )
    tok = _stamps(recv)  # the source token of every received row, read from the buffer
    src = _src_of(tok, off)
    dst = handle.row_rank()
    gpn = lay.gpus_per_node
    pairs = np.unique(tok * r + dst)  # a token counts once per destination rank
    pair_tokens = _count(_src_of(pairs // r, off), pairs % r, r, r)
    copies = (handle.recv_topk_idx >= 0).sum(axis=1) if mode.dedup else np.ones(src.shape)
    pair_copies = _count(src, dst, r, r, copies)
    node_tokens = None
    if gpn is not None:
        nodes = -(-r // gpn)
        at = np.unique(tok * nodes + dst // gpn)  # once per destination node (RDMA dedup)
        node_tokens = _count(_src_of(at // nodes, off), at % nodes, r, nodes)
    expert_out = np.full((handle.num_rows, hidden), _ONE_BF16, dtype=np.uint16)
    out = combine(expert_out, handle, threads=1)
    per_token = np.bincount(np.searchsorted(ids, tok), minlength=ids.size)
    got = bf16_bits_to_f32(out)
    if not (got == per_token[:, None].astype(np.float32)).all():
        bad = int(np.flatnonzero((got != per_token[:, None]).any(axis=1))[0])
        raise ValueError(
            f"the combine kernel returned token {int(ids[bad])} as {got[bad, 0]}, not the "
            f"{per_token[bad]} rows that carried it"
        )
    if combine_dtype == "bf16":
        combine_row = expert_out[:1].nbytes
    else:
        combine_row = _row_bytes(quantize(np.ones((1, hidden), np.float32), combine_dtype))
    kl = EPLayout(lay.layout, lay.token_offsets, pair_tokens, pair_copies, node_tokens)
    return KernelTraffic(np.asarray(ranks), kl, _row_bytes(recv if len(tok) else x), combine_row)


def check_against_counts(
    kt: KernelTraffic, lay: EPLayout, dispatch_row: int, combine_row: int
) -> None:
    """Raise ValueError naming the first (source, destination) whose kernel count or row
    size differs from the counts."""
    for name in ("pair_tokens", "pair_copies", "node_tokens"):
        k, c = getattr(kt.layout, name), getattr(lay, name)
        if c is None:
            continue
        k, c = k[kt.ranks], c[kt.ranks]
        if not np.array_equal(k, c):
            i, j = np.argwhere(k != c)[0]
            raise ValueError(
                f"the kernels' buffers disagree with the counts: {name}[src {kt.ranks[i]}, "
                f"{'node' if name == 'node_tokens' else 'dst'} {j}] = {k[i, j]} rows in the "
                f"buffers, {c[i, j]} counted"
            )
    for phase, k, c in (
        ("dispatch", kt.dispatch_row, dispatch_row),
        ("combine", kt.combine_row, combine_row),
    ):
        if k != c:
            raise ValueError(
                f"the kernels' {phase} buffer rows are {k} B; the counts use {c} B per token"
            )
