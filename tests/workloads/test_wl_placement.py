from __future__ import annotations

import numpy as np
import pytest
from podsim.fabric.registry import UnknownNameError
from podsim.workloads.gating import max_mean
from podsim.workloads.placement import contiguous, make_placement, redundant, round_robin


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
