"""MoE model presets: the shapes that set the traffic of one MoE layer.

Figures from docs/physics.md (MoE section) and the models' published ``config.json`` files:

=====================  ======  ========  =============  ========  =====  ===============
model                  hidden  moe_ffn   layers (MoE)   experts   top-k  routing limit
=====================  ======  ========  =============  ========  =====  ===============
DeepSeek-V3            7168    2048      61 (58)        256 + 1   8      8 groups, top-4
Kimi K2                7168    2048      61 (60)        384 + 1   8      none
Qwen3-235B-A22B        4096    1536      94 (94)        128 + 0   8      none
Mixtral-8x7B           4096    14336     32 (32)        8 + 0     2      none
Kimi-K3.1-Pro-class    7168    4096      63 (62)        512 + 1   16     none  (ASSUMED)
=====================  ======  ========  =============  ========  =====  ===============

The Kimi-K3.1-Pro-class preset is an ASSUMPTION: the brief's model (about 2.8 T parameters,
about 104 B active per token) has no public configuration. It is Kimi K2 scaled: same hidden
size, attention and single shared expert; routed experts 384 -> 512, top-k 8 -> 16, expert FFN
width 2048 -> 4096 and MoE layers 60 -> 62. Routed parameters are then 512 x 62 x 3 x 7168 x 4096
= 2.80 T and active routed parameters 16 x 62 x 3 x 7168 x 4096 = 87 B, leaving about 17 B
active for attention, the shared expert and embeddings (K2 spends about 11 B there).
Override it in a scenario when real figures appear.
"""

from __future__ import annotations

from dataclasses import dataclass

from podsim.fabric.registry import Registry

__all__ = ["MODELS", "MoEModel", "get_model"]

SCORINGS = ("softmax", "sigmoid")


@dataclass(frozen=True)
class MoEModel:
    """Shape of a model's MoE layers.

    ``moe_ffn`` is the intermediate size of one routed expert (a SwiGLU FFN: three
    hidden x moe_ffn matrices). ``n_groups``/``topk_groups`` are DeepSeek's group-limited
    routing (each token picks ``topk_groups`` of ``n_groups`` expert groups, then top-k inside
    them); 1/1 means no limit. ``routed_scaling`` multiplies the normalised top-k weights.
    """

    name: str
    hidden: int
    moe_ffn: int
    layers: int
    moe_layers: int
    routed_experts: int
    shared_experts: int
    top_k: int
    n_groups: int = 1
    topk_groups: int = 1
    scoring: str = "softmax"
    norm_topk_prob: bool = True
    routed_scaling: float = 1.0
    source: str = ""

    def __post_init__(self) -> None:
        for field in ("hidden", "moe_ffn", "layers", "moe_layers", "routed_experts", "top_k"):
            if getattr(self, field) <= 0:
                raise ValueError(f"model {self.name!r}: {field} must be > 0")
        if self.moe_layers > self.layers:
            raise ValueError(f"model {self.name!r}: moe_layers > layers")
        if self.top_k > self.routed_experts:
            raise ValueError(f"model {self.name!r}: top_k {self.top_k} > routed_experts")
        if self.scoring not in SCORINGS:
            raise ValueError(f"model {self.name!r}: scoring {self.scoring!r} not in {SCORINGS}")
        if self.routed_experts % self.n_groups or not 1 <= self.topk_groups <= self.n_groups:
            raise ValueError(
                f"model {self.name!r}: n_groups={self.n_groups} must divide routed_experts and "
                f"1 <= topk_groups={self.topk_groups} <= n_groups"
            )

    @property
    def expert_params(self) -> int:
        """Parameters of one routed expert (SwiGLU: gate, up and down projections)."""
        return 3 * self.hidden * self.moe_ffn

    @property
    def routed_params(self) -> int:
        """Parameters of all routed experts of all MoE layers."""
        return self.routed_experts * self.moe_layers * self.expert_params

    @property
    def active_routed_params(self) -> int:
        """Routed-expert parameters one token touches (top-k experts in every MoE layer)."""
        return self.top_k * self.moe_layers * self.expert_params


MODELS: Registry[MoEModel] = Registry("MoE model")


def _add(model: MoEModel, description: str) -> None:
    MODELS.add(model.name, model, description)


_add(
    MoEModel(
        "deepseek-v3",
        7168,
        2048,
        61,
        58,
        256,
        1,
        8,
        n_groups=8,
        topk_groups=4,
        scoring="sigmoid",
        routed_scaling=2.5,
        source="docs/physics.md MoE table; deepseek-ai/DeepSeek-V3 config.json",
    ),
    "DeepSeek-V3: 256 routed + 1 shared, top-8, sigmoid, 8 groups top-4 (<= 4 nodes)",
)
_add(
    MoEModel(
        "kimi-k2",
        7168,
        2048,
        61,
        60,
        384,
        1,
        8,
        scoring="sigmoid",
        routed_scaling=2.827,
        source="docs/physics.md MoE table; moonshotai/Kimi-K2-Instruct config.json",
    ),
    "Kimi K2: 384 routed + 1 shared, top-8, sigmoid, no group limit",
)
_add(
    MoEModel(
        "qwen3-235b-a22b",
        4096,
        1536,
        94,
        94,
        128,
        0,
        8,
        scoring="softmax",
        source="docs/physics.md MoE table; Qwen/Qwen3-235B-A22B config.json",
    ),
    "Qwen3-235B-A22B: 128 routed, top-8, softmax",
)
_add(
    MoEModel(
        "mixtral-8x7b",
        4096,
        14336,
        32,
        32,
        8,
        0,
        2,
        scoring="softmax",
        source="docs/physics.md MoE table; mistralai/Mixtral-8x7B-v0.1 config.json",
    ),
    "Mixtral 8x7B: 8 experts, top-2, softmax",
)
_add(
    MoEModel(
        "kimi-k3.1-pro-class",
        7168,
        4096,
        63,
        62,
        512,
        1,
        16,
        scoring="sigmoid",
        routed_scaling=2.827,
        source="ASSUMPTION: Kimi K2 scaled to ~2.8T total / ~104B active (module docstring)",
    ),
    "Kimi-K3.1-Pro-class (assumed, scaled from K2): 512 routed + 1 shared, top-16",
)


def get_model(model: str | MoEModel) -> MoEModel:
    """A preset by name (unknown names raise with did-you-mean), or the model itself."""
    return model if isinstance(model, MoEModel) else MODELS.get(model)
