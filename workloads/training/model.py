"""Per-layer FLOPs and bytes of an MoE transformer in training.

The MoE part comes from :mod:`podsim.workloads.models` (routed experts, top-k, expert width);
the attention shape is the serving presets' (podsim.workloads.serving.models: MLA heads and
ranks from the models' ``config.json``; the Kimi-K3.1-Pro-class hybrid of linear and MLA layers,
an assumption); this module adds the query LoRA rank and the dense FFN width (``PROJECTIONS``)
and the dense layers (``layers - moe_layers``: 3 for DeepSeek-V3, 1 for Kimi K2).

FLOPs per token, forward (multiply-add = 2 FLOPs; Narayanan et al., SC 2021, appendix):

- attention projections: ``2 x attn_params``, with MLA's parameters
  ``h q_r + q_r H (d_n + d_r) + h (k_r + d_r) + k_r H (d_n + d_v) + H d_v h``;
- attention scores with a causal mask over a sequence of ``S`` tokens: on average
  ``2 x (S / 2) x H x (d_n + d_r + d_v)`` (QK^T and AV over half the context); a linear-attention
  layer of the hybrid preset its state update instead (serving's ``Attention``);
- MoE layer: ``2 x (top_k + shared) x 3 h f`` (SwiGLU experts); dense layer ``2 x 3 h F``.

Backward is twice the forward (gradients of inputs and of weights), the usual 1:2 split. The
embedding and output head are left out (under 2 % of a 1T MoE's FLOPs per token) [E].
"""

from __future__ import annotations

from dataclasses import dataclass

from podsim.workloads.models import MoEModel, get_model
from podsim.workloads.serving.kv import Attention
from podsim.workloads.serving.models import SERVING_MODELS

__all__ = ["PROJECTIONS", "LayerCost", "layer_costs", "mla_params"]


#: model -> (q_lora_rank, dense intermediate_size), the two shapes a training step needs beyond
#: the serving presets' attention (config.json of DeepSeek-V3 and Kimi K2; the K3.1-class
#: preset reuses Kimi K2's, an assumption)
PROJECTIONS: dict[str, tuple[int, int]] = {
    "deepseek-v3": (1536, 18432),
    "kimi-k2": (1536, 18432),
    "kimi-k3.1-pro-class": (1536, 18432),
}


def mla_params(att: Attention, hidden: int, q_lora: int) -> int:
    """Weights of one MLA layer's projections (module docstring), from the serving preset's
    attention shape: heads ``q_heads``, ``d_r`` = ``rope_dim``, ``d_n`` = ``qk_dim - rope_dim``,
    ``d_v`` = ``v_dim``, ``k_r`` = ``kv_lora_rank``."""
    h, hh, k_r, d_r = hidden, att.q_heads, att.kv_lora_rank, att.rope_dim
    d_n, d_v = att.qk_dim - d_r, att.v_dim
    return (
        h * q_lora
        + q_lora * hh * (d_n + d_r)
        + h * (k_r + d_r)
        + k_r * hh * (d_n + d_v)
        + hh * d_v * h
    )


@dataclass(frozen=True)
class LayerCost:
    """Forward FLOPs per token of one layer's parts, and the parameters they hold."""

    attn_flops: float
    ffn_flops: float  # shared expert (MoE layer) or the dense FFN
    routed_flops: float  # the top-k routed experts (0 for a dense layer)
    attn_params: int
    ffn_params: int
    expert_params: int  # one routed expert
    moe: bool


def layer_costs(model: str | MoEModel, seq_len: int) -> list[LayerCost]:
    """Per-layer forward costs of ``model`` for sequences of ``seq_len`` tokens; the attention
    shape (heads, MLA ranks, hybrid linear layers) is the serving preset's
    (:data:`podsim.workloads.serving.models.SERVING_MODELS`), its score FLOPs per token
    ``Attention.layer_attention_flops(S) / S``."""
    m = get_model(model) if isinstance(model, str) else model
    if m.name not in PROJECTIONS:
        raise KeyError(
            f"model {m.name!r} has no MLA projection shape for training; known: "
            f"{', '.join(sorted(PROJECTIONS))}"
        )
    q_lora, dense_ffn = PROJECTIONS[m.name]
    att = SERVING_MODELS.get(m.name).attention
    ap = mla_params(att, m.hidden, q_lora)
    scores = att.layer_attention_flops(seq_len) / seq_len
    dense = m.layers - m.moe_layers  # first_k_dense_replace
    out = []
    for layer in range(m.layers):
        attn = 2.0 * ap + float(scores[layer])
        if layer < dense:
            ffn_p = 3 * m.hidden * dense_ffn
            out.append(LayerCost(attn, 2.0 * ffn_p, 0.0, ap, ffn_p, 0, False))
        else:
            ep = m.expert_params
            out.append(
                LayerCost(
                    attn,
                    2.0 * m.shared_experts * ep,
                    2.0 * m.top_k * ep,
                    ap,
                    m.shared_experts * ep,
                    ep,
                    True,
                )
            )
    return out
