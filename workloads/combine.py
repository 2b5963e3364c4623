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
single token, and the scratch lives in a :class:`podsim.workloads.workspace.Workspace`.

Threads (``threads``, podsim.workloads.parallel, default os.cpu_count() capped): tasks of whole
groups go to the threads, each with its own scratch and its own output rows, in 1 MB blocks;
every token's gemv and rounding are the very calls of a serial run, so the output is
bit-identical for any thread count (tests/workloads/test_wl_parallel.py).

Cost (benchmarks/bench_workloads.py, 4096 tokens x 7168, top-8, the project's 2-core Xeon VM,
2 MB L2 per core): one thread 100-105 ms, 19-21 % of np.copyto's rate for the same bytes. About
half is the gather: random 14 kB rows come from DRAM at ~9 GB/s through ``np.take`` (a streaming
read reaches ~18 GB/s, np.copyto 12.5 GB/s copied), so the gather alone is 40-49 % of the copy;
the rest is the widening (~20 %), the gemv (~18 %, with ~3 us of NumPy overhead per call) and
the rounding and output write (~20 %). NumPy makes every step a full pass, and a pass over
L2-resident data runs at only about 3-4x the DRAM copy rate. Two threads on an idle second core
take 75-83 ms (1.25-1.35x; np.copyto gains 1.9x, so like with like: ~14 %): with
256 kB blocks each NumPy call lasts ~6 us and the GIL hand-offs between the threads cancel the
gain (2 threads: 104 ms), 1 MB blocks cost ~25 % more CPU from L2 spills. When another process
holds the second core, two threads are slower than one (130-210 ms measured).

Measured and rejected (per token, in cache unless said): ``np.add.reduceat`` over sorted rows
(~20x slower than the batched gemv), ``einsum`` (1.7x), multiply + ``sum`` (3x), widening by a
strided uint16 copy into a zeroed float32 buffer (2.5x the shift + mask), both widened halves side
by side in one row for a single full-width gemv (1.4x overall: one more buffer in L2), widening
by a casting ``np.left_shift(uint16 -> uint32)`` (2x the shift + mask, and a full-width output),
finishing with ``np.right_shift`` cast into uint16 output (1.1x the three half-width passes),
ml_dtypes' bfloat16 casts (scalar C loops: 0.66 ns per value widened, 1.27 ns rounded, against
~0.09 ns for the shift + mask and ~0.45 ns for the whole integer rounding; 3-7x slower),
single-threaded blocks of 128 kB-2 MB (256-512 kB best; 1 MB +25 %, 2 MB +60 %), gathering in
1-7 kB pieces of rows instead of whole rows (same ~9 GB/s). Not pursued: scipy.sparse CSR @
dense needs float32 rows, i.e. widening all 470 MB of expert output first, or one sparse
product per block (Python overhead estimated, not measured).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from podsim.workloads.dispatch import DispatchHandle
from podsim.workloads.parallel import resolve_threads, run_chunks
from podsim.workloads.precision import WireTokens, dequantize, f32_to_bf16_bits
from podsim.workloads.workspace import Workspace

__all__ = ["ExpertFn", "combine", "expert_forward"]

ExpertFn = Callable[[np.ndarray, np.ndarray], np.ndarray]
"""An expert stack: (rows [n, hidden] float32, physical expert id [n]) -> outputs [n, hidden]."""

_BLOCK_BYTES = 1 << 18
"""Gathered rows per block (256 kB; its two widened halves, 512 kB, stay in L2 with the sums)."""
_GROUP_BYTES = 1 << 18
"""float32 sums per rounding pass (plus as much scratch); tuned on a 2 MB-L2 Xeon."""
_THREADED_BYTES = 1 << 20
"""Block and group bytes when threaded (1 MB: 9 tokens of 8 rows at 7168): each NumPy call runs
long enough (~100 us) that the GIL hand-offs between threads stop dominating; single-threaded
this size costs ~25 % more than 256 kB (L2 spills), threaded it is the fastest measured."""
_CHUNKS_PER_WORKER = 8
"""Tasks per thread when combine runs threaded: small enough tails, few hand-overs."""


_FORWARD_ROWS = 2048
"""Received rows per expert_forward chunk: bounds its float32 temporaries (~60 MB at 7168)."""


def expert_forward(
    recv: WireTokens, handle: DispatchHandle, expert_fn: ExpertFn | None = None
) -> np.ndarray:
    """Run the experts on received rows and return what combine takes (BF16 codes [rows, H]).

    ``expert_fn`` None means identity experts; otherwise it is called on chunks of rows (it
    must act row by row). For ``deepep-normal`` the output row is the rank-local weighted sum
    over the token's experts on that rank.
    """
    if recv.num_tokens != handle.num_rows:
        raise ValueError(f"recv has {recv.num_tokens} rows; the handle has {handle.num_rows}")
    out = np.empty((recv.num_tokens, recv.hidden), dtype=np.uint16)
    row_rank = handle.row_rank() if handle.mode.dedup else None
    for r0 in range(0, recv.num_tokens, _FORWARD_ROWS):  # chunks of rows, not tokens
        rows = slice(r0, min(recv.num_tokens, r0 + _FORWARD_ROWS))
        scales = None if recv.scales is None else recv.scales[rows]
        x = dequantize(WireTokens(recv.dtype, recv.data[rows], scales))
        out[rows] = f32_to_bf16_bits(_experts(x, handle, rows, expert_fn, row_rank))
    return out


