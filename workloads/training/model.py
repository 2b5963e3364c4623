"""Per-layer FLOPs and bytes of an MoE transformer in training.

The MoE part comes from :mod:`podsim.workloads.models` (routed experts, top-k, expert width);
this module adds what a training step also runs: multi-head latent attention (MLA) and the dense
FFN layers, from the models' published ``config.json`` (DeepSeek-V3: deepseek-ai/DeepSeek-V3;
Kimi K2: moonshotai/Kimi-K2-Instruct; both MLA with q_lora_rank 1536, kv_lora_rank 512,
qk_nope_head_dim 128, qk_rope_head_dim 64, v_head_dim 128, dense intermediate_size 18432;
128 heads and 3 dense layers for DeepSeek-V3, 64 heads and 1 dense layer for Kimi K2). The
Kimi-K3.1-Pro-class preset reuses Kimi K2's attention (an assumption, see workloads.models).

FLOPs per token, forward (multiply-add = 2 FLOPs; Narayanan et al., SC 2021, appendix):

- attention projections: ``2 x attn_params``, with MLA's parameters
  ``h q_r + q_r H (d_n + d_r) + h (k_r + d_r) + k_r H (d_n + d_v) + H d_v h``;
- attention scores with a causal mask over a sequence of ``S`` tokens: on average
  ``2 x (S / 2) x H x (d_n + d_r + d_v)`` (QK^T and AV over half the context);
- MoE layer: ``2 x (top_k + shared) x 3 h f`` (SwiGLU experts); dense layer ``2 x 3 h F``.

Backward is twice the forward (gradients of inputs and of weights), the usual 1:2 split. The
embedding and output head are left out (under 2 % of a 1T MoE's FLOPs per token) [E].
"""

from __future__ import annotations

from dataclasses import dataclass

from podsim.workloads.models import MoEModel, get_model

__all__ = ["ATTENTION", "Attention", "LayerCost", "layer_costs"]


@dataclass(frozen=True)
class Attention:
    """MLA shape and dense-layer figures of a model (config.json names in brackets)."""

    heads: int  # num_attention_heads
    q_lora: int = 1536  # q_lora_rank
    kv_lora: int = 512  # kv_lora_rank
    d_nope: int = 128  # qk_nope_head_dim
    d_rope: int = 64  # qk_rope_head_dim
    d_v: int = 128  # v_head_dim
    dense_layers: int = 0  # first_k_dense_replace
    dense_ffn: int = 18432  # intermediate_size

    def params(self, hidden: int) -> int:
        h, hh = hidden, self.heads
        return (
            h * self.q_lora
            + self.q_lora * hh * (self.d_nope + self.d_rope)
            + h * (self.kv_lora + self.d_rope)
            + self.kv_lora * hh * (self.d_nope + self.d_v)
            + hh * self.d_v * h
        )


#: model preset -> attention (config.json of each model; the K3.1-class one is assumed)
ATTENTION: dict[str, Attention] = {
    "deepseek-v3": Attention(heads=128, dense_layers=3),
    "kimi-k2": Attention(heads=64, dense_layers=1),
    "kimi-k3.1-pro-class": Attention(heads=64, dense_layers=1),
}


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
    """Per-layer forward costs of ``model`` for sequences of ``seq_len`` tokens."""
    m = get_model(model) if isinstance(model, str) else model
    if m.name not in ATTENTION:
        raise KeyError(
            f"model {m.name!r} has no attention shape for training; known: "
            f"{', '.join(sorted(ATTENTION))}"
        )
    a = ATTENTION[m.name]
    ap = a.params(m.hidden)
    attn = 2.0 * ap + 2.0 * (seq_len / 2) * a.heads * (a.d_nope + a.d_rope + a.d_v)
    dense = m.layers - m.moe_layers
    out = []
    for layer in range(m.layers):
        if layer < dense:
            ffn_p = 3 * m.hidden * a.dense_ffn
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
