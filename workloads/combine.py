"""MoE combine on NumPy: the reverse of dispatch, expert outputs back into token order.

Experts return BF16 rows (as DeepEP's combine and Megatron's unpermute take them). Combine sums,
for every token, the rows that came from it, in float32, and returns BF16 tokens:

- per-copy modes (``deepep-low-latency``, ``megatron-alltoall``):
  y[t] = sum_k w[t,k] * out[row(t,k)]
  (the receiver applies the gate weights, as DeepEP's low-latency combine and Megatron do);
- ``deepep-normal``: each rank already reduced its local experts into one weighted partial row per
  token (:func:`expert_forward` does it), so y[t] = sum over ranks of the partial rows (DeepEP's
  normal combine is an unweighted sum).

The reduction runs over cache blocks: each block is as many tokens as fit about 256 kB of
gathered rows (2 tokens at hidden 7168 and 8 rows per token, more for smaller ones). Per block:
one gather of the rows (the only pass that touches DRAM), an in-place widening of BF16 to
float32 and a weighted sum per token done by one batched matrix product; per group of blocks
one rounding back to BF16 written straight into the output. Nothing in the loop body works on a
single token, and the scratch lives in a :class:`workloads.workspace.Workspace`.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from workloads.dispatch import DispatchHandle
from workloads.precision import WireTokens, dequantize, f32_to_bf16_bits
from workloads.workspace import Workspace

__all__ = ["ExpertFn", "combine", "expert_forward"]

ExpertFn = Callable[[np.ndarray, np.ndarray], np.ndarray]
"""An expert stack: (rows [n, hidden] float32, physical expert id [n]) -> outputs [n, hidden]."""

_BLOCK_BYTES = 1 << 18
"""Widened rows per gather block (both halves live in L2 next to each other: 2 x 256 kB)."""
_GROUP_BYTES = 1 << 18
"""float32 sums per rounding pass (plus as much scratch); tuned on a 2 MB-L2 Xeon."""


def expert_forward(
    recv: WireTokens, handle: DispatchHandle, expert_fn: ExpertFn | None = None
) -> np.ndarray:
    """Run the experts on received rows and return what combine takes (BF16 codes [rows, H]).

    ``expert_fn`` None means identity experts. For ``deepep-normal`` the output row is the
    rank-local weighted sum over the token's experts on that rank.
    """
    x = dequantize(recv)
    if not handle.mode.dedup:
        y = x if expert_fn is None else expert_fn(x, handle.row_expert)
        return f32_to_bf16_bits(y)
    idx, w = handle.recv_topk_idx, handle.recv_topk_weights
    if expert_fn is None:
        y = x * w.sum(axis=1, dtype=np.float32)[:, None]
    else:
        here = idx >= 0
        pair_row, pair_k = np.nonzero(here)  # row-major: pairs grouped by row, each row >= 1
        experts = idx[pair_row, pair_k] + handle.row_rank()[pair_row] * handle.experts_per_rank
        out = expert_fn(x[pair_row], experts) * w[pair_row, pair_k][:, None]
        y = np.add.reduceat(out, np.flatnonzero(np.diff(pair_row, prepend=-1)), axis=0)
    return f32_to_bf16_bits(y)


def combine(
    expert_out: np.ndarray,
    handle: DispatchHandle,
    *,
    out: np.ndarray | None = None,
    workspace: Workspace | None = None,
) -> np.ndarray:
    """Combined tokens [num_tokens, hidden] as BF16 codes (uint16); see the module docstring.

    ``expert_out`` is [rows, hidden] uint16 BF16 codes (finite values) in the receive order of
    ``handle``. A token with no valid expert comes back as zeros. ``out`` (a contiguous uint16
    [num_tokens, hidden]) and ``workspace`` (scratch, workloads.workspace) make a steady-state
    call allocate nothing large.
    """
    expert_out = np.asarray(expert_out)
    if (
        expert_out.dtype != np.uint16
        or expert_out.ndim != 2
        or expert_out.shape[0] != handle.num_rows
    ):
        raise ValueError(
            f"expert_out must be BF16 codes (uint16) [rows={handle.num_rows}, hidden]; "
            f"got {expert_out.dtype} {expert_out.shape}"
        )
    n, hidden = handle.num_tokens, expert_out.shape[1]
    if hidden % 2:
        raise ValueError(f"combine needs an even hidden size; got {hidden}")
    if out is None:
        out = np.empty((n, hidden), dtype=np.uint16)
    elif out.shape != (n, hidden) or out.dtype != np.uint16 or not out.flags.c_contiguous:
        raise ValueError(
            f"out must be a contiguous uint16 [{n}, {hidden}]; got {out.dtype} {out.shape}"
        )
    if handle.num_rows == 0:
        out[:] = 0
        return out
    ws = Workspace() if workspace is None else workspace
    _reduce_bf16(expert_out, handle.combine_rows, handle.combine_weight, out, ws)
    return out


def _reduce_bf16(
    src: np.ndarray, plan: np.ndarray, weight: np.ndarray, out: np.ndarray, ws: Workspace
) -> None:
    """out[t] = bf16(sum_j weight[t, j] * src[plan[t, j]]), blocked for the cache.

    BF16 is the upper half of a float32, so a uint32 view of two neighbouring BF16 values holds
    the odd one exactly in its upper half (``& 0xFFFF0000``) and the even one after ``<< 16``:
    both halves widen with one same-type operation each, in place in the gathered block, and
    are reduced separately by a batched (1 x width) @ (width x hidden/2) product (BLAS gemv),
    which applies the weights in the same pass. The float32 sums of a group of tokens are
    then rounded to nearest even at bit 16 with both halves in one array (4 passes) and
    interleaved back into BF16 pairs (3 half-width passes) straight into ``out``.
    """
    n, width = plan.shape
    h2 = src.shape[1] // 2
    row_bytes = 4 * h2
    block = max(1, _BLOCK_BYTES // (width * row_bytes))
    group = block * max(1, _GROUP_BYTES // (2 * row_bytes * block))
    words = ws.array("combine.words", (block * width, h2), np.uint32)
    low = ws.array("combine.low", (block * width, h2), np.uint32)
    acc = ws.array("combine.acc", (2, group, h2), np.float32)
    tmp = ws.array("combine.tmp", (2, group, h2), np.uint32)
    bits = acc.view(np.uint32)
    flat = plan.reshape(-1)
    src32, out32 = src.view(np.uint32), out.view(np.uint32)
    s16, top, one, half = np.uint32(16), np.uint32(0xFFFF0000), np.uint32(1), np.uint32(0x7FFF)
    for g0 in range(0, n, group):  # groups of tokens, then blocks of tokens: never one token
        g1 = min(n, g0 + group)
        for s in range(g0, g1, block):
            e = min(g1, s + block)
            m = (e - s) * width
            hi, lo = words[:m], low[:m]
            # mode="clip" skips NumPy's defensive copy of `out`; plan rows are in range.
            np.take(src32, flat[s * width : e * width], axis=0, out=hi, mode="clip")
            np.left_shift(hi, s16, out=lo)
            np.bitwise_and(hi, top, out=hi)
            w = weight[s:e, None, :]
            rows = (e - s, width, h2)
            np.matmul(w, lo.view(np.float32).reshape(rows), out=acc[0, s - g0 : e - g0, None])
            np.matmul(w, hi.view(np.float32).reshape(rows), out=acc[1, s - g0 : e - g0, None])
        b, t = bits[:, : g1 - g0], tmp[:, : g1 - g0]
        np.right_shift(b, s16, out=t)  # round to nearest even: + 0x7FFF + lsb of the result
        np.bitwise_and(t, one, out=t)
        np.add(t, half, out=t)
        np.add(b, t, out=b)
        np.right_shift(b[0], s16, out=t[0])
        np.bitwise_and(b[1], top, out=t[1])
        np.bitwise_or(t[0], t[1], out=out32[g0:g1])