def _experts(
    x: np.ndarray,
    handle: DispatchHandle,
    rows: slice,
    expert_fn: ExpertFn | None,
    row_rank: np.ndarray | None,
) -> np.ndarray:
    if not handle.mode.dedup:
        return x if expert_fn is None else expert_fn(x, handle.row_expert[rows])
    idx, w = handle.recv_topk_idx[rows], handle.recv_topk_weights[rows]
    if expert_fn is None:
        x *= w.sum(axis=1, dtype=np.float32)[:, None]
        return x
    here = idx >= 0
    pair_row, pair_k = np.nonzero(here)  # row-major: pairs grouped by row, each row >= 1
    experts = idx[pair_row, pair_k] + row_rank[rows][pair_row] * handle.experts_per_rank
    y = expert_fn(x[pair_row], experts) * w[pair_row, pair_k][:, None]
    return np.add.reduceat(y, np.flatnonzero(np.diff(pair_row, prepend=-1)), axis=0)


def combine(
    expert_out: np.ndarray,
    handle: DispatchHandle,
    *,
    out: np.ndarray | None = None,
    workspace: Workspace | None = None,
    threads: int | None = None,
) -> np.ndarray:
    """Combined tokens [num_tokens, hidden] as BF16 codes (uint16); see the module docstring.

    ``expert_out`` is [rows, hidden] uint16 BF16 codes (finite values) in the receive order of
    ``handle``. A token with no valid expert comes back as zeros. ``out`` (a contiguous uint16
    [num_tokens, hidden]) and ``workspace`` (scratch, workloads.workspace) make a steady-state
    call allocate nothing large. ``threads``: worker threads (None: podsim.workloads.parallel's
    default); the result is bit-identical for any count.
    """
    nthreads = resolve_threads(threads)
    expert_out = np.ascontiguousarray(expert_out)  # rows are read as uint32 pairs
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
    _reduce_bf16(expert_out, handle.combine_rows, handle.combine_weight, out, ws, nthreads)
    return out


def _reduce_bf16(
    src: np.ndarray,
    plan: np.ndarray,
    weight: np.ndarray,
    out: np.ndarray,
    ws: Workspace,
    threads: int,
) -> None:
    """out[t] = bf16(sum_j weight[t, j] * src[plan[t, j]]), blocked for the cache.

    BF16 is the upper half of a float32, so a uint32 view of two neighbouring BF16 values holds
    the odd one exactly in its upper half (``& 0xFFFF0000``) and the even one after ``<< 16``:
    both halves widen with one same-type operation each, in place in the gathered block, and
    are reduced separately by a batched (1 x width) @ (width x hidden/2) product (BLAS gemv),
    which applies the weights in the same pass. The float32 sums of a group of tokens are
    then rounded to nearest even at bit 16 with both halves in one array (4 passes) and
    interleaved back into BF16 pairs (3 half-width passes) straight into ``out``.

    Chunks of whole groups go to the threads (podsim.workloads.parallel), each with its own scratch;
    a token's gemv and rounding are the same calls whichever thread runs them.
    """
    n, width = plan.shape
    h2 = src.shape[1] // 2
    row_bytes = 4 * h2
    block_bytes, group_bytes = _BLOCK_BYTES, _GROUP_BYTES
    if threads > 1:
        block_bytes = group_bytes = _THREADED_BYTES
    block = max(1, block_bytes // (width * row_bytes))
    group = block * max(1, group_bytes // (2 * row_bytes * block))
    workers = min(threads, -(-n // group))
    scratch = [
        (
            ws.array(f"combine.halves.{w}", (2, block * width, h2), np.uint32),  # [lo, hi]
            ws.array(f"combine.acc.{w}", (2, group, h2), np.float32),
            ws.array(f"combine.tmp.{w}", (2, group, h2), np.uint32),
        )
        for w in range(workers)
    ]
    flat = plan.reshape(-1)
    src32, out32 = src.view(np.uint32), out.view(np.uint32)

    def reduce_range(worker: int, t0: int, t1: int) -> None:
        halves, acc, tmp = scratch[worker]
        bits = acc.view(np.uint32)
        s16, top, one, half = np.uint32(16), np.uint32(0xFFFF0000), np.uint32(1), np.uint32(0x7FFF)
        for g0 in range(t0, t1, group):  # groups of tokens, then blocks of tokens: never one
            g1 = min(t1, g0 + group)
            for s in range(g0, g1, block):
                e = min(g1, s + block)
                m = (e - s) * width
                lo, hi = halves[0, :m], halves[1, :m]
                # mode="clip" skips NumPy's defensive copy of `out`; plan rows are in range.
                np.take(src32, flat[s * width : e * width], axis=0, out=hi, mode="clip")
                np.left_shift(hi, s16, out=lo)
                np.bitwise_and(hi, top, out=hi)
                rows = halves[:, :m].view(np.float32).reshape(2, e - s, width, h2)
                np.matmul(weight[None, s:e, None, :], rows, out=acc[:, s - g0 : e - g0, None])
            b, t = bits[:, : g1 - g0], tmp[:, : g1 - g0]
            np.right_shift(b, s16, out=t)  # round to nearest even: + 0x7FFF + lsb of the result
            np.bitwise_and(t, one, out=t)
            np.add(t, half, out=t)
            np.add(b, t, out=b)
            np.right_shift(b[0], s16, out=t[0])
            np.bitwise_and(b[1], top, out=t[1])
            np.bitwise_or(t[0], t[1], out=out32[g0:g1])

    run_chunks(reduce_range, n, _chunk_tokens(n, group, workers), workers)


def _chunk_tokens(n: int, group: int, workers: int) -> int:
    """Tokens per task: whole groups, about _CHUNKS_PER_WORKER tasks per worker."""
    if workers <= 1:
        return n
    groups = -(-n // group)
    return group * max(1, -(-groups // (workers * _CHUNKS_PER_WORKER)))
