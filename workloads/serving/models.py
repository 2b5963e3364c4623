"""Serving model presets: parameters, active parameters, attention design and context length.

A serving model joins an MoE preset of :mod:`podsim.workloads.models` (routed experts, top-k:
how many expert weights a decode batch touches) with what inference needs besides: the
parameters one token activates (``active_params``, the published figure), the attention design
(:class:`podsim.workloads.serving.kv.Attention`: KV bytes per token, prefill attention FLOPs)
and the longest context. Non-routed parameters (attention, shared experts, dense layers,
embeddings) are derived: ``active_params`` minus the routed parameters one token activates;
total parameters are the routed ones plus those.

=====================  =========  ========  ====================================  ==========
model                  total      active    attention                             context
=====================  =========  ========  ====================================  ==========
deepseek-v3            671 B      37 B      MLA 512 + 64, 61 layers, 128 heads    128 K
kimi-k2                1.04 T     32 B      MLA 512 + 64, 61 layers, 64 heads     128 K
qwen3-235b-a22b        235 B      22 B      GQA 4 x 128, 94 layers, 64 heads      32 K
kimi-k3.1-pro-class    2.8 T      104 B     hybrid 3 linear : 1 MLA, 63 layers    1 M
=====================  =========  ========  ====================================  ==========

Sources: DeepSeek-V3 technical report (arXiv 2412.19437: 671 B total, 37 B activated, 128 K
context) and its config.json (kv_lora_rank 512, qk_rope_head_dim 64, qk_nope_head_dim 128,
v_head_dim 128, 128 heads); Kimi K2 model card (moonshotai/Kimi-K2-Instruct: 1 T total, 32 B
activated, 128 K context, 64 heads, MLA as DeepSeek-V3); Qwen3-235B-A22B model card (235 B / 22 B,
64 query and 4 KV heads of 128, 32,768 native context). Kimi-K3.1-Pro-class is the brief's model
(docs/physics.md: about 2.8 T parameters, about 104 B active, about 1 M tokens of context) with no
public configuration: its MoE shape is the estimated ``kimi-k3.1-pro-class`` preset of
:mod:`podsim.workloads.models`; its attention is an assumption [E]: Kimi Linear's hybrid
(arXiv 2510.26692: three Kimi Delta Attention layers per MLA layer) with K2's MLA dimensions and
64 heads, and a 4 MiB linear state per layer and sequence (64 heads x 128 x 128 x FP32).
"""

from __future__ import annotations

from dataclasses import dataclass

from podsim.fabric.registry import Registry
from podsim.workloads.models import MoEModel, get_model
from podsim.workloads.serving.kv import Attention

__all__ = ["SERVING_MODELS", "ServingModel", "get_serving_model"]


@dataclass(frozen=True)
class ServingModel:
    """A model as the serving workload sees it (module docstring)."""

    name: str
    moe: MoEModel
    active_params: float
    attention: Attention
    max_context: int
    source: str = ""

    def __post_init__(self) -> None:
        if self.attention.layers != self.moe.layers:
            raise ValueError(
                f"model {self.name!r}: attention has {self.attention.layers} layers, the MoE "
                f"preset {self.moe.layers}"
            )
        if self.active_params < self.moe.active_routed_params:
            raise ValueError(
                f"model {self.name!r}: active_params {self.active_params:.3g} is below the "
                f"routed parameters a token activates ({self.moe.active_routed_params:.3g})"
            )
        if self.max_context <= 0:
            raise ValueError(f"model {self.name!r}: max_context must be > 0")

    @property
    def dense_params(self) -> float:
        """Parameters every token uses (attention, shared experts, dense layers, embeddings)."""
        return self.active_params - self.moe.active_routed_params

    @property
    def total_params(self) -> float:
        return self.moe.routed_params + self.dense_params

    @property
    def layers(self) -> int:
        return self.attention.layers


SERVING_MODELS: Registry[ServingModel] = Registry("serving model")

_MLA = {"kv_lora_rank": 512, "rope_dim": 64, "qk_dim": 192, "v_dim": 128}

SERVING_MODELS.add(
    "deepseek-v3",
    ServingModel(
        "deepseek-v3",
        get_model("deepseek-v3"),
        37e9,
        Attention("mla", 61, q_heads=128, **_MLA),
        131_072,
        "[S] arXiv 2412.19437; deepseek-ai/DeepSeek-V3 config.json",
    ),
    "DeepSeek-V3: 671B/37B, MLA (512 + 64 per token and layer), 128K context",
)
SERVING_MODELS.add(
    "kimi-k2",
    ServingModel(
        "kimi-k2",
        get_model("kimi-k2"),
        32e9,
        Attention("mla", 61, q_heads=64, **_MLA),
        131_072,
        "[S] moonshotai/Kimi-K2-Instruct model card and config.json",
    ),
    "Kimi K2: 1T/32B, MLA (512 + 64), 64 heads, 128K context",
)
SERVING_MODELS.add(
    "qwen3-235b-a22b",
    ServingModel(
        "qwen3-235b-a22b",
        get_model("qwen3-235b-a22b"),
        22e9,
        Attention("gqa", 94, kv_heads=4, head_dim=128, q_heads=64, qk_dim=128, v_dim=128),
        32_768,
        "[S] Qwen/Qwen3-235B-A22B model card and config.json",
    ),
    "Qwen3-235B-A22B: 235B/22B, GQA (4 KV heads of 128), 32K context",
)
SERVING_MODELS.add(
    "kimi-k3.1-pro-class",
    ServingModel(
        "kimi-k3.1-pro-class",
        get_model("kimi-k3.1-pro-class"),
        104e9,
        Attention(
            "hybrid",
            63,
            cache="mla",
            full_every=4,
            linear_state_bytes=64 * 128 * 128 * 4,
            q_heads=64,
            **_MLA,
        ),
        1_048_576,
        "[E] docs/physics.md (2.8T / 104B active / ~1M context); attention after Kimi Linear "
        "(arXiv 2510.26692), module docstring",
    ),
    "Kimi-K3.1-Pro-class (assumed): 2.8T/104B, hybrid 3 linear : 1 MLA, 1M context",
)


def get_serving_model(name: str | ServingModel) -> ServingModel:
    """A preset by name (unknown names raise with did-you-mean), or the model itself."""
    return name if isinstance(name, ServingModel) else SERVING_MODELS.get(name)
