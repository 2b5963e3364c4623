from __future__ import annotations

import numpy as np
import pytest
from podsim.fabric.registry import UnknownNameError
from podsim.workloads.gating import max_mean
from podsim.workloads.placement import (
    base_rank_of_expert,
    contiguous,
    make_placement,
    redundant,
    round_robin,
)


def test_contiguous_and_round_robin():
    c = contiguous(16, 4)
    np.testing.assert_array_equal(c.rank_of_expert(), np.arange(16) // 4)
    rr = round_robin(16, 4)
    np.testing.assert_array_equal(rr.rank_of_expert(), np.arange(16) % 4)
    idx = np.array([[0, 5], [15, -1]])
    np.testing.assert_array_equal(c.to_physical(idx), idx)
    phys = rr.to_physical(idx)
    np.testing.assert_array_equal(
        np.where(idx >= 0, phys // rr.slots_per_rank, -1), np.where(idx >= 0, idx % 4, -1)
    )


def test_redundant_replicates_hottest_and_balances():
    load = np.array([100.0, 1, 1, 1, 1, 1, 1, 50])
    pl = redundant(8, 4, 4, load)
    assert pl.slots.shape == (4, 3)
    reps = pl.replicas
    # greedy on load per replica: e0 100->50, e0 50 (tie, lower id)->33.3, e7 50->25, e0 ->25
    assert reps.sum() == 12 and reps[0] == 4 and reps[7] == 2
    # replicas of one expert on distinct ranks
    for e in (0, 7):
        assert len(set(np.flatnonzero((pl.slots == e).any(axis=1)))) == reps[e]
    assert max_mean(pl.expert_loads(load)) < max_mean(contiguous(8, 4).expert_loads(load))


def test_replica_choice_spreads_tokens_evenly():
    pl = redundant(8, 4, 4, np.array([100.0, 60, 1, 1, 1, 1, 1, 1]))  # e0: 4 replicas
    idx = np.zeros((300, 1), dtype=np.int64)  # every token wants expert 0
    phys = pl.to_physical(idx).ravel()
    per_replica = np.bincount(phys, minlength=pl.num_physical)
    used = per_replica[per_replica > 0]
    assert len(used) == pl.replicas[0] and (used == 300 // pl.replicas[0]).all()
    assert (pl.slots.ravel()[phys] == 0).all()


def test_placement_errors():
    with pytest.raises(ValueError, match="multiple of num_ranks"):
        contiguous(10, 4)
    with pytest.raises(ValueError, match="num_redundant"):
        redundant(8, 4, 2)
    with pytest.raises(ValueError, match="needs placement 'redundant'"):
        make_placement("contiguous", 8, 4, num_redundant=4)
    with pytest.raises(UnknownNameError, match="round-robin"):
        make_placement("round-robbin", 8, 4)


def test_eplb_deepseek_v3_at_ep144_with_32_replicas_places_every_expert() -> None:
    # 256 + 32 = 288 = 2 x 144: accepted although 144 does not divide 256 (issue 16)
    load = np.random.default_rng(3).gamma(0.7, size=256)
    pl = redundant(256, 144, 32, load)
    assert pl.slots.shape == (144, 2)  # every rank holds the same number of slots
    present = np.bincount(pl.slots.ravel(), minlength=256)
    assert (present >= 1).all() and present.sum() == 288  # every expert placed at least once
    np.testing.assert_array_equal(present, pl.replicas)
    # replicas of one expert sit on distinct ranks
    for e in np.flatnonzero(present > 1):
        assert (pl.slots == e).any(axis=1).sum() == present[e]
    # every physical slot is reachable from its logical expert
    idx = np.repeat(np.arange(256), 16)[:, None]
    phys = pl.to_physical(idx, np.tile(np.arange(16), 256)).ravel()
    assert np.unique(phys).size == 288


def test_eplb_refuses_slot_counts_that_do_not_divide() -> None:
    with pytest.raises(ValueError, match="287 must be a multiple of num_ranks=144"):
        redundant(256, 144, 31)


def test_base_layout_is_contiguous_when_it_divides_and_uneven_blocks_otherwise() -> None:
    np.testing.assert_array_equal(
        base_rank_of_expert(256, 16), contiguous(256, 16).rank_of_expert()
    )
    np.testing.assert_array_equal(
        base_rank_of_expert(16, 4, "round-robin"), round_robin(16, 4).rank_of_expert()
    )
    b = base_rank_of_expert(256, 144)
    counts = np.bincount(b, minlength=144)
    assert (np.diff(b) >= 0).all() and set(counts.tolist()) == {1, 2} and counts.sum() == 256


def test_moe_layer_at_ep144_with_32_replicas() -> None:
    from podsim.workloads.moe import moe_layer

    lt = moe_layer("deepseek-v3", 144, 4, 8, placement="redundant", num_redundant=32)
    assert lt.placement.num_physical == 288 and lt.placement.slots_per_rank == 2
    assert (lt.placement.replicas >= 1).all()
