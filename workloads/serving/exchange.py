"""Communication inside a serving instance: TP all-reduces and the MoE layers' EP exchanges.

An instance of ``n`` ranks runs attention data-parallel over ``n / tp`` groups of ``tp``
consecutive ranks (tensor-parallel inside a group, sequence-parallel for the MoE input, as the
training step: :mod:`podsim.workloads.training.step`) and its routed experts expert-parallel
over all ``n`` ranks (DeepSeek-V3's deployment: attention TP/DP, MoE EP over the instance;
arXiv 2412.19437 sec. 3.4). Per layer, for ``T`` tokens of the instance (a prompt's tokens in
prefill, one per resident sequence in decode), each rank routes ``T / n`` of them:

- ``tp > 1``: two ring all-reduces of the ``T x tp / n`` tokens' BF16 activations
  (``T tp / n x hidden x 2`` bytes) in each TP group, after attention and after the MoE
  (Megatron's two all-reduces per layer, Shoeybi et al. 2019);
- MoE layers, with the dispatch mode of the phase (:data:`podsim.workloads.dispatch.MODES`;
  prefill: ``deepep-normal``, decode: ``deepep-low-latency``, DeepEP's split of the two,
  github:deepseek-ai/DeepEP README): dispatch of each rank's tokens to every EP peer, then
  combine back, one message per rank pair and phase. Routing is uniform [E] (real routing is
  skewed, docs/physics.md), so every pair carries the expected count:
  ``T / n x k / n`` (token, expert) copies without deduplication (low latency: one message
  per (token, expert)), ``T / n x P(rank)`` tokens with it (normal mode: once per rank holding
  any of the token's experts, ``P(rank) = 1 - C(E - E/n, k) / C(E, k)`` for ``k`` of ``E``
  experts drawn uniformly without replacement, ``E / n`` per rank). Bytes per copy:
  :func:`podsim.workloads.precision.bytes_per_token` of the activations' type (FP8 with its
  scales for FP8 activations, else BF16) plus the mode's header for dispatch, BF16 for combine
  (docs/physics.md, MoE section). The normal mode's exchange is two-hop (scale-up and
  rails, the second hop forwarding as the first delivers: ``all-to-all/pipelined`` of
  :mod:`podsim.workloads.collectives`, as in the training step) when the instance spans
  several nodes; the low-latency one is direct (``all-to-all/direct``).

Overlap: with ``microbatches`` = 2 a compute block runs as two micro-batches of half the tokens,
the exchanges of one overlapping the other's compute (DeepSeek-V3's prefill: "we
simultaneously process two micro-batches with similar computational workloads, overlapping the
attention and MoE of one micro-batch with the dispatch and combine of another", arXiv
2412.19437 sec. 3.4.1). On a merged block this is coarser than per layer: the first
micro-batch's dispatch overlaps the second's attention part, its combine the second's experts'
part, and the second's combine is exposed.

Graph size: one exchange per layer and decode step of every request is far too many messages
(a 32-rank instance: 992 per all-to-all, 124 all-to-alls per step of a 62-MoE-layer model). The
builder merges the exchanges of consecutive layers of one compute block (a prefill's group of
``stream_layers`` layers, or up to ``exchange_steps`` decode steps with the same batch) into one
message per rank pair and phase carrying their summed bytes. Nothing overlaps inside a block
(layer ``l + 1`` waits for layer ``l``'s combine), so on an idle fabric the merged message
loses only the per-message latency of the ``K - 1`` exchanges it absorbed (a message takes
``b / B + a``; ``K`` of them in sequence ``K b / B + K a``, one merged ``K b / B + a``): the
builder puts it back as a wait of ``(K - 1) x rounds x exchange_latency`` before the merged
exchange (``rounds``: the collective's sequential message rounds, 1 direct, 2 pipelined,
``2 (tp - 1)`` for a ring all-reduce; ``exchange_latency`` [E] a scenario parameter). Under
contention a merged exchange moves the block's bytes in one burst at its end instead of
spread over its layers and steps: its bandwidth share is right, its timing coarser by up to one
block.
"""

