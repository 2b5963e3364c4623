"""MoE combine on NumPy: the reverse of dispatch, expert outputs back into token order.

Experts return BF16 rows (as DeepEP's combine and Megatron's unpermute take them). Combine sums,
for every token, the rows that came from it, in float32, and returns BF16 tokens:

- per-copy modes (``deepep-low-latency``, ``megatron-alltoall``): y[t] = sum_k w[t,k] * out[row(t,k)]
  (the receiver applies the gate weights, as DeepEP's low-latency combine and Megatron do);
- ``deepep-normal``: each rank already reduced its local experts into one weighted partial row per
  token (:func:`expert_forward` does it), so y[t] = sum over ranks of the partial rows (DeepEP's
  normal combine is an unweighted sum).

The reduction runs over blocks of tokens (a few hundred kB of temporaries, so they stay in
cache): gather the block's rows, widen BF16 to float32, weight, ``np.add.reduceat`` per token.
The loop is over blocks of tokens, never over single tokens.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from workloads.dispatch import DispatchHandle
from workloads.precision import WireTokens, dequantize, f32_to_bf16_bits

__all__ = ["combine", "expert_forward", "ExpertFn"]

ExpertFn = Callable[[np.ndarray, np.ndarray], np.ndarray]
"""An expert stack: (rows [n, hidden] float32, physical expert id [n]) -> outputs [n, hidden]."""

_BLOCK_BYTES = 1 << 20


def expert_forward(recv: WireTokens, handle: DispatchHandle, expert_fn: ExpertFn | None = None) -> np.ndarray:
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


def combine(expert_out: np.ndarray, handle: DispatchHandle, *, out: np.ndarray | None = None) -> np.ndarray:
    """Combined tokens [num_tokens, hidden] as BF16 codes (uint16); see the module docstring.

    ``expert_out`` is [rows, hidden] uint16 BF16 codes in the receive order of ``handle``.
    A token with no valid expert comes back as zeros.
    """
    expert_out = np.asarray(expert_out)
    if expert_out.dtype != np.uint16 or expert_out.ndim != 2 or expert_out.shape[0] != handle.num_rows:
        raise ValueError(
            f"expert_out must be BF16 codes (uint16) [rows={handle.num_rows}, hidden]; "
            f"got {expert_out.dtype} {expert_out.shape}"
        )
    n, hidden = handle.num_tokens, expert_out.shape[1]
    if out is None:
        out = np.empty((n, hidden), dtype=np.uint16)
    elif out.shape != (n, hidden) or out.dtype != np.uint16:
        raise ValueError(f"out must be uint16 [{n}, {hidden}]; got {out.dtype} {out.shape}")
    rows, start = handle.token_rows, handle.token_row_start
    weight = None if handle.mode.dedup else handle.row_weight
    per_token = max(1, handle.num_rows // max(n, 1))
    block = max(1, _BLOCK_BYTES // (6 * hidden * per_token))
    wide = np.empty((block * per_token * 2, hidden), dtype=np.uint32)
    acc = np.empty((block, hidden), dtype=np.float32)
    for s in range(0, n, block):  # blocks of tokens sized for the cache
        e = min(n, s + block)
        r0, r1 = start[s], start[e]
        blk_rows = rows[r0:r1]
        if wide.shape[0] < blk_rows.shape[0]:
            wide = np.empty((blk_rows.shape[0], hidden), dtype=np.uint32)
        w32 = wide[: blk_rows.shape[0]]
        np.left_shift(expert_out[blk_rows], 16, out=w32, dtype=np.uint32)
        f = w32.view(np.float32)
        if weight is not None:
            f *= weight[blk_rows][:, None]
        counts = np.diff(start[s : e + 1])
        a = acc[: e - s]
        if (counts > 0).all():
            np.add.reduceat(f, start[s:e] - r0, axis=0, out=a)
        else:
            a[:] = 0
            nz = counts > 0
            if nz.any():
                a[nz] = np.add.reduceat(f, start[s:e][nz] - r0, axis=0)
        bits = a.view(np.uint32)
        bits += np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))
        np.right_shift(bits, 16, out=out[s:e], casting="unsafe")
    return out
