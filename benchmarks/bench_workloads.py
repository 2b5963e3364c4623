"""Benchmark: MoE dispatch + combine on NumPy against the machine's own copy bandwidth.

Issue 3's case: 4096 tokens x 7168 hidden, top-8 of 256 experts (DeepSeek-V3 gate: sigmoid,
8 groups, top-4 groups) over 64 ranks, FP8 dispatch and BF16 combine, the whole EP group's tokens
in one process. Buffers are preallocated and reused (as DeepEP's Buffer does) so page faults do
not count; quantisation happens before dispatch (DeepEP takes FP8 input) and the experts are
identity, both outside the timed region.

"Effective bytes" are the payload bytes the two phases move between ranks: the receive rows of
dispatch (rows x 7392 B) plus the expert rows sent back by combine (rows x 14336 B). The
reference is ``np.copyto`` of a 256 MiB buffer (bytes copied per second, best of 5), measured
right before each mode's kernels because other jobs share the machine.
Target: effective bytes/s >= 50 % of the copy bandwidth.

Run: ``python benchmarks/bench_workloads.py [--mode deepep-normal|megatron-alltoall|...|all]``
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from workloads.combine import combine, expert_forward
from workloads.dispatch import MODES, dispatch
from workloads.gating import expert_groups, gate, popularity_logits
from workloads.layout import get_dispatch_layout
from workloads.precision import bf16_bits_to_f32, bytes_per_token, quantize


def best_of(fn, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def copy_bandwidth(nbytes: int = 256 << 20, repeat: int = 5) -> float:
    src = np.ones(nbytes // 8)
    dst = np.zeros_like(src)  # np.zeros + first copy below fault the pages in before timing
    np.copyto(dst, src)
    return nbytes / best_of(lambda: np.copyto(dst, src), repeat)


def run(mode: str, args: argparse.Namespace) -> None:
    rng = np.random.default_rng(args.seed)
    n, h, e, k, r = args.tokens, args.hidden, args.experts, args.topk, args.ranks
    logits = popularity_logits(n, e, k, "uniform", rng=rng)
    routing = gate(
        logits, k, scoring="sigmoid", groups=expert_groups(e, 8), max_groups=4, norm_topk_prob=True
    )
    x = rng.standard_normal((n, h), dtype=np.float32)
    t0 = time.perf_counter()
    q = quantize(x, "fp8")
    t_quant = time.perf_counter() - t0

    recv, handle = dispatch(q, routing.topk_idx, routing.topk_weights, e, r, mode)  # warm-up
    expert_out = expert_forward(recv, handle)  # identity experts, untimed
    out = np.empty((n, h), dtype=np.uint16)
    combine(expert_out, handle, out=out)
    err = np.abs(bf16_bits_to_f32(out) - x).max()

    def do_dispatch():
        dispatch(q, routing.topk_idx, routing.topk_weights, e, r, mode, out=recv)

    copy_bps = copy_bandwidth()  # measured next to the kernels: the machine is shared
    t_d = best_of(do_dispatch, args.repeat)
    t_c = best_of(lambda: combine(expert_out, handle, out=out), args.repeat)
    rows = handle.num_rows
    header = MODES.get(mode).header_bytes
    b_d = rows * (bytes_per_token("fp8", h) + header)
    b_c = rows * bytes_per_token("bf16", h)
    total_t, total_b = t_d + t_c, b_d + b_c
    lay = get_dispatch_layout(routing.topk_idx, e, r, 8)
    print(f"\n== {mode}: {n} tokens x {h} hidden, top-{k} of {e} experts over {r} ranks ==")
    print(
        f"rows received {rows} ({rows / n:.2f} per token; avg ranks/token "
        f"{lay.num_tokens_per_rank.sum() / n:.2f}, nodes/token "
        f"{lay.num_tokens_per_rdma_rank.sum() / n:.2f} at 8 GPUs/node)"
    )
    print(f"quantise FP8 (untimed input prep): {t_quant * 1e3:8.1f} ms")
    print(f"dispatch  {t_d * 1e3:8.1f} ms  {b_d / 1e6:8.1f} MB  {b_d / t_d / 1e9:6.2f} GB/s")
    print(f"combine   {t_c * 1e3:8.1f} ms  {b_c / 1e6:8.1f} MB  {b_c / t_c / 1e9:6.2f} GB/s")
    print(
        f"total     {total_t * 1e3:8.1f} ms  {total_b / 1e6:8.1f} MB  "
        f"{total_b / total_t / 1e9:6.2f} GB/s effective, {n / total_t:,.0f} tokens/s"
    )
    print(
        f"np.copyto {copy_bps / 1e9:6.2f} GB/s -> effective/copy = "
        f"{total_b / total_t / copy_bps:.0%} (target >= 50 %); round-trip max |error| {err:.3g}"
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mode", default="deepep-normal", help="a dispatch mode or 'all'")
    p.add_argument("--tokens", type=int, default=4096)
    p.add_argument("--hidden", type=int, default=7168)
    p.add_argument("--experts", type=int, default=256)
    p.add_argument("--topk", type=int, default=8)
    p.add_argument("--ranks", type=int, default=64)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    if args.mode != "all":
        MODES.get(args.mode)  # unknown names fail here, with did-you-mean
    modes = MODES.names() if args.mode == "all" else [args.mode]
    for mode in modes:
        run(mode, args)


if __name__ == "__main__":
    main()