from __future__ import annotations

from collections.abc import MutableMapping, Sequence
from dataclasses import dataclass

from podsim.workloads.collectives import Collective, in_groups
from podsim.workloads.dispatch import DispatchMode, get_mode
from podsim.workloads.graph import OpGraph
from podsim.workloads.precision import bytes_per_token
from podsim.workloads.serving.models import ServingModel

__all__ = ["InstanceComm", "exchange_block"]

BF16 = 2


@dataclass(frozen=True)
class InstanceComm:
    """What one instance's layers exchange (module docstring): ``ranks`` GPUs, attention TP
    groups of ``tp``, ``local_size`` GPUs per node (the hierarchical exchange's scale-up
    group), ``mode`` the dispatch mode, ``activations`` the dispatch's wire type,
    ``microbatches`` how many parts a compute block is split into to overlap one part's
    exchanges with another's compute."""

    model: ServingModel
    ranks: int
    tp: int = 1
    local_size: int = 1
    mode: str = "deepep-low-latency"
    activations: str = "fp8"
    microbatches: int = 1

    def __post_init__(self) -> None:
        if self.microbatches < 1:
            raise ValueError(f"microbatches must be >= 1; got {self.microbatches}")
        if self.tp < 1 or self.ranks % self.tp:
            raise ValueError(f"tp {self.tp} must divide the instance's {self.ranks} ranks")
        if self.local_size < 1 or self.ranks % self.local_size:
            raise ValueError(
                f"local_size {self.local_size} must divide the instance's {self.ranks} ranks"
            )

    @property
    def dispatch_mode(self) -> DispatchMode:
        return get_mode(self.mode)

    @property
    def algorithm(self) -> str:
        """The EP all-to-all's algorithm (:meth:`DispatchMode.collective`)."""
        return self.dispatch_mode.collective(self.local_size, self.ranks)

    @property
    def rounds(self) -> int:
        """Sequential message rounds of one all-to-all (module docstring)."""
        return 2 if self.algorithm == "pipelined" else 1

    def moe_layers(self, first: int, last: int) -> int:
        """MoE layers among layers ``first .. last - 1`` (the dense layers come first, as in
        DeepSeek-V3 and Kimi K2)."""
        dense = self.model.layers - self.model.moe.moe_layers
        return max(0, last - max(first, dense))

    def pair_bytes(self, tokens: float) -> tuple[float, float]:
        """(dispatch, combine) bytes one rank sends one EP peer in one MoE layer for ``tokens``
        tokens of the instance (fractional: expected values)."""
        moe, n, m = self.model.moe, self.ranks, self.dispatch_mode
        copies = m.pair_copies(tokens / n, moe.routed_experts, moe.top_k, n)
        dtype = "fp8" if self.activations == "fp8" else "bf16"
        return (
            copies * bytes_per_token(dtype, moe.hidden, m.header_bytes),
            copies * bytes_per_token("bf16", moe.hidden),
        )

    def tp_bytes(self, tokens: float) -> float:
        """Buffer of one TP all-reduce (per rank) in one layer for ``tokens`` tokens."""
        return tokens * self.tp / self.ranks * self.model.moe.hidden * BF16

    def estimate_s(self, tokens: float, moe_layers: int, layers: int, rate: float,
                   latency: float) -> float:  # fmt: skip
        """Idle-fabric estimate of the exposed exchanges of ``layers`` layers (``moe_layers``
        of them MoE) for the planner: every message of a phase leaves a rank's NIC one after
        the other at ``rate`` bytes/s, ``latency`` per round; with micro-batches only the last
        one's share is counted (the others overlap compute)."""
        t = 0.0
        if self.ranks > 1 and moe_layers:
            d, c = self.pair_bytes(tokens)
            t += moe_layers * ((d + c) * (self.ranks - 1) / rate + 2 * self.rounds * latency)
        if self.tp > 1 and layers:
            steps = 2 * (self.tp - 1)
            t += 2 * layers * steps * (self.tp_bytes(tokens) / self.tp / rate + latency)
        return t / self.microbatches


