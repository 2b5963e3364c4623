"""Accelerator peak rates for the training compute model.

Dense (no sparsity) peak tensor rates, HBM bandwidth and HBM capacity, per accelerator:

- H100 SXM5 and H800 SXM5: 989 TFLOP/s BF16, 1,979 TFLOP/s FP8, 3.35 TB/s HBM3 (NVIDIA H100
  Tensor Core GPU datasheet, SXM column; the sparse figures there are twice these; H800 differs
  in NVLink and FP64 only) [D].
- B200 (HGX B200): 2,250 TFLOP/s BF16, 4,500 TFLOP/s FP8, 8 TB/s HBM3e (NVIDIA HGX B200
  datasheet: 72 PFLOPS FP8 sparse training for 8 GPUs) [D].
- GB200 (NVL72): 2,500 TFLOP/s BF16, 5,000 TFLOP/s FP8, 8 TB/s (NVIDIA GB200 NVL72 product page:
  360 PFLOPS BF16 and 720 PFLOPS FP8 per rack with sparsity, halved for dense, over 72 GPUs) [D].
- Ascend 910C: 752 TFLOP/s BF16 dense, FP8 not supported natively (taken as the BF16 rate), 3.2
  TB/s [E] (press reports of the CloudMatrix384 paper, arXiv 2506.12708; not checked against a
  Huawei datasheet).

``achieved`` (a scenario parameter, default :data:`DEFAULT_ACHIEVED`) scales the peak to the
rate kernels sustain; no single public figure applies to every kernel, so it is an estimate.
"""

from __future__ import annotations

from dataclasses import dataclass

from podsim.fabric.registry import Registry

__all__ = ["DEFAULT_ACHIEVED", "GPUS", "Gpu"]

#: [E] fraction of the peak tensor rate kernels sustain in a training step (DeepSeek-V3's and
#: Megatron's reported MFUs of 30-50 % include communication stalls; kernels alone run higher)
DEFAULT_ACHIEVED = 0.6


@dataclass(frozen=True)
class Gpu:
    """Peak dense rates of one accelerator (FLOP/s, bytes/s) and its HBM capacity (bytes)."""

    name: str
    bf16_flops: float
    fp8_flops: float
    hbm_Bps: float
    memory_bytes: float
    source: str


GPUS: Registry[Gpu] = Registry("GPU")
for _g in (
    # HBM capacity: H100 SXM 80 GB, H800 SXM5 80 GB HBM3, HGX B200 1,440 GB for 8 GPUs, GB200
    # NVL72 13.4 TB HBM3e over 72 GPUs (the same datasheets) [D]; Ascend 910C 128 GB [E]
    Gpu("h100", 989e12, 1979e12, 3.35e12, 80e9, "NVIDIA H100 datasheet (SXM, dense) [D]"),
    Gpu("h800", 989e12, 1979e12, 3.35e12, 80e9, "NVIDIA H800 SXM5 datasheet (dense) [D]"),
    Gpu("b200", 2250e12, 4500e12, 8.0e12, 180e9, "NVIDIA HGX B200 datasheet (dense) [D]"),
    Gpu("gb200", 2500e12, 5000e12, 8.0e12, 186e9, "NVIDIA GB200 NVL72 page (per GPU, dense) [D]"),
    Gpu("ascend-910c", 752e12, 752e12, 3.2e12, 128e9, "press reports of arXiv 2506.12708 [E]"),
):
    GPUS.add(_g.name, _g, f"{_g.bf16_flops / 1e12:,.0f} TFLOP/s BF16 dense; {_g.source}")
