"""DeepEP's low-latency kernels: the GPU-side time of a rank's kernel beyond its transfers.

Read from github:deepseek-ai/DeepEP at commit dd758caf451848bd150e1046af3d0a73e5fff38d
(``csrc/kernels/legacy/internode_ll.cu``, ``tests/legacy/test_low_latency.py``,
``deep_ep/utils/testing.py``). Each of the two kernels sends *and* receives, and DeepEP's test
times the whole kernel (``bench_kineto``: the kernel's duration in the CUDA profiler, each
iteration after a ~10 ms sleep kernel and a ``dist.all_reduce`` barrier). Beyond the messages
(podsim's transport carries them), a rank's kernel spends time on work and waits that are not on
the fabric:

- dispatch: the warps cast each token to FP8 and post one put per (token, expert) (IBGDA WQE or
  a warp's NVLink copy); per destination expert a count is sent *after* its data
  (``nvshmemi_ibgda_amo_nonfetch_add`` once the finish counter says every put was issued); a
  cooperative grid sync separates send and receive; the receiver polls each (expert, source)
  count and copies the rows into the packed output;
- combine: per (expert, destination) the rows are copied into the send buffer and put, then a
  finish flag follows the data; the receiver waits for *every* flag, grid-syncs, and only then
  reduces each token's top-k BF16 copies (FP32 accumulation) into its output row.

Modelled here, per rank and phase, as a *tail*: time the rank's phase lasts after its last
message was delivered (:func:`podsim.scenarios.execution.timeline.layer_graph`):

- ``combine``: the receiver's reduction, which starts only once every copy has arrived, reads the
  rank's top-k copies and writes its output rows at ``reduce_rate`` (an HBM pass: H800 SXM5
  3.35 TB/s HBM3, NVIDIA H100/H800 datasheet, podsim.workloads.training.gpu), so
  ``(copies + tokens) x row / reduce_rate``; the dispatch's packing copy is not serial (each
  (expert, source) block is copied as soon as its count arrives, while later ones still fly);
- ``dispatch_fixed`` / ``combine_fixed``: the rest, a fixed per-kernel time - the count /
  flag signalling after the data and its polling, the cooperative grid sync, the warps' cast
  and WQE posting, and the start skew the barrier leaves between ranks (the kernel of a rank
  lasts until the *last* rank's data arrived; DeepEP's maintainers on issue #71: "the gap for
  synchronization becomes larger, as all-to-all communication effectively acts as an implicit
  synchronization operation"). A fixed per-kernel cost of this size is measured: DeepEP's
  low-latency dispatch on one 8 x H100 node over NVLink takes 32 us for 16 tokens per rank
  and 0.35-0.42 us per further token up to 512 (ai-dynamo/nixl pull request #1749's benchmark
  table), an intercept of about 26 us that no byte count explains. No source gives it for
  DeepEP's H800 testbed [E]: it is a calibrated parameter
  (``workload.moe.deepep.ll_dispatch_fixed`` / ``ll_combine_fixed``; benchmarks/
  validate_hardware.py fits it on half of DeepEP's published low-latency points).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["LowLatencyKernel"]


@dataclass(frozen=True)
class LowLatencyKernel:
    """GPU-side time of DeepEP's low-latency kernels beyond their messages (module docstring).

    ``dispatch_fixed_s`` / ``combine_fixed_s``: per kernel and rank (s); ``reduce_rate_Bps``: the
    combine receiver's reduction rate in bytes/s (None: not modelled)."""

    dispatch_fixed_s: float = 0.0
    combine_fixed_s: float = 0.0
    reduce_rate_Bps: float | None = None

    def __post_init__(self) -> None:
        for name in ("dispatch_fixed_s", "combine_fixed_s"):
            v = getattr(self, name)
            if not (np.isfinite(v) and v >= 0):
                raise ValueError(f"{name} must be a finite time >= 0; got {v!r}")
        r = self.reduce_rate_Bps
        if r is not None and not (np.isfinite(r) and r > 0):
            raise ValueError(f"reduce_rate_Bps must be a finite rate > 0; got {r!r}")

    def tail_s(
        self, phase: str, copies: np.ndarray, tokens: np.ndarray, row_bytes: int
    ) -> np.ndarray:
        """Per-rank tail of ``phase`` (s). ``copies[r]``: the (token, expert) copies of rank
        ``r``'s tokens (what its combine receives and reduces), ``tokens[r]`` its tokens,
        ``row_bytes`` the combine row (BF16: 2 x hidden)."""
        copies = np.asarray(copies, dtype=float)
        if phase == "dispatch":
            return np.full(copies.shape, self.dispatch_fixed_s)
        if phase != "combine":
            raise ValueError(f"phase must be 'dispatch' or 'combine'; got {phase!r}")
        tail = np.full(copies.shape, self.combine_fixed_s)
        if self.reduce_rate_Bps is not None:
            rows = copies + np.asarray(tokens, dtype=float)  # read every copy, write each token
            tail = tail + rows * row_bytes / self.reduce_rate_Bps
        return tail