def exchange_block(
    g: OpGraph,
    comm: InstanceComm,
    ranks: Sequence[int],
    cur: MutableMapping[int, int],
    *,
    attn_s: float,
    expert_s: float,
    tokens: float,
    layers: int,
    moe_layers: int,
    merged: int,
    exchange_latency: float,
    stream: str,
    label: str,
) -> dict[int, int]:
    """One compute block of an instance on every one of its ``ranks`` (module docstring):
    ``attn_s`` of compute, the TP all-reduce and EP dispatch of ``layers`` layers (``moe_layers``
    MoE) for ``tokens`` tokens each, ``expert_s`` of compute, the combine and the second TP
    all-reduce. ``merged`` is how many steps the block stands for (each exchange is merged over
    ``merged x layers``). With ``comm.microbatches`` = ``m`` > 1 the block's tokens and compute
    are split into ``m`` micro-batches: the GPU runs their attention parts, then their experts'
    parts, and each micro-batch's exchanges wait only for its own compute, so they overlap the
    others' compute (module docstring). Every rank enters after ``cur[r]``; ``cur`` is updated
    to where each rank is done. Returns rank -> its first attention compute node (where the
    block starts)."""
    n_mb = comm.microbatches
    tok = tokens / n_mb
    chains = [dict(cur) for _ in range(n_mb)]  # per micro-batch: rank -> its last node
    starts: dict[int, int] = {}
    tp_groups = [list(ranks[i : i + comm.tp]) for i in range(0, len(ranks), comm.tp)]
    ep = [list(ranks)]

    def wait(ch: dict[int, int], count: int, rounds: int) -> None:
        extra = (count - 1) * rounds * exchange_latency
        if extra > 0:
            for r in ranks:
                ch[r] = g.join((ch[r],), rank=r, delay_s=extra, label=f"{label} latency")

    def all_reduce(ch: dict[int, int]) -> None:
        k = merged * layers
        c = Collective("all-reduce", (), round(k * comm.tp_bytes(tok)), label=f"{label} tp")
        if comm.tp > 1 and c.nbytes > 0:
            wait(ch, k, 2 * (comm.tp - 1))
            in_groups(g, c, tp_groups, ch)

    def all_to_all(ch: dict[int, int], pair: float, phase: str) -> None:
        k = merged * moe_layers
        nbytes = round(k * pair) * len(ranks)
        c = Collective("all-to-all", (), nbytes, comm.algorithm, local_size=comm.local_size,
                       phase=phase, label=f"{label} {phase}")  # fmt: skip
        if k and c.nbytes > 0:
            wait(ch, k, comm.rounds)
            in_groups(g, c, ep, ch)

    dispatch, combine = comm.pair_bytes(tok)
    # the GPU runs the micro-batches' attention parts, then their experts' parts, in order
    # (one stream); each micro-batch's exchanges wait only for its own compute
    for m, ch in enumerate(chains):
        for r in ranks:
            ch[r] = g.compute(r, attn_s / n_mb, (ch[r],), stream=stream,
                              label=f"{label} attn mb{m}")  # fmt: skip
            starts.setdefault(r, ch[r])
    for ch in chains:
        all_reduce(ch)
        all_to_all(ch, dispatch, "dispatch")
    for m, ch in enumerate(chains):
        for r in ranks:
            ch[r] = g.compute(r, expert_s / n_mb, (ch[r],), stream=stream,
                              label=f"{label} experts mb{m}")  # fmt: skip
        all_to_all(ch, combine, "combine")
        all_reduce(ch)
    for r in ranks:
        cur[r] = chains[0][r] if n_mb == 1 else g.join([ch[r] for ch in chains], rank=r)
    return starts
