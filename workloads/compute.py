"""Expert compute time between dispatch and combine: grouped-GEMM FLOPs at an achieved rate.

A routed expert is a SwiGLU FFN: three hidden x moe_ffn matrices (gate, up, down), so n token
copies cost 2 * 3 * n * hidden * moe_ffn FLOPs (multiply-add = 2 FLOPs). The experts of a rank
run as one grouped GEMM; its time is the rank's FLOPs / ``achieved_flops`` plus a fixed
``overhead_s`` per layer (kernel launch, quantisation). The slowest rank sets the layer's
dispatch -> compute -> combine critical path.

``DEFAULT_ACHIEVED_FLOPS`` = 1.0e15 FLOP/s is an estimate [E] (not in docs/physics.md): DeepSeek's
DeepGEMM reports about 1,200-1,550 TFLOP/s for FP8 grouped GEMMs on H800 at large batches, and
small per-expert batches run lower. Override it per scenario.
"""

from __future__ import annotations

import numpy as np

__all__ = ["DEFAULT_ACHIEVED_FLOPS", "expert_flops", "rank_compute"]

DEFAULT_ACHIEVED_FLOPS = 1.0e15
GEMMS_PER_EXPERT = 3


def expert_flops(token_copies: np.ndarray | int, hidden: int, moe_ffn: int) -> np.ndarray:
    """FLOPs of the SwiGLU experts for the given token copies (element-wise)."""
    return 2.0 * GEMMS_PER_EXPERT * np.asarray(token_copies, dtype=np.float64) * hidden * moe_ffn


def rank_compute(
    tokens_per_expert: np.ndarray,
    slots_per_rank: int,
    hidden: int,
    moe_ffn: int,
    achieved_flops: float = DEFAULT_ACHIEVED_FLOPS,
    overhead_s: float = 0.0,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per rank: (token copies, FLOPs, seconds) from token copies per *physical* expert.

    Physical expert p runs on rank p // slots_per_rank (podsim.workloads.placement).
    """
    copies = np.asarray(tokens_per_expert, dtype=np.int64)
    if achieved_flops <= 0 or overhead_s < 0:
        raise ValueError(
            f"achieved_flops must be > 0 and overhead_s >= 0; got {achieved_flops}, {overhead_s}"
        )
    if copies.ndim != 1 or copies.size % slots_per_rank:
        raise ValueError(f"{copies.size} experts do not fill ranks of {slots_per_rank} slots")
    per_rank = copies.reshape(-1, slots_per_rank).sum(axis=1)
    flops = expert_flops(per_rank, hidden, moe_ffn)
    seconds = flops / achieved_flops + np.where(per_rank > 0, overhead_s, 0.0)
    return per_rank, flops, seconds
