"""KV-cache bytes by attention design: what a request's prefill leaves behind for decode.

Three designs, per layer and per token (values; bytes = values x the KV dtype's bytes):

- **MLA** (multi-head latent attention, DeepSeek-V2 arXiv 2405.04434 sec. 2.1.2-2.1.3 and
  DeepSeek-V3 arXiv 2412.19437 sec. 2.1.1): only the compressed latent ``c_t^KV`` (``d_c``
  values) and the decoupled RoPE key ``k_t^R`` (``d_h^R`` values) are cached, so
  ``d_c + d_h^R`` values per token per layer, whatever the head count. DeepSeek-V3 and Kimi K2:
  ``kv_lora_rank`` 512 + ``qk_rope_head_dim`` 64 = 576 (their config.json files).
- **GQA** (grouped-query attention, Ainslie et al. 2023, arXiv 2305.13245): a key and a value
  vector per KV head, ``2 x kv_heads x head_dim`` values per token per layer (Qwen3-235B-A22B:
  4 KV heads of 128, config.json).
- **hybrid**: linear-attention layers that keep a fixed-size state per sequence (no per-token
  cache) interleaved with full- or sparse-attention layers that keep a per-token cache (MLA or
  GQA). Kimi Linear (arXiv 2510.26692) interleaves three Kimi Delta Attention layers with one
  MLA layer (``full_every = 4``); MiniMax-01 (arXiv 2501.08313) puts one softmax layer after
  seven lightning-attention layers (``full_every = 8``). The linear layers' state size
  (``linear_state_bytes`` per layer and sequence) is a parameter: a KDA or lightning-attention
  state is ``heads x d_k x d_v`` values (Kimi Linear keeps it in FP32), which for 64 heads of
  128 x 128 is 4 MiB per layer [E].

Layer ``l`` (0-based) is a full-attention layer of a hybrid when ``(l + 1) % full_every == 0``
(the last of every group, as in Kimi Linear's 3:1 layout) [E for the exact position].

Sparse attention (``sparse_topk``: each query reads at most that many cached tokens, as
DeepSeek-V3.2's DSA with 2048) changes what is *read* per step and the prefill compute, not
what is *stored*: the whole per-token cache stays.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["ATTENTION_KINDS", "Attention"]

ATTENTION_KINDS = ("mla", "gqa", "hybrid")


@dataclass(frozen=True)
class Attention:
    """A model's attention design (module docstring). ``cache`` is the per-token design of
    the full layers (``mla`` or ``gqa``; for ``mla``/``gqa`` kinds it is the kind itself).

    Prefill compute: ``q_heads`` query heads with ``qk_dim`` (query/key) and ``v_dim`` (value)
    dimensions per head in the full layers (MLA in prefill runs un-absorbed: DeepSeek-V3
    ``qk_nope_head_dim + qk_rope_head_dim`` = 192 and ``v_head_dim`` = 128). Linear layers cost
    ``linear_flops_per_token`` FLOPs per token each (default: ``4 x q_heads x 128 x 128``, a
    state update and a read-out of a 128 x 128 state per head [E]).
    """

    kind: str
    layers: int
    kv_lora_rank: int = 0
    rope_dim: int = 0
    kv_heads: int = 0
    head_dim: int = 0
    cache: str = ""
    full_every: int = 1
    linear_state_bytes: int = 0
    q_heads: int = 0
    qk_dim: int = 0
    v_dim: int = 0
    sparse_topk: int | None = None
    linear_flops_per_token: float | None = None

    def __post_init__(self) -> None:
        if self.kind not in ATTENTION_KINDS:
            raise ValueError(f"attention kind {self.kind!r} not in {ATTENTION_KINDS}")
        cache = self.cache or (self.kind if self.kind != "hybrid" else "mla")
        object.__setattr__(self, "cache", cache)
        if cache not in ("mla", "gqa") or (self.kind != "hybrid" and cache != self.kind):
            raise ValueError(f"attention cache {cache!r} does not fit kind {self.kind!r}")
        if self.layers <= 0:
            raise ValueError(f"layers must be > 0; got {self.layers}")
        if cache == "mla" and (self.kv_lora_rank <= 0 or self.rope_dim < 0):
            raise ValueError("MLA needs kv_lora_rank > 0 and rope_dim >= 0")
        if cache == "gqa" and (self.kv_heads <= 0 or self.head_dim <= 0):
            raise ValueError("GQA needs kv_heads > 0 and head_dim > 0")
        if self.kind == "hybrid" and not 1 <= self.full_every <= self.layers:
            raise ValueError(f"full_every must be in 1 .. layers; got {self.full_every}")
        if self.kind != "hybrid" and self.full_every != 1:
            raise ValueError("full_every applies to the hybrid kind only")
        if self.linear_state_bytes < 0:
            raise ValueError("linear_state_bytes must be >= 0")
        if self.sparse_topk is not None and self.sparse_topk <= 0:
            raise ValueError("sparse_topk must be > 0 (or None: dense attention)")

    # -- layout --------------------------------------------------------------------------
    def full_layers(self) -> np.ndarray:
        """Boolean per layer: True where the layer keeps a per-token cache."""
        idx = np.arange(self.layers)
        if self.kind != "hybrid":
            return np.ones(self.layers, dtype=bool)
        return (idx + 1) % self.full_every == 0

    @property
    def num_full(self) -> int:
        return int(self.full_layers().sum())

    @property
    def num_linear(self) -> int:
        return self.layers - self.num_full

    # -- bytes -----------------------------------------------------------------------------
    @property
    def values_per_token_layer(self) -> int:
        """Cached values per token in one full layer: MLA ``d_c + d_h^R``, GQA
        ``2 x kv_heads x head_dim``."""
        if self.cache == "mla":
            return self.kv_lora_rank + self.rope_dim
        return 2 * self.kv_heads * self.head_dim

    def bytes_per_token(self, kv_bytes: float) -> float:
        """Cache bytes per token over all layers (``kv_bytes`` per value)."""
        return self.num_full * self.values_per_token_layer * kv_bytes

    @property
    def state_bytes(self) -> int:
        """Fixed bytes per sequence: the linear layers' states."""
        return self.num_linear * self.linear_state_bytes

    def cache_bytes(self, tokens: int, kv_bytes: float) -> float:
        """The whole cache of one sequence of ``tokens`` tokens."""
        return tokens * self.bytes_per_token(kv_bytes) + self.state_bytes

    def layer_bytes(self, tokens: int, kv_bytes: float) -> np.ndarray:
        """Cache bytes of each layer for one sequence of ``tokens`` tokens (sums to
        :meth:`cache_bytes`)."""
        full = self.full_layers()
        per_full = tokens * self.values_per_token_layer * kv_bytes
        return np.where(full, per_full, float(self.linear_state_bytes))

    def read_bytes_per_step(self, context: int, kv_bytes: float) -> float:
        """Bytes one decode step reads for one sequence of ``context`` tokens: its cached
        tokens (at most ``sparse_topk`` of them per full layer) and, for linear layers, the state
        read and written back (2 x state)."""
        seen = context if self.sparse_topk is None else min(context, self.sparse_topk)
        return seen * self.bytes_per_token(kv_bytes) + 2.0 * self.state_bytes

    # -- prefill compute -------------------------------------------------------------------
    def _linear_flops(self) -> float:
        if self.linear_flops_per_token is not None:
            return float(self.linear_flops_per_token)
        return 4.0 * self.q_heads * 128 * 128

    def layer_attention_flops(self, tokens: int) -> np.ndarray:
        """Attention-score FLOPs of each layer for a causal prefill of ``tokens`` tokens,
        beyond the weight GEMMs: a full layer computes ``Q K^T`` and ``P V`` over the causal half,
        ``2 x (T^2 / 2) x q_heads x (qk_dim + v_dim)`` = ``T^2 x q_heads x (qk_dim + v_dim)``
        (with ``sparse_topk`` k: ``2 x T x min(T, k) x ...`` minus nothing, an upper bound);
        a linear layer ``linear_flops_per_token x T``."""
        t = float(tokens)
        per_dim = self.q_heads * (self.qk_dim + self.v_dim)
        if self.sparse_topk is None:
            full = t * t * per_dim
        else:
            k = min(t, float(self.sparse_topk))
            full = min(2.0 * t * k, t * t) * per_dim
        return np.where(self.full_layers(), full, self._linear_flops() * t)

    def attention_flops(self, tokens: int) -> float:
        return float(self.layer_attention_flops(tokens).sum())
