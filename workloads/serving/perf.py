"""How long an instance takes to prefill a prompt and to run one decode step.

Prefill is compute-bound (a roofline's compute side): FLOPs = ``2 x active_params x T`` (one
multiply-add per active weight and token, Kaplan et al. 2020, arXiv 2001.08361 sec. 2.1) plus the
attention-score FLOPs of :meth:`podsim.workloads.serving.kv.Attention.layer_attention_flops`,
over ``gpus x peak x mfu``. The peak is the tensor-core peak of the weight format's activation
precision (FP8 for W4A8/FP8 weights, BF16 otherwise). The dense part is spread evenly over the
layers; each layer adds its own attention term (what layer-wise KV streaming needs).

Decode is memory-bound (the roofline's bandwidth side): one step of a batch of ``B`` sequences
reads the weights it touches and every sequence's cache, over ``gpus x HBM bandwidth x mbu``;
the step takes the longer of that and its compute (``2 x active_params x B`` FLOPs plus the
attention reads' dot products, negligible at these batch sizes), plus a fixed
``decode_overhead_s`` [E] (kernel launches, scheduling). Weights touched: the non-routed
parameters always; of each MoE layer's ``E`` routed experts with top-``k`` routing, a batch of
``B`` tokens touches ``E x (1 - (1 - k/E)^B)`` on average if tokens pick experts uniformly and
independently [E: real routing is skewed and correlated, which touches fewer].

Assumptions: the instance's GPUs split work evenly (TP/EP inside the instance with perfect
balance) and one prefill runs at a time per instance (no chunked or batched prefill). The
communication inside an instance (TP all-reduce, EP dispatch/combine) is not in these times:
the builder puts it on the fabric (:mod:`podsim.workloads.serving.exchange`), between the part
of a layer before the MoE dispatch and the routed experts' part
(:meth:`InstancePerf.prefill_layer_parts`, :meth:`InstancePerf.decode_step_parts`).

GPU defaults (:class:`Gpu`): NVIDIA H800 SXM = H100 SXM compute: 1,979 TFLOP/s dense FP8 and
989 TFLOP/s dense BF16 tensor core, 3.35 TB/s HBM3, 80 GB (NVIDIA H100 Tensor Core GPU datasheet,
SXM column, dense figures = half the "with sparsity" ones); :meth:`Gpu.named` takes the peaks
and HBM capacity of another accelerator from :data:`podsim.workloads.training.gpu.GPUS`.
``mfu`` 0.4 and ``mbu`` 0.7 are estimates [E] (prefill MFU of large MoE models is reported
around 30-50 %, decode bandwidth utilisation of memory-bound kernels around 60-80 %); every
figure is a scenario parameter.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from podsim.workloads.precision import WeightFormat
from podsim.workloads.serving.models import ServingModel

__all__ = ["Gpu", "InstancePerf"]


@dataclass(frozen=True)
class Gpu:
    """One GPU's peaks and the achieved fractions (module docstring for the defaults)."""

    flops_fp8: float = 1979e12
    flops_bf16: float = 989e12
    hbm_bandwidth: float = 3.35e12
    memory: float = 80e9
    mfu: float = 0.4
    mbu: float = 0.7

    def __post_init__(self) -> None:
        for k in ("flops_fp8", "flops_bf16", "hbm_bandwidth", "memory"):
            if not getattr(self, k) > 0:
                raise ValueError(f"{k} must be > 0")
        for k in ("mfu", "mbu"):
            if not 0 < getattr(self, k) <= 1:
                raise ValueError(f"{k} must be in (0, 1]; got {getattr(self, k)}")

    @classmethod
    def named(cls, name: str, **overrides: float | None) -> Gpu:
        """The peaks and HBM capacity of accelerator ``name`` (training.gpu.GPUS), with any
        figure given in ``overrides`` (None: keep)."""
        from podsim.workloads.training.gpu import GPUS

        g = GPUS.get(name)
        base: dict[str, float] = {
            "flops_fp8": g.fp8_flops,
            "flops_bf16": g.bf16_flops,
            "hbm_bandwidth": g.hbm_Bps,
            "memory": g.memory_bytes,
        }
        return cls(**{**base, **{k: v for k, v in overrides.items() if v is not None}})

    def peak(self, activations: str) -> float:
        return self.flops_fp8 if activations == "fp8" else self.flops_bf16


