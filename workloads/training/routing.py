"""Sampled expert routing of a training step's EP groups: per-(source, destination) token counts.

Under ``routing: uniform`` the step's all-to-all carries the expected count of every EP pair
(:meth:`podsim.workloads.dispatch.DispatchMode.pair_copies`). ``sampled`` draws each EP group's
routing of one MoE layer with the scenario's expert-popularity model
(:mod:`podsim.workloads.gating`; production routing is skewed: TensorRT-LLM measured DeepSeek-R1
at per-rank max/mean 2.56 on EP32 without redundant experts, docs/physics.md) and lays it out
as DeepEP's ``get_dispatch_layout`` does (:func:`podsim.workloads.layout.ep_layout`, the
function the ``moe`` workload uses), giving the dispatch mode's token count per (source rank,
destination rank): ``pair_tokens`` (a token once per destination rank holding any of its
experts: ``deepep-normal``'s per-rank dedup) or ``pair_copies`` (one per (token, expert):
``megatron-alltoall``, ``deepep-low-latency``).

Experts sit in contiguous blocks on the group's ranks (DeepEP's and Megatron's default, no
redundant replicas). Randomness, as :mod:`podsim.workloads.moe`: which experts are hot comes
from ``default_rng([seed, layer])`` (the same in every EP group of the layer: one set of
weights), the tokens of EP group ``group`` from ``default_rng([seed, layer, group])``. One draw
per (layer, EP group) is shared by all micro-batches and both passes of the step [E]: a
micro-batch's own routing noise (a few per cent at 4,096 tokens per rank) is left out.

Cost: a model without a group limit (Kimi K2) draws each token's top-k straight from the
popularity's per-expert counts (:func:`podsim.workloads.gating.popularity_topk`, the experts an
unlimited gate picks; about 0.04 s of CPU for EP 16 x 4,096 tokens of 384 experts, layout
included); a model with one (DeepSeek-V3: 4 of 8 groups) goes through router logits and the
gate (:func:`podsim.workloads.moe.moe_layer`, about 1 s for the same group: tokens x experts
logits). The 10,240-GPU step of benchmarks/bench_training.py (PP 16 x EP 16 x DP 640, 16
layers) draws 640 (layer, group) routings: about 23 s for Kimi K2 (2026-12-04).
"""

from __future__ import annotations

import numpy as np
from podsim.workloads.dispatch import DispatchMode
from podsim.workloads.gating import popularity_topk
from podsim.workloads.layout import EPLayout, ep_layout
from podsim.workloads.models import MoEModel
from podsim.workloads.placement import base_rank_of_expert

__all__ = ["group_layout", "pair_counts"]


def group_layout(
    model: MoEModel,
    ep: int,
    tokens_per_rank: int,
    *,
    skew: str = "uniform",
    target_max_mean: float | None = None,
    skew_shape: float | None = None,
    seed: int = 0,
    layer: int = 0,
    group: int = 0,
) -> EPLayout:
    """The dispatch layout of one EP group's routing of one layer (module docstring): ``ep``
    ranks of ``tokens_per_rank`` tokens each, top-k of the model's routed experts with
    popularity ``skew`` (a POPULARITY name; ``target_max_mean``: per-rank load max/mean, or
    ``skew_shape``). ValueError names an unreachable skew target."""
    if model.topk_groups < model.n_groups:  # group-limited routing: the gate on logits
        from podsim.workloads.moe import moe_layer  # moe imports the kernels: only when needed

        return moe_layer(
            model,
            ep,
            tokens_per_rank,
            ep,  # one domain: no node limit, no per-node counts
            skew=skew,
            target_max_mean=target_max_mean,
            skew_shape=skew_shape,
            seed=seed,
            step=group,
            layer=layer,
        ).layout
    idx = popularity_topk(
        ep * tokens_per_rank,
        model.routed_experts,
        model.top_k,
        skew,
        target_max_mean=target_max_mean,
        shape=skew_shape,
        rank_of_expert=base_rank_of_expert(model.routed_experts, ep),
        rng=np.random.default_rng([seed, layer, group]),
        expert_rng=np.random.default_rng([seed, layer]),
    )
    return ep_layout(idx, model.routed_experts, ep, tokens_per_rank)


def pair_counts(layout: EPLayout, mode: DispatchMode) -> np.ndarray:
    """[src, dst] token copies the dispatch ``mode`` sends (int64): per-rank deduplicated
    tokens for a dedup mode, else (token, expert) copies. The diagonal is what a rank keeps."""
    counts = layout.pair_tokens if mode.dedup else layout.pair_copies
    return counts.astype(np.int64)
