"""One training step of an MoE transformer as an operation graph (TP x PP x EP x DP).

Ranks (Megatron-LM's order, tensor-parallel fastest): ``rank = t + TP (d + DP p)`` for tensor
rank ``t``, data-parallel rank ``d`` and pipeline stage ``p``; so a TP group is ``TP``
consecutive ranks (inside one node when TP <= GPUs per node). Expert parallelism runs inside
data parallelism: an EP group is ``EP`` data-parallel ranks with the same ``(t, p)`` and
``d // EP``; each holds ``routed_experts / EP`` experts of every MoE layer of its stage.

Per micro-batch of ``T = micro_batch_size x seq_len`` tokens, on every rank of a stage, for each
of the stage's layers (forward; the backward runs the layers in reverse, every compute twice as
long and every exchange mirrored):

1. attention (and, in a dense layer, the dense FFN): ``T x flops / TP`` at the GPU's rate;
   a TP all-reduce of the ``T x hidden`` BF16 activations when TP > 1 (Megatron's two
   all-reduces per layer, Shoeybi et al. 2019);
2. MoE layer: dispatch all-to-all in the EP group, routed + shared experts, combine
   all-to-all (BF16), a TP all-reduce. Each rank routes its ``T / TP`` tokens. The exchange
   follows the ``dispatch_mode`` (:data:`podsim.workloads.dispatch.MODES`, as the serving
   instances: :mod:`podsim.workloads.serving.exchange`): ``deepep-normal`` (the default, DeepEP's
   normal kernels as DeepSeek-V3 trains with them, arXiv 2412.19437 sec. 3.2.2) sends a token
   once to each rank holding any of its experts and routes scale-out traffic in two hops, over
   the scale-up domain and one rail, forwarding as chunks arrive (``all-to-all/pipelined``,
   when the group spans nodes with the same number of its members on each: ``gpus_per_node``);
   ``megatron-alltoall`` and
   ``deepep-low-latency`` send one copy per (token, expert), directly. FP8 with per-128 scales
   forward (plus the mode's header), BF16 backward, as DeepEP. With ``routing`` ``uniform``
   [E] (real routing is skewed, docs/physics.md) every EP pair carries the mode's expected
   count; with ``sampled`` each EP group's routing of the layer is drawn with the ``skew``
   popularity model and laid out as DeepEP's dispatch layout
   (:mod:`podsim.workloads.training.routing`), and each pair carries its own count: the
   dispatch and the backward's combine gradient toward the experts, the combine and the
   dispatch gradient the transposed counts back;
3. between stages, the ``T / TP x hidden`` BF16 activations (forward) or their gradients
   (backward) go to the same ``(t, d)`` rank of the next (previous) stage.

After the last backward, data-parallel gradient reduction as ZeRO-1 (Rajbhandari et al., SC
2020): reduce-scatter of the stage's non-expert gradients over the DP group and all-gather of the
updated BF16 parameters; expert gradients over the ``TP x DP / EP`` replicas of each expert. With
``dp_overlap`` each layer's reduction starts when the last micro-batch's backward of that layer
ended (Megatron's ``--overlap-grad-reduce``, one bucket per layer). With ``ep_overlap`` a pass
starts when the previous pass's last compute ended, not its last exchange, so one micro-batch's
trailing all-to-all overlaps the next one's compute (in the spirit of DeepSeek-V3's overlap of
two micro-batches; the GPU still runs one compute node at a time and the schedule's order
holds).

``dp_algorithm`` picks how those reductions run: ``ring`` (one flat ring over the group, NCCL's
ring: ``DP - 1`` steps of every rank, so the step's DP messages grow as DP squared) or
``hierarchical`` (:func:`podsim.workloads.collectives` ``reduce-scatter/hierarchical`` and
``all-gather/hierarchical``: reduce-scatter inside each scale-up domain first, then the ring
over the ranks with the same local index, one per node, on their own rail; the all-gather in
the reverse order): the intra-server phase, then the inter-server phase, as Huawei's HCCL runs
its collectives across servers (CANN HCCL user guide, "Algorithm Overview"), and the split of
NCCL's hierarchical all-reduce (Jeaugey, "Massively scale your deep learning training with
NCCL 2.4", NVIDIA blog 2019). NCCL's own reduce-scatter and all-gather run the flat ring (its
ring visits a node's GPUs over NVLink before leaving it, but still takes ``DP - 1`` steps), so
``ring`` stays the default. Its local size is the group's members per scale-up domain of
``gpus_per_node`` consecutive ranks (``gpus_per_node / TP`` for the dense gradients); a group
with one member per domain (the expert replicas, strided by EP) stays a ring.

Optimizer step and embedding/head are left out [E]; every constant is a parameter of
:class:`TrainingSpec`.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import numpy as np
from podsim.workloads.collectives import Collective, in_groups
from podsim.workloads.dispatch import MODES, get_mode
from podsim.workloads.gating import POPULARITY
from podsim.workloads.graph import OpGraph
from podsim.workloads.models import get_model
from podsim.workloads.precision import bytes_per_token
from podsim.workloads.training.gpu import DEFAULT_ACHIEVED, GPUS
from podsim.workloads.training.model import PROJECTIONS, LayerCost, layer_costs
from podsim.workloads.training.routing import group_layout, pair_counts
from podsim.workloads.training.schedule import schedule

__all__ = ["TrainingError", "TrainingSpec", "build_training_step"]

BF16 = 2
#: data-parallel reduction algorithms (module docstring)
DP_ALGORITHMS = ("ring", "hierarchical")
#: how the EP all-to-all's pair counts come about (module docstring)
ROUTINGS = ("uniform", "sampled")


class TrainingError(ValueError):
    """A parallelism or model setting that cannot be built; names the parameter."""

    def __init__(self, message: str, key: str) -> None:
        super().__init__(message)
        self.key = key


@dataclass(frozen=True)
class TrainingSpec:
    """One training step. ``layers`` (default: the model's) lets a study simulate fewer layers
    with the same shapes; ``precision`` picks the GPU's FP8 or BF16 peak for the GEMMs;
    ``achieved`` the fraction of that peak kernels sustain; ``grad_bytes`` the bytes per
    gradient value in the DP reduction (4: FP32, Megatron's default; 2 with
    ``--grad-reduce-in-bf16``)."""

    model: str
    gpus: int
    tp: int = 1
    pp: int = 1
    ep: int = 1
    microbatches: int = 1
    micro_batch_size: int = 1
    seq_len: int = 4096
    schedule: str = "1f1b"
    layers: int | None = None
    gpu: str = "h800"
    precision: str = "fp8"
    achieved: float = DEFAULT_ACHIEVED
    dispatch_dtype: str = "fp8"
    grad_bytes: int = 4
    ep_overlap: bool = False
    dp_overlap: bool = False
    compute_scale: float = 1.0  # multiplies every compute time (0: communication only)
    #: model chunks per pipeline stage (Megatron's virtual pipeline; None: the schedule's
    #: default, 2 for interleaved-1f1b, else 1)
    virtual_stages: int | None = None
    #: GPUs of one scale-up domain, consecutive ranks (None: one; no scale-up grouping)
    gpus_per_node: int | None = None
    #: how the DP reduce-scatter / all-gather run: "ring" or "hierarchical" (module docstring)
    dp_algorithm: str = "ring"
    #: how the EP all-to-all moves tokens (module docstring; podsim.workloads.dispatch.MODES)
    dispatch_mode: str = "deepep-normal"
    #: layers of the first / last pipeline stage when they differ from the others (Megatron's
    #: --decoder-first-pipeline-num-layers / --decoder-last-pipeline-num-layers); the middle
    #: stages split the rest evenly. None: every stage the same.
    first_stage_layers: int | None = None
    last_stage_layers: int | None = None
    #: the EP pairs' token counts: "uniform" (expected counts) or "sampled" (module docstring)
    routing: str = "uniform"
    #: routing "sampled": expert popularity (podsim.workloads.gating.POPULARITY) and its
    #: target per-rank max/mean or shape (one of the two for zipf / lognormal)
    skew: str = "uniform"
    skew_max_mean: float | None = None
    skew_shape: float | None = None
    #: routing "sampled": the seed of the draws (the scenario's)
    seed: int = 0

    @property
    def chunks(self) -> int:
        if self.virtual_stages is not None:
            return self.virtual_stages
        return 2 if self.schedule == "interleaved-1f1b" else 1

    @property
    def dp(self) -> int:
        return self.gpus // (self.tp * self.pp)

    @property
    def uneven(self) -> bool:
        return self.first_stage_layers is not None or self.last_stage_layers is not None

    def stage_layers(self, layers: int) -> list[int]:
        """Layers of each virtual stage (``pp x chunks`` of them, Megatron's order): equal
        shares, or with :attr:`first_stage_layers` / :attr:`last_stage_layers` the first and
        last stage's own and the rest split evenly over the middle stages (as Megatron-LM's
        ``--decoder-first/last-pipeline-num-layers``: ``get_num_layers_to_build`` in
        megatron/core/transformer/transformer_block.py, which also refuses them with a
        virtual pipeline). Call :meth:`check` first."""
        n = self.pp * self.chunks
        if not self.uneven:
            return [layers // n] * n
        pp = self.pp
        first = self.first_stage_layers
        last = self.last_stage_layers
        middle = pp - 2
        given = (first or 0) + (last or 0)
        # a stage left unset takes the middle stages' share
        unset = (first is None) + (last is None)
        each = (layers - given) // (middle + unset) if middle + unset else 0
        out = [each] * pp
        out[0] = each if first is None else first
        out[-1] = each if last is None else last
        return out

    def check(self) -> None:
        """Refuse a parallelism that does not fit (TrainingError naming the key)."""
        for key in ("tp", "pp", "ep", "microbatches", "micro_batch_size", "seq_len"):
            if getattr(self, key) < 1:
                raise TrainingError(f"{key} must be >= 1, got {getattr(self, key)}", key)
        if self.gpus % (self.tp * self.pp):
            raise TrainingError(
                f"tp x pp = {self.tp} x {self.pp} = {self.tp * self.pp} does not divide the "
                f"{self.gpus} GPUs",
                "pp",
            )
        if self.dp % self.ep:
            raise TrainingError(
                f"ep {self.ep} must divide the data-parallel size {self.dp} "
                f"(= {self.gpus} GPUs / (tp {self.tp} x pp {self.pp}))",
                "ep",
            )
        m = get_model(self.model)
        if m.name not in PROJECTIONS:
            raise TrainingError(
                f"model {m.name!r} has no MLA projection shape for training; known: "
                f"{', '.join(sorted(PROJECTIONS))}",
                "model",
            )
        layers = self.layers or m.layers
        if self.uneven:
            self._check_uneven(layers)
        elif layers % self.pp:
            raise TrainingError(
                f"pp {self.pp} does not divide the {layers} layers (set layers to a multiple, "
                "or first_stage_layers / last_stage_layers)",
                "pp",
            )
        if self.chunks < 1 or (not self.uneven and layers % (self.pp * self.chunks)):
            raise TrainingError(
                f"virtual_stages {self.chunks}: pp x virtual_stages = {self.pp * self.chunks} "
                f"must divide the {layers} layers",
                "virtual_stages",
            )
        try:
            schedule(self.schedule, 0, self.pp, self.microbatches, self.chunks)
        except ValueError as exc:
            key = "virtual_stages" if "chunk" in str(exc) else "microbatches"
            raise TrainingError(str(exc), key) from None
        if m.routed_experts % self.ep:
            raise TrainingError(
                f"ep {self.ep} does not divide the model's {m.routed_experts} routed experts",
                "ep",
            )
        if self.dispatch_mode not in MODES:
            raise TrainingError(
                f"unknown dispatch_mode {self.dispatch_mode!r}; known: {', '.join(MODES)}",
                "dispatch_mode",
            )
        self._check_routing()
        if self.dp_algorithm not in DP_ALGORITHMS:
            raise TrainingError(
                f"dp_algorithm must be one of {', '.join(DP_ALGORITHMS)}, got "
                f"{self.dp_algorithm!r}",
                "dp_algorithm",
            )
        if self.gpus_per_node is not None and self.gpus_per_node < 1:
            raise TrainingError(
                f"gpus_per_node must be >= 1, got {self.gpus_per_node}", "gpus_per_node"
            )
        if self.precision not in ("fp8", "bf16"):
            raise TrainingError(
                f"precision must be fp8 or bf16, got {self.precision!r}", "precision"
            )
        if not 0 < self.achieved <= 1:
            raise TrainingError(f"achieved must be in (0, 1], got {self.achieved}", "achieved")

    def _check_uneven(self, layers: int) -> None:
        """first_stage_layers / last_stage_layers fit the pipeline and the layers."""
        keys = [k for k in ("first_stage_layers", "last_stage_layers") if getattr(self, k)]
        key = keys[0] if keys else "first_stage_layers"
        for k in ("first_stage_layers", "last_stage_layers"):
            v = getattr(self, k)
            if v is not None and v < 1:
                raise TrainingError(f"{k} must be >= 1, got {v}", k)
        if self.pp < 2:
            raise TrainingError(f"{key} needs pp >= 2 (got pp {self.pp})", key)
        if self.chunks != 1:
            raise TrainingError(
                f"{key}: uneven stages need one model chunk per stage (virtual_stages 1), got "
                f"{self.chunks}",
                key,
            )
        first, last = self.first_stage_layers, self.last_stage_layers
        rest = layers - (first or 0) - (last or 0)
        share = self.pp - 2 + (first is None) + (last is None)  # stages splitting the rest
        if share == 0:
            if rest:
                raise TrainingError(
                    f"pp 2: first_stage_layers {first} + last_stage_layers {last} must be the "
                    f"{layers} layers",
                    key,
                )
            return
        if rest < share or rest % share:
            raise TrainingError(
                f"{key}: the {rest} layers left after first_stage_layers {first} and "
                f"last_stage_layers {last} do not split evenly over the other {share} stage(s) "
                f"of pp {self.pp} ({layers} layers)",
                key,
            )

    def _check_routing(self) -> None:
        if self.routing not in ROUTINGS:
            raise TrainingError(
                f"routing must be one of {', '.join(ROUTINGS)}, got {self.routing!r}", "routing"
            )
        if self.skew not in POPULARITY:
            raise TrainingError(
                f"unknown skew {self.skew!r}; known: {', '.join(POPULARITY)}", "skew.kind"
            )
        if self.routing == "uniform" and self.skew != "uniform":
            raise TrainingError(
                f"skew {self.skew!r} applies with routing 'sampled' (uniform routing sends the "
                "expected counts): set routing: sampled, or remove the skew",
                "skew.kind",
            )
        if self.routing == "sampled" and (self.micro_batch_size * self.seq_len) % self.tp:
            raise TrainingError(
                f"routing 'sampled' needs the tp {self.tp} ranks to split a micro-batch's "
                f"{self.micro_batch_size * self.seq_len} tokens evenly",
                "seq_len",
            )


def rank_of(spec: TrainingSpec, t: int, d: int, p: int) -> int:
    return t + spec.tp * (d + spec.dp * p)


def scale_up_local(group: list[int], gpus_per_node: int | None) -> int:
    """Members of ``group`` per scale-up domain of ``gpus_per_node`` consecutive ranks when the
    group is equal blocks of consecutive members, one block per domain (what a hierarchical
    collective's ``local_size`` needs); else 1 (no scale-up split)."""
    if not gpus_per_node or gpus_per_node < 2 or not group:
        return 1
    node = [r // gpus_per_node for r in group]
    local = node.count(node[0])
    if len(group) % local:
        return 1
    for i in range(0, len(group), local):
        block = node[i : i + local]
        if block.count(block[0]) != local or (i and node[i - 1] == block[0]):
            return 1
    return local


def build_training_step(spec: TrainingSpec) -> OpGraph:
    """The step's graph; ``graph.meta['training']`` carries what the metrics need (model FLOPs
    of the step, peak rate, parallelism)."""
    spec.check()
    m = get_model(spec.model)
    gpu = GPUS.get(spec.gpu)
    peak = gpu.fp8_flops if spec.precision == "fp8" else gpu.bf16_flops
    rate = peak * spec.achieved
    n_layers = spec.layers or m.layers
    costs = layer_costs(m, spec.seq_len)
    # fewer layers than the model: keep its share of dense layers (rounded), dense first
    if n_layers != m.layers:
        dense = m.layers - m.moe_layers
        k = round(n_layers * dense / m.layers)
        costs = costs[:k] + [costs[dense]] * (n_layers - k)
    v = spec.chunks
    # first layer of each virtual stage (and the end of the last)
    starts = [0]
    for k in spec.stage_layers(n_layers):
        starts.append(starts[-1] + k)
    tp, pp, dp, ep = spec.tp, spec.pp, spec.dp, spec.ep
    tokens = spec.micro_batch_size * spec.seq_len
    shard = tokens / tp  # tokens a rank routes (sequence parallel inside the TP group)
    mode = get_mode(spec.dispatch_mode)
    pair_tokens = mode.pair_copies(shard, m.routed_experts, m.top_k, ep)  # per EP peer
    scale = spec.compute_scale
    act_bytes = int(tokens * m.hidden * BF16)
    pp_bytes = int(shard * m.hidden * BF16)
    disp_tok = bytes_per_token(spec.dispatch_dtype, m.hidden, mode.header_bytes)
    bf16_tok = bytes_per_token("bf16", m.hidden)

    g = OpGraph()
    mb_count = spec.microbatches
    # (virtual stage, pass, mb) -> rank -> node: where a pass starts (entry) and ends (exit);
    # virtual stage c * pp + p is chunk c of stage p (Megatron's virtual pipeline)
    entry: dict[tuple[int, str, int], dict[int, int]] = {}
    exit_: dict[tuple[int, str, int], dict[int, int]] = {}
    # stage -> layer -> rank -> node at which the last micro-batch's backward of it ended
    grads_ready: dict[int, dict[int, dict[int, int]]] = defaultdict(dict)
    final: dict[int, dict[int, int]] = {}  # stage -> rank -> end of its last backward

    def stage_ranks(p: int) -> list[int]:
        return [rank_of(spec, t, d, p) for d in range(dp) for t in range(tp)]

    def tp_groups(p: int) -> list[list[int]]:
        return [[rank_of(spec, t, d, p) for t in range(tp)] for d in range(dp)]

    def ep_groups(p: int) -> list[list[int]]:
        return [
            [rank_of(spec, t, d, p) for d in range(blk * ep, (blk + 1) * ep)]
            for t in range(tp)
            for blk in range(dp // ep)
        ]

    def compute(r: int, seconds: float, after: int, label: str, **tags) -> int:
        node = g.compute(r, seconds * scale, (after,), label=label)  # the "compute" stream
        g.span(r, node, node, step=0, phase="compute", bytes_out=0, bytes_in=0, **tags)
        return node

    def collective(
        op: str, groups, nbytes: int, cur: dict[int, int], phase: str, algo: str = "ring",
        local: int = 1, **tags
    ):  # fmt: skip
        c = Collective(op, (), nbytes, algo, local_size=local, phase="other",
                       label=f"{phase} {op}")  # fmt: skip
        in_groups(g, c, groups, cur, span=phase, step=0, **tags)

    # routing "sampled": layer -> token counts [src, dst] of each EP group of its stage
    sampled: dict[int, list[np.ndarray]] = {}

    def layer_counts(layer: int, groups) -> list[np.ndarray]:
        if layer not in sampled:
            try:
                sampled[layer] = [
                    pair_counts(
                        group_layout(m, ep, int(shard), skew=spec.skew,
                                     target_max_mean=spec.skew_max_mean,
                                     skew_shape=spec.skew_shape, seed=spec.seed, layer=layer,
                                     group=i),
                        mode,
                    )
                    for i in range(len(groups))
                ]  # fmt: skip
            except ValueError as exc:  # an unreachable skew target
                key = "skew.max_mean" if spec.skew_max_mean is not None else "skew.exponent"
                raise TrainingError(str(exc), key) from None
        return sampled[layer]

    def a2a(tok_bytes: int, cur: dict[int, int], groups, phase: str, back: bool, **tags):
        """An EP all-to-all of the layer ``tags['layer']``: tokens toward the experts, or
        ``back`` (combine forward, dispatch backward) the same counts the other way."""
        if ep < 2:
            return
        local = scale_up_local(groups[0], spec.gpus_per_node) if mode.hierarchical else 1
        algo = mode.collective(local, ep)
        if spec.routing == "sampled":
            counts = layer_counts(tags["layer"], groups)
            mats = [(cnt.T if back else cnt) * tok_bytes for cnt in counts]
            c = Collective("all-to-all", (), 0, algo, local_size=local, phase=phase,
                           label=f"{phase}")  # fmt: skip
            in_groups(g, c, groups, cur, span=phase, matrices=mats, step=0, **tags)
            return
        # uniform routing: every EP peer gets pair_tokens copies
        pair = round(pair_tokens * tok_bytes)
        c = Collective("all-to-all", (), pair * ep, algo, local_size=local, phase=phase,
                       label=f"{phase}")  # fmt: skip
        in_groups(g, c, groups, cur, span=phase, span_bytes=pair * (ep - 1), step=0, **tags)

    hop = tp * dp  # rank distance between two consecutive pipeline stages
    deferred: list[tuple[int, int]] = []  # (virtual stage, mb): forward receives built last

    def pp_forward(vs: int, mb: int, ranks: list[int], ent: dict[int, int]) -> None:
        """Virtual stage ``vs - 1`` sends micro-batch ``mb``'s activations to ``vs``."""
        prev_exit = exit_[(vs - 1, "F", mb)]
        shift = hop * ((vs - 1) % pp - vs % pp)
        for r in ranks:
            src = r + shift  # same (t, d), previous virtual stage's physical stage
            s = g.send(src, r, pp_bytes, (prev_exit[src],), phase="other",
                       label=f"pp F mb{mb}")  # fmt: skip
            g.span(src, s, s, step=0, layer=-1, phase="pp", bytes_out=pp_bytes, bytes_in=0,
                   microbatch=mb, **{"pass": "F"})  # fmt: skip
            g.add_dep(s, ent[r])

    def chunk_layers(vs: int) -> list[tuple[int, LayerCost]]:
        return [(li, costs[li]) for li in range(starts[vs], starts[vs + 1])]

    for p in range(pp):
        ranks = stage_ranks(p)
        tp_grp, ep_grp = tp_groups(p), ep_groups(p)
        order = schedule(spec.schedule, p, pp, mb_count, v)
        # the last backward of each chunk: its layers' gradients are complete there
        last_b = {c: i for i, (k, _, c) in enumerate(order) if k == "B"}
        last_any = max(last_b.values())
        done_before: dict[int, int] = {}  # rank -> where its next pass may start
        for i, (kind, mb, c) in enumerate(order):
            vs = c * pp + p
            # without overlap a pass starts when the rank's previous pass ended, exchanges
            # included (Megatron runs them back to back); with ep_overlap when the previous
            # pass's last compute ended, so its trailing all-to-all overlaps this pass's compute.
            # A backward always follows its forward.
            ent = {}
            for r in ranks:
                deps = [done_before[r]] if r in done_before else []
                if kind == "B":
                    deps.append(exit_[(vs, "F", mb)][r])
                ent[r] = g.join(deps, rank=r, label=f"{kind} mb{mb} stage {p} rank {r}")
            entry[(vs, kind, mb)] = ent
            cur = dict(ent)
            if kind == "F" and vs > 0:
                if (vs - 1, "F", mb) in exit_:
                    pp_forward(vs, mb, ranks, ent)
                else:  # the previous virtual stage sits on a later physical stage
                    deferred.append((vs, mb))
            seq = chunk_layers(vs) if kind == "F" else chunk_layers(vs)[::-1]
            mult = 1.0 if kind == "F" else 2.0
            for layer, lc in seq:
                tags = {"layer": layer, "microbatch": mb, "pass": kind}
                attn_s = mult * tokens * (lc.attn_flops + (0 if lc.moe else lc.ffn_flops)) / tp
                for r in ranks:
                    cur[r] = compute(r, attn_s / rate, cur[r], f"attn {kind}", **tags)
                collective("all-reduce", tp_grp, act_bytes, cur, "tp", **tags)
                if lc.moe:
                    first = disp_tok if kind == "F" else bf16_tok
                    a2a(first, cur, ep_grp, "dispatch" if kind == "F" else "combine", False,
                        **tags)  # fmt: skip
                    exp_s = mult * (shard * lc.routed_flops + tokens * lc.ffn_flops / tp) / rate
                    for r in ranks:
                        cur[r] = compute(r, exp_s, cur[r], f"experts {kind}", **tags)
                    a2a(bf16_tok, cur, ep_grp, "combine" if kind == "F" else "dispatch", True,
                        **tags)  # fmt: skip
                    collective("all-reduce", tp_grp, act_bytes, cur, "tp", **tags)
                if kind == "B" and i == last_b[c]:
                    grads_ready[p][layer] = dict(cur)
            exit_[(vs, kind, mb)] = cur
            if i == last_any:
                final[p] = cur
            done_before = (
                {r: g.stream_tail(r, "compute") for r in ranks} if spec.ep_overlap else dict(cur)
            )
    for vs, mb in deferred:
        pp_forward(vs, mb, stage_ranks(vs % pp), entry[(vs, "F", mb)])
    # backward activation gradients flow to the previous virtual stage
    for vs in range(1, pp * v):
        shift = hop * ((vs - 1) % pp - vs % pp)
        for mb in range(mb_count):
            src_exit = exit_[(vs, "B", mb)]
            ent = entry[(vs - 1, "B", mb)]
            for r in stage_ranks(vs % pp):
                dst = r + shift
                s = g.send(r, dst, pp_bytes, (src_exit[r],), phase="other",
                           label=f"pp B mb{mb}")  # fmt: skip
                g.span(r, s, s, step=0, layer=-1, phase="pp", bytes_out=pp_bytes, bytes_in=0,
                       microbatch=mb, **{"pass": "B"})  # fmt: skip
                g.add_dep(s, ent[dst])
    # data-parallel gradient reduction (ZeRO-1): reduce-scatter grads, all-gather params
    for p in range(pp):
        layers = [lc for c in range(v) for _, lc in chunk_layers(c * pp + p)]
        buckets = (
            sorted(
                ((lay, [lc]) for c in range(v) for lay, lc in chunk_layers(c * pp + p)),
                key=lambda b: -b[0],
            )
            if spec.dp_overlap
            else [(None, layers)]
        )
        cur = dict(final[p]) if not spec.dp_overlap else dict(grads_ready[p][buckets[0][0]])
        dp_groups = [[rank_of(spec, t, d, p) for d in range(dp)] for t in range(tp)]
        xp_groups = [
            [rank_of(spec, t, d, p) for t in range(tp) for d in range(k, dp, ep)] for k in range(ep)
        ]
        # (groups, algorithm, local size): hierarchical where a group has several members per
        # scale-up domain and more than one domain
        kinds = []
        for groups in (dp_groups, xp_groups):
            local = scale_up_local(groups[0], spec.gpus_per_node)
            hier = spec.dp_algorithm == "hierarchical" and 1 < local < len(groups[0])
            kinds.append((groups, "hierarchical", local) if hier else (groups, "ring", 1))
        for layer, group in buckets:
            if layer is not None:
                cur = {r: g.join((grads_ready[p][layer][r], cur[r]), rank=r) for r in cur}
            dense = sum(lc.attn_params + lc.ffn_params for lc in group) // tp
            expert = sum(lc.expert_params for lc in group) * (m.routed_experts // ep)
            for (groups, algo, local), params in zip(kinds, (dense, expert), strict=True):
                if params <= 0:
                    continue
                tags = {"layer": -1 if layer is None else layer, "microbatch": -1, "pass": "B"}
                collective("reduce-scatter", groups, params * spec.grad_bytes, cur, "dp", algo,
                           local, **tags)  # fmt: skip
                collective("all-gather", groups, params * BF16, cur, "dp", algo, local, **tags)
    flops = (
        3.0
        * spec.microbatches
        * dp
        * tokens
        * sum(lc.attn_flops + lc.ffn_flops + lc.routed_flops for lc in costs)
    )
    g.meta["training"] = {
        "model_flops": flops,
        "peak_flops_per_gpu": peak,
        "gpus": spec.gpus,
        "tp": tp,
        "pp": pp,
        "dp": dp,
        "ep": ep,
        "microbatches": spec.microbatches,
        "schedule": spec.schedule,
        "virtual_stages": v,
        "layers": n_layers,
        "tokens_per_step": spec.microbatches * dp * tokens,
    }
    return g