@dataclass(frozen=True)
class InstancePerf:
    """Prefill and decode times of one instance of ``gpus`` GPUs serving ``model`` with
    weights in ``weights`` and the KV cache in ``kv_bytes`` bytes per value."""

    model: ServingModel
    gpus: int
    gpu: Gpu
    weights: WeightFormat
    kv_bytes: float
    decode_overhead_s: float = 0.0

    @property
    def flops(self) -> float:
        """Achieved FLOP/s of the whole instance."""
        return self.gpus * self.gpu.peak(self.weights.activations) * self.gpu.mfu

    @property
    def bandwidth(self) -> float:
        """Achieved HBM bytes/s of the whole instance."""
        return self.gpus * self.gpu.hbm_bandwidth * self.gpu.mbu

    @property
    def weight_bytes(self) -> float:
        return self.model.total_params * self.weights.bytes_per_param

    def weights_per_gpu(self) -> float:
        return self.weight_bytes / self.gpus

    # -- prefill -----------------------------------------------------------------------------
    def prefill_layer_s(self, tokens: int) -> np.ndarray:
        """Seconds of each layer of a prefill of ``tokens`` tokens (sums to
        :meth:`prefill_s`)."""
        att = self.model.attention
        dense = 2.0 * self.model.active_params * tokens / att.layers
        return (dense + att.layer_attention_flops(tokens)) / self.flops

    def prefill_s(self, tokens: int) -> float:
        return float(self.prefill_layer_s(tokens).sum())

    def prefill_layer_parts(self, tokens: int) -> tuple[np.ndarray, np.ndarray]:
        """Each layer's prefill seconds split into (before the MoE dispatch, the routed
        experts'): the routed experts' share is their ``2 x k x expert params x T`` FLOPs, spread
        over the layers as the dense part is. Sums to :meth:`prefill_layer_s`."""
        total = self.prefill_layer_s(tokens)
        att = self.model.attention
        experts = 2.0 * self.model.moe.active_routed_params * tokens / att.layers / self.flops
        return total - experts, np.full(att.layers, experts)

    # -- decode ------------------------------------------------------------------------------
    def weights_read(self, batch: int) -> float:
        """Weight bytes one decode step of ``batch`` sequences reads (module docstring)."""
        moe = self.model.moe
        share = 1.0 - (1.0 - moe.top_k / moe.routed_experts) ** max(batch, 0)
        params = self.model.dense_params + moe.routed_params * share
        return params * self.weights.bytes_per_param

    def decode_step_s(self, contexts: Sequence[int] | np.ndarray) -> float:
        """Seconds of one decode step of the sequences with these context lengths."""
        return sum(self.decode_step_parts(contexts))

    def decode_step_parts(self, contexts: Sequence[int] | np.ndarray) -> tuple[float, float]:
        """One decode step's seconds split into (before the MoE dispatch, the routed
        experts'): the routed experts get the share of the step's bytes (or, compute-bound, of
        its FLOPs) that are theirs; ``decode_overhead_s`` goes to the first part."""
        ctx = np.asarray(contexts, dtype=np.int64)
        b = int(ctx.size)
        if b == 0:
            return 0.0, 0.0
        att = self.model.attention
        seen = ctx if att.sparse_topk is None else np.minimum(ctx, att.sparse_topk)
        # = sum of att.read_bytes_per_step over the sequences
        kv = float(seen.sum()) * att.bytes_per_token(self.kv_bytes) + 2.0 * att.state_bytes * b
        weights = self.weights_read(b)
        mem = (weights + kv) / self.bandwidth
        comp = 2.0 * self.model.active_params * b / self.flops
        moe = self.model.moe
        if mem >= comp:
            routed = weights - self.model.dense_params * self.weights.bytes_per_param
            share = routed / (weights + kv)
        else:
            share = moe.active_routed_params / self.model.active_params
        step = max(mem, comp)
        return step * (1.0 - share) + self.decode_overhead_s, step * share
