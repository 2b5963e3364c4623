"""Expert placement: which rank hosts which expert, with optional redundant replicas.

A :class:`Placement` maps ``num_experts`` logical experts onto ``num_ranks`` ranks of
``slots_per_rank`` physical expert slots each. Physical expert ``p`` lives on rank
``p // slots_per_rank``; DeepEP's ``get_dispatch_layout`` works on these physical ids.

Strategies (the ``PLACEMENTS`` registry):

- ``contiguous``: rank r hosts experts [r*E/R, (r+1)*E/R), the DeepEP / Megatron default;
- ``round-robin``: expert e on rank e mod R;
- ``redundant``: EPLB-style. ``num_redundant`` extra slots hold replicas of the hottest experts
  (greedy: each extra replica goes to the expert with the largest load per replica), then the
  physical experts are packed onto ranks heaviest first, each to the least-loaded rank with a free
  slot that does not already host that expert (DeepSeek's EPLB ``balanced_packing``).

A token routed to a replicated expert uses replica ``token_id mod replicas``, which spreads the
expert's tokens evenly over its replicas (an assumption; EPLB leaves the choice to the kernel).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from podsim.fabric.registry import Registry

__all__ = ["PLACEMENTS", "Placement", "base_rank_of_expert", "make_placement"]


@dataclass(frozen=True, eq=False)
class Placement:
    """Logical experts on ranks. ``slots[r, s]`` is the logical expert in slot s of rank r."""

    name: str
    num_experts: int
    slots: np.ndarray

    def __post_init__(self) -> None:
        slots = np.asarray(self.slots, dtype=np.int64)
        if slots.ndim != 2 or slots.size == 0:
            raise ValueError(
                f"placement slots must be a non-empty [ranks, slots] array; got {slots.shape}"
            )
        present = np.bincount(slots.ravel(), minlength=self.num_experts)
        if slots.min() < 0 or slots.max() >= self.num_experts or (present == 0).any():
            missing = np.flatnonzero(present == 0)[:5].tolist()
            raise ValueError(
                f"placement {self.name!r}: every expert 0..{self.num_experts - 1} needs a slot "
                f"(missing {missing}) and slot values must be in range"
            )
        object.__setattr__(self, "slots", slots)
        phys = slots.ravel()
        order = np.argsort(phys, kind="stable")
        object.__setattr__(self, "_replica_phys", order)
        object.__setattr__(self, "_replica_count", present)
        object.__setattr__(self, "_replica_start", np.cumsum(present) - present)

    @property
    def num_ranks(self) -> int:
        return int(self.slots.shape[0])

    @property
    def slots_per_rank(self) -> int:
        return int(self.slots.shape[1])

    @property
    def num_physical(self) -> int:
        return int(self.slots.size)

    @property
    def replicas(self) -> np.ndarray:
        """Number of physical replicas of each logical expert."""
        return self._replica_count.copy()

    def rank_of_expert(self) -> np.ndarray:
        """Rank of each logical expert's first replica."""
        return self._replica_phys[self._replica_start] // self.slots_per_rank

    def to_physical(self, topk_idx: np.ndarray, token_ids: np.ndarray | None = None) -> np.ndarray:
        """Physical expert ids for logical ``topk_idx`` [N, K] (-1 stays -1).

        ``token_ids`` (default 0..N-1) picks among replicas: replica ``token_id mod replicas``.
        """
        topk_idx = np.asarray(topk_idx, dtype=np.int64)
        valid = topk_idx >= 0
        e = np.where(valid, topk_idx, 0)
        if token_ids is None:
            token_ids = np.arange(topk_idx.shape[0], dtype=np.int64)
        pick = np.asarray(token_ids, dtype=np.int64)[:, None] % self._replica_count[e]
        phys = self._replica_phys[self._replica_start[e] + pick]
        return np.where(valid, phys, -1)

    def expert_loads(self, tokens_per_expert: np.ndarray) -> np.ndarray:
        """Per-rank load [R] when logical expert e gets ``tokens_per_expert[e]`` token copies,
        split evenly over its replicas."""
        per_replica = np.asarray(tokens_per_expert, dtype=np.float64) / self._replica_count
        return per_replica[self.slots].sum(axis=1)


PLACEMENTS: Registry[Callable[..., Placement]] = Registry("expert placement")


def _check_divides(num_experts: int, num_ranks: int) -> None:
    if num_ranks <= 0 or num_experts % num_ranks:
        raise ValueError(
            f"num_experts={num_experts} must be a positive multiple of num_ranks={num_ranks} "
            "(equal expert slots per rank)"
        )


