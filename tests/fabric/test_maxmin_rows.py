"""maxmin_rows (the flow engine's hand-inlined solver entry) against maxmin_rates (the readable
one on a SciPy incidence matrix): the same arrays, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from podsim.fabric.maxmin import maxmin_rates, maxmin_rows


def _readable(idx, coef, capacity, caps, weights):
    """The incidence the flow engine built before maxmin_rows: one column per row of idx."""
    valid = idx >= 0
    indptr = np.r_[0, np.cumsum(valid.sum(axis=1))]
    a = sp.csc_array((coef[valid], idx[valid], indptr), shape=(capacity.size, idx.shape[0]))
    return maxmin_rates(a, capacity, caps=caps, weights=weights)


def _problem(seed: int, n_flows: int, n_links: int, k: int):
    rng = np.random.default_rng(seed)
    idx = np.full((n_flows, k), -1, dtype=np.int64)
    coef = np.zeros((n_flows, k))
    for f in range(n_flows):
        m = int(rng.integers(0, k + 1))  # 0 .. k constraints, distinct, in random order
        idx[f, :m] = rng.choice(n_links, size=m, replace=False)
        coef[f, :m] = rng.choice([1.0, 0.5, 0.25, 1.0625, 0.0], size=m)  # 0: explicit zero
    rng.shuffle(idx.T)  # padding anywhere in the row, as after a reroute
    capacity = rng.choice(
        [100e9, 400e9, 50e9, np.inf, 0.0], size=n_links, p=[0.4, 0.3, 0.2, 0.07, 0.03]
    )
    capacity = capacity * rng.uniform(0.5, 1.5, size=n_links)
    caps = np.where(rng.random(n_flows) < 0.3, rng.uniform(1e9, 400e9, n_flows), np.inf)
    weights = rng.choice([1.0, 2.0, 0.5], size=n_flows)
    return idx, coef, capacity, caps, weights


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize(
    ("n_flows", "n_links", "k"), [(1, 3, 1), (40, 10, 3), (500, 60, 6), (300, 400, 9)]
)
def test_rows_solver_gives_the_readable_solver_s_arrays_bit_for_bit(seed, n_flows, n_links, k):
    p = _problem(seed, n_flows, n_links, k)
    fast = maxmin_rows(*p)
    slow = _readable(*p)
    assert fast is not None
    assert np.array_equal(fast.rates, slow.rates)
    assert np.array_equal(fast.bottleneck, slow.bottleneck)
    assert np.array_equal(fast.link_load, slow.link_load)
    assert fast.iterations == slow.iterations


def test_rows_solver_hands_a_repeated_constraint_back_to_the_readable_path():
    idx = np.array([[0, 1, 0], [1, -1, -1]])
    coef = np.ones((2, 3))
    assert maxmin_rows(idx, coef, np.array([10.0, 10.0]), np.full(2, np.inf), np.ones(2)) is None


def test_flow_engine_rates_take_the_rows_solver_and_match_the_readable_one():
    import simpy
    from podsim.fabric.flow.sim import FlowSim

    idx, coef, capacity, caps, weights = _problem(3, 400, 50, 5)
    sim = FlowSim(simpy.Environment(), np.where(capacity > 0, capacity, 1e9), eta=0.9,
                  switch_egress=np.arange(50) % 2 == 0)  # fmt: skip
    ids = sim.add(idx, coef, np.full(400, 1e6), caps=caps, weights=weights)
    assert np.array_equal(sim._rates(ids), sim._rates_readable(ids))


@pytest.mark.parametrize("seed", range(6))
def test_flow_engine_solves_over_the_constraints_its_flows_load_alone(seed):
    """Few of many constraints loaded, ACK (control) entries that do not crowd a queue, a
    subset of the flows active: the renumbered solve gives the readable path's rates."""
    import simpy
    from podsim.fabric.flow.sim import FlowSim

    rng = np.random.default_rng(seed)
    idx, coef, capacity, caps, weights = _problem(seed, 300, 5000, 6)
    idx = np.where(idx >= 0, idx % 700 * 7, -1)  # at most 700 of 5,000 constraints
    idx = np.where((idx >= 0) & (np.arange(6) < 5)[None, :], idx, -1)  # distinct per row
    bad = np.array([len(set(r[r >= 0])) < np.count_nonzero(r >= 0) for r in idx])
    idx[bad, 1:] = -1
    ctrl = (idx >= 0) & (rng.random(idx.shape) < 0.3)
    sim = FlowSim(simpy.Environment(), np.where(capacity > 0, capacity, 1e9), eta=0.9,
                  switch_egress=rng.random(5000) < 0.5)  # fmt: skip
    ids = sim.add(idx, coef, np.full(300, 1e6), caps=caps, weights=weights, ctrl=ctrl)
    some = np.sort(rng.choice(ids, size=120, replace=False))
    for act in (ids, some):
        assert np.array_equal(sim._rates(act), sim._rates_readable(act))
    # the renumbering is not a no-op here: the active flows load few of the constraints
    assert np.unique(idx[some][idx[some] >= 0]).size <= 700
