"""One entry point for MoE traffic: routing -> placement -> layout -> messages -> trace.

:func:`moe_layer_trace` draws the routing of every (step, layer) of an EP group, lays it out as
DeepEP does and turns it into dispatch and combine messages for the chosen mode, with the
per-rank expert-compute time of each layer in ``attrs["compute"]`` (podsim.workloads.trace).

Randomness: the popularity model's per-expert draws (which experts are hot) come from
``default_rng([seed, layer])`` and are the same in every step; the tokens of each (step, layer)
come from ``default_rng([seed, layer, step])``. Same arguments, same trace, bit for bit.

Skew targets are calibrated against the base placement without redundant replicas (the
production figures in docs/physics.md are "without redundant experts"); a ``redundant`` placement is
then built per layer from that layer's step-0 expert loads (an oracle EPLB) and lowers the skew.
Node-limited routing counts the nodes of the base placement: a token sent to a replica on
another node can exceed the limit (as with real EPLB replicas). The base placement is
contiguous blocks (:func:`podsim.workloads.placement.base_rank_of_expert`); with ``redundant``
only ``routed experts + num_redundant`` has to be a multiple of ``ep_size`` (DeepSeek-V3's 256 +
32 = 288 at EP 144), and the base then has uneven blocks of 1 or 2 experts per rank.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from podsim.workloads.compute import DEFAULT_ACHIEVED_FLOPS, rank_compute
from podsim.workloads.deepep_kernels import DeepEPKernel
from podsim.workloads.deepep_ll import LowLatencyKernel
from podsim.workloads.deepep_metrics import DEEPEP_KINDS, deepep_rank_bytes
from podsim.workloads.dispatch import get_mode
from podsim.workloads.gating import Routing, expert_groups, gate, popularity_logits, replay_routing
from podsim.workloads.kernel_traffic import (
    DEFAULT_KERNEL_MEMORY,
    DEFAULT_SAMPLE_RANKS,
    check_against_counts,
    kernel_traffic,
    pick_ranks,
)
from podsim.workloads.layout import EPLayout, ep_layout
from podsim.workloads.models import MoEModel, get_model
from podsim.workloads.placement import Placement, base_rank_of_expert, make_placement
from podsim.workloads.precision import bytes_per_token
from podsim.workloads.trace import make_trace
from podsim.workloads.traffic import Messages, phase_messages

__all__ = ["LayerTraffic", "moe_layer", "moe_layer_trace"]

ROUTING_LIMITS = ("model", "none", "node")


@dataclass(frozen=True, eq=False)
class LayerTraffic:
    """One routed layer: the routing, the placement used and the EP-group layout."""

    routing: Routing
    placement: Placement
    layout: EPLayout
    physical_topk: np.ndarray


def _routing(
    model: MoEModel,
    num_tokens: int,
    rank_of_expert: np.ndarray,
    gpus_per_node: int,
    *,
    skew: str,
    target_max_mean: float | None,
    skew_shape: float | None,
    routing_limit: str,
    max_nodes: int | None,
    rng: np.random.Generator,
    expert_rng: np.random.Generator,
) -> Routing:
    logits = popularity_logits(
        num_tokens,
        model.routed_experts,
        model.top_k,
        skew,
        target_max_mean=target_max_mean,
        shape=skew_shape,
        rank_of_expert=rank_of_expert,
        rng=rng,
        expert_rng=expert_rng,
    )
    groups = max_groups = None
    if routing_limit == "model" and model.topk_groups < model.n_groups:
        groups, max_groups = expert_groups(model.routed_experts, model.n_groups), model.topk_groups
    elif routing_limit == "node":
        groups = rank_of_expert // gpus_per_node
        max_groups = max_nodes if max_nodes is not None else model.topk_groups
    elif routing_limit not in ROUTING_LIMITS:
        raise ValueError(
            f"routing_limit {routing_limit!r}: expected one of {', '.join(ROUTING_LIMITS)}"
        )
    return gate(
        logits,
        model.top_k,
        scoring=model.scoring,
        groups=groups,
        max_groups=max_groups,
        norm_topk_prob=model.norm_topk_prob,
        scaling=model.routed_scaling,
    )


def moe_layer(
    model: str | MoEModel,
    ep_size: int,
    tokens_per_rank: int,
    gpus_per_node: int,
    *,
    skew: str = "uniform",
    target_max_mean: float | None = None,
    skew_shape: float | None = None,
    routing: np.ndarray | None = None,
    routing_limit: str = "model",
    max_nodes: int | None = None,
    placement: str = "contiguous",
    num_redundant: int = 0,
    seed: int = 0,
    step: int = 0,
    layer: int = 0,
    redundant_load: np.ndarray | None = None,
) -> LayerTraffic:
    """Route one (step, layer) of an EP group and lay it out (see :func:`moe_layer_trace`).

    ``routing`` replays recorded expert ids [ep_size * tokens_per_rank, k] instead of drawing.
    ``redundant_load`` is the per-expert load a ``redundant`` placement balances (default:
    this layer's own counts).
    """
    m = get_model(model)
    if ep_size <= 0 or tokens_per_rank < 0 or gpus_per_node <= 0:
        raise ValueError(
            f"ep_size ({ep_size}) and gpus_per_node ({gpus_per_node}) must be > 0 and "
            f"tokens_per_rank ({tokens_per_rank}) >= 0"
        )
    n = ep_size * tokens_per_rank
    # the layout without replicas that routing sees (node limits, skew calibration); uneven
    # contiguous blocks when only the physical + redundant count divides ep_size
    base_rank = base_rank_of_expert(m.routed_experts, ep_size, placement)
    if routing is not None:
        r = replay_routing(np.asarray(routing), m.routed_experts)
        if r.num_tokens != n:
            raise ValueError(
                f"replayed routing has {r.num_tokens} tokens; "
                f"expected ep_size x tokens_per_rank = {n}"
            )
    else:
        r = _routing(
            m,
            n,
            base_rank,
            gpus_per_node,
            skew=skew,
            target_max_mean=target_max_mean,
            skew_shape=skew_shape,
            routing_limit=routing_limit,
            max_nodes=max_nodes,
            rng=np.random.default_rng([seed, layer, step]),
            expert_rng=np.random.default_rng([seed, layer]),
        )
    if placement == "redundant":
        load = r.expert_counts() if redundant_load is None else redundant_load
        pl = make_placement("redundant", m.routed_experts, ep_size, num_redundant, load)
    else:
        pl = make_placement(placement, m.routed_experts, ep_size, num_redundant)
    phys = pl.to_physical(r.topk_idx)
    lay = ep_layout(phys, pl.num_physical, ep_size, tokens_per_rank, gpus_per_node)
    return LayerTraffic(r, pl, lay, phys)


def moe_layer_trace(
    model: str | MoEModel,
    ep_size: int,
    tokens_per_rank: int,
    gpus_per_node: int,
    mode: str = "deepep-normal",
    *,
    skew: str = "uniform",
    target_max_mean: float | None = None,
    skew_shape: float | None = None,
    routing: str | Path | np.ndarray | None = None,
    routing_limit: str = "model",
    max_nodes: int | None = None,
    placement: str = "contiguous",
    num_redundant: int = 0,
    seed: int = 0,
    layers: int = 1,
    steps: int = 1,
    dispatch_dtype: str = "fp8",
    combine_dtype: str = "bf16",
    achieved_flops: float = DEFAULT_ACHIEVED_FLOPS,
    compute_overhead_s: float = 0.0,
    allow_nvlink_for_low_latency_mode: bool = True,
    traffic_source: str = "auto",
    kernel_memory: int = DEFAULT_KERNEL_MEMORY,
    kernel_sample_ranks: int = DEFAULT_SAMPLE_RANKS,
    deepep_kernel: DeepEPKernel | None = None,
    ll_kernel: LowLatencyKernel | None = None,
) -> pd.DataFrame:
    """Dispatch and combine messages of ``layers`` MoE layers x ``steps`` steps of an EP group.

    ``model``: a MODELS name or MoEModel. Ranks 0..ep_size-1, ``gpus_per_node`` per scale-up
    domain. ``mode``: a dispatch MODES name. ``skew``: a POPULARITY name with either
    ``target_max_mean`` (per-rank load max/mean) or ``skew_shape``. ``routing``: replay recorded
    expert ids (.npy path or array [tokens, k], or [layers, tokens, k]). ``routing_limit``:
    'model' (the model's group limit), 'none', or 'node' (at most ``max_nodes`` nodes per
    token, default the model's topk_groups). ``placement``: a PLACEMENTS name. Dtypes: wire
    formats of dispatch and combine (podsim.workloads.precision). Compute: podsim.workloads.compute.
    ``allow_nvlink_for_low_latency_mode``: DeepEP's Buffer argument; for
    ``deepep-low-latency`` True (default, as DeepEP's Buffer) sends same-node messages over the
    scale-up domain, False sends every message to another rank over RDMA
    (podsim.workloads.traffic). ``traffic_source``: where the messages come from
    (podsim.workloads.kernel_traffic): ``kernels`` runs the dispatch and combine kernels of
    every rank on real tensors (at most ``kernel_memory`` bytes of buffers) and reads the
    messages from their buffers; ``counts`` derives them from the layout; ``auto`` is
    ``kernels`` when it fits, else the counts checked against the kernels on
    ``kernel_sample_ranks`` source ranks of every (step, layer). ``deepep_kernel``: DeepEP's
    channels and RDMA chunks; given, a ``deepep-normal`` trace over several nodes follows
    DeepEP's pipelined kernels (chunk rounds in column ``chunk``,
    podsim.workloads.deepep_kernels); None: one message per pair and stage. ``ll_kernel``:
    the GPU-side time of DeepEP's low-latency kernels beyond their messages
    (podsim.workloads.deepep_ll), for ``deepep-low-latency`` only; None: none.

    Returns a validated trace (podsim.workloads.trace) whose attrs also hold the routing statistics
    ``avg_ranks_per_token``, ``avg_nodes_per_token`` and ``rank_load_max_mean`` (means over all
    layers and steps), ``traffic_source`` ('kernels' or 'counts') with ``kernel_ranks`` (the
    source ranks whose messages the kernels produced or checked, per layer), the per-rank
    compute times and ``deepep_bytes``: the bytes DeepEP's test
    scripts count per rank (podsim.workloads.deepep_metrics), arrays [step, layer, rank] keyed
    ``dispatch_rdma``, ``dispatch_nvl``, ``combine_rdma``, ``combine_nvl`` (NaN: not counted);
    with ``ll_kernel`` in ``deepep-low-latency`` mode also ``kernel_tail``: the seconds each
    rank's phase lasts after its last message, arrays [step, layer, rank] keyed ``dispatch`` and
    ``combine`` (podsim.scenarios.execution.timeline).
    """
    m = get_model(model)
    mode_ = get_mode(mode)
    if layers <= 0 or steps <= 0:
        raise ValueError(f"layers ({layers}) and steps ({steps}) must be >= 1")
    recorded = None
    if routing is not None:
        recorded = np.load(routing) if isinstance(routing, (str, Path)) else np.asarray(routing)
        if recorded.ndim == 2:
            recorded = np.broadcast_to(recorded, (layers, *recorded.shape))
        if recorded.ndim != 3 or recorded.shape[0] != layers:
            raise ValueError(
                f"routing must be [tokens, k] or [layers={layers}, tokens, k]; got {recorded.shape}"
            )
    bpt_d = bytes_per_token(dispatch_dtype, m.hidden)
    bpt_c = bytes_per_token(combine_dtype, m.hidden)
    shape = (steps, layers, ep_size)
    comp = {
        "seconds": np.zeros(shape),
        "flops": np.zeros(shape),
        "token_copies": np.zeros(shape, np.int64),
    }
    deepep = {
        f"{ph}_{kind}": np.full(shape, np.nan)
        for ph in ("dispatch", "combine")
        for kind in DEEPEP_KINDS
    }
    tails = (
        {ph: np.zeros(shape) for ph in ("dispatch", "combine")}
        if ll_kernel is not None and mode_.name == "deepep-low-latency"
        else None
    )
    parts: list[tuple[int, int, str, Messages]] = []
    stats: dict[str, list[float]] = {}
    loads: dict[int, np.ndarray] = {}
    kernel_ranks = ep_size
    for st in range(steps):  # one pass per (step, layer): each is a whole vectorised layer
        for ly in range(layers):
            lt = moe_layer(
                m,
                ep_size,
                tokens_per_rank,
                gpus_per_node,
                skew=skew,
                target_max_mean=target_max_mean,
                skew_shape=skew_shape,
                routing=None if recorded is None else recorded[ly],
                routing_limit=routing_limit,
                max_nodes=max_nodes,
                placement=placement,
                num_redundant=num_redundant,
                seed=seed,
                step=st,
                layer=ly,
                redundant_load=loads.get(ly),
            )
            loads.setdefault(ly, lt.routing.expert_counts())
            for k, v in lt.layout.stats().items():
                stats.setdefault(k, []).append(v)
            lay, rows = lt.layout, {"dispatch": bpt_d, "combine": bpt_c}
            ranks = pick_ranks(
                lay, mode_, traffic_source, kernel_memory, kernel_sample_ranks, bpt_d, m.hidden
            )
            kernel_ranks = min(kernel_ranks, 0 if ranks is None else len(ranks))
            if ranks is not None:
                kt = kernel_traffic(
                    lay,
                    lt.physical_topk,
                    lt.placement.num_physical,
                    mode_,
                    ranks,
                    dispatch_dtype,
                    combine_dtype,
                    m.hidden,
                )
                check_against_counts(kt, lay, bpt_d, bpt_c)
                if len(ranks) == ep_size:  # every message from the kernels' buffers
                    lay = kt.layout
                    rows = {"dispatch": kt.dispatch_row, "combine": kt.combine_row}
            for phase, bpt in rows.items():
                msgs = phase_messages(
                    lay,
                    mode_,
                    phase,
                    bpt,
                    allow_nvlink_for_low_latency_mode=allow_nvlink_for_low_latency_mode,
                    kernel=deepep_kernel,
                )
                parts.append((st, ly, phase, msgs))
                for kind, v in deepep_rank_bytes(lay, mode_, phase, bpt).items():
                    deepep[f"{phase}_{kind}"][st, ly] = v
                if tails is not None and ll_kernel is not None:
                    tails[phase][st, ly] = ll_kernel.tail_s(
                        phase,
                        lay.pair_copies.sum(axis=1),
                        np.full(ep_size, tokens_per_rank),
                        rows["combine"],
                    )
            (comp["token_copies"][st, ly], comp["flops"][st, ly], comp["seconds"][st, ly]) = (
                rank_compute(
                    lt.layout.layout.num_tokens_per_expert,
                    lt.placement.slots_per_rank,
                    m.hidden,
                    m.moe_ffn,
                    achieved_flops,
                    compute_overhead_s,
                )
            )
    comp["steps"], comp["layers"] = np.arange(steps), np.arange(layers)
    deepep["steps"], deepep["layers"] = comp["steps"], comp["layers"]
    sizes = [len(p[3]) for p in parts]

    def per_part(i: int) -> np.ndarray:
        return np.repeat(np.array([p[i] for p in parts], dtype=object if i == 2 else None), sizes)

    def per_message(field: str) -> np.ndarray:
        return np.concatenate([getattr(p[3], field) for p in parts])

    return make_trace(
        step=per_part(0),
        layer=per_part(1),
        phase=per_part(2),
        src_rank=per_message("src"),
        dst_rank=per_message("dst"),
        bytes=per_message("bytes"),
        tokens=per_message("tokens"),
        hop=per_message("hop"),
        stage=per_message("stage"),
        chunk=per_message("chunk") if deepep_kernel is not None and mode_.hierarchical else None,
        final=per_message("final") if mode_.hierarchical else None,
        num_ranks=ep_size,
        gpus_per_node=gpus_per_node,
        workload="moe",
        model=m.name,
        mode=mode_.name,
        skew=skew if recorded is None else "replay",
        target_max_mean=target_max_mean,
        placement=placement,
        num_redundant=num_redundant,
        tokens_per_rank=tokens_per_rank,
        seed=seed,
        dispatch_dtype=dispatch_dtype,
        combine_dtype=combine_dtype,
        dispatch_bytes_per_token=bpt_d,
        combine_bytes_per_token=bpt_c,
        achieved_flops=achieved_flops,
        allow_nvlink_for_low_latency_mode=bool(allow_nvlink_for_low_latency_mode),
        traffic_source="kernels" if kernel_ranks == ep_size else "counts",
        kernel_ranks=kernel_ranks,
        **{k: float(np.mean(v)) for k, v in stats.items()},
        compute=comp,
        deepep_bytes=deepep,
        **(
            {}
            if tails is None
            else {"kernel_tail": {"steps": comp["steps"], "layers": comp["layers"], **tails}}
        ),
    )