@PLACEMENTS.register("contiguous", "rank r hosts experts [r*E/R, (r+1)*E/R) (DeepEP default)")
def contiguous(num_experts: int, num_ranks: int) -> Placement:
    _check_divides(num_experts, num_ranks)
    return Placement("contiguous", num_experts, np.arange(num_experts).reshape(num_ranks, -1))


@PLACEMENTS.register("round-robin", "expert e on rank e mod R")
def round_robin(num_experts: int, num_ranks: int) -> Placement:
    _check_divides(num_experts, num_ranks)
    return Placement("round-robin", num_experts, np.arange(num_experts).reshape(-1, num_ranks).T)


@PLACEMENTS.register("redundant", "EPLB-style replicas of the hottest experts, balanced packing")
def redundant(
    num_experts: int,
    num_ranks: int,
    num_redundant: int,
    expert_load: np.ndarray | None = None,
) -> Placement:
    """EPLB-style placement with ``num_redundant`` extra replicas chosen by ``expert_load``.

    Without a load vector every expert counts as equally hot (replicas go to the lowest ids).
    """
    total = num_experts + num_redundant
    if num_redundant < 0 or total % num_ranks:
        raise ValueError(
            f"num_experts + num_redundant = {total} must be a multiple of num_ranks={num_ranks} "
            f"(num_redundant={num_redundant} must be >= 0)"
        )
    slots_per_rank = total // num_ranks
    load = np.ones(num_experts) if expert_load is None else np.asarray(expert_load, float)
    if load.shape != (num_experts,) or (load < 0).any() or not np.isfinite(load).all():
        raise ValueError(f"expert_load must be {num_experts} finite values >= 0")
    replicas = np.ones(num_experts, dtype=np.int64)
    for _ in range(num_redundant):  # one iteration per extra replica (a few dozen)
        replicas[np.argmax(load / replicas)] += 1
    if replicas.max() > num_ranks:
        raise ValueError("more replicas of one expert than ranks; lower num_redundant")
    phys_expert = np.repeat(np.arange(num_experts), replicas)
    phys_load = (load / replicas)[phys_expert]
    rank_load = np.zeros(num_ranks)
    rank_free = np.full(num_ranks, slots_per_rank)
    hosts = np.zeros((num_ranks, num_experts), dtype=bool)
    slots = np.empty((num_ranks, slots_per_rank), dtype=np.int64)
    for p in np.argsort(-phys_load, kind="stable"):  # one per physical expert (hundreds)
        e = phys_expert[p]
        ok = rank_free > 0
        if (ok & ~hosts[:, e]).any():
            ok &= ~hosts[:, e]
        r = int(np.argmin(np.where(ok, rank_load, np.inf)))
        slots[r, slots_per_rank - rank_free[r]] = e
        rank_free[r] -= 1
        rank_load[r] += phys_load[p]
        hosts[r, e] = True
    return Placement("redundant", num_experts, slots)


def base_rank_of_expert(
    num_experts: int, num_ranks: int, placement: str = "contiguous"
) -> np.ndarray:
    """Rank of each logical expert in the base layout without replicas, for routing.

    ``round-robin``: expert e on rank e mod R. Anything else: contiguous blocks, expert e on rank
    ``e * R // E``; that is the ``contiguous`` placement when R divides E, and uneven blocks
    (some ranks host one expert more) when it does not, which a ``redundant`` placement allows
    as long as R divides E + replicas (e.g. DeepSeek-V3's 256 experts + 32 replicas at EP 144).
    """
    if num_experts <= 0 or num_ranks <= 0:
        raise ValueError(f"num_experts={num_experts} and num_ranks={num_ranks} must be positive")
    e = np.arange(num_experts, dtype=np.int64)
    if placement == "round-robin":
        return e % num_ranks
    return e * num_ranks // num_experts


def make_placement(
    name: str,
    num_experts: int,
    num_ranks: int,
    num_redundant: int = 0,
    expert_load: np.ndarray | None = None,
) -> Placement:
    """A placement by registry name; ``num_redundant``/``expert_load`` only for ``redundant``."""
    factory = PLACEMENTS.get(name)
    if factory is redundant:
        return redundant(num_experts, num_ranks, num_redundant, expert_load)
    if num_redundant:
        raise ValueError(f"num_redundant={num_redundant} needs placement 'redundant', not {name!r}")
    return factory(num_experts, num_ranks)
