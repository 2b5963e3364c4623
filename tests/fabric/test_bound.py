"""The physical lower bound: closed forms, limits, and never above a simulated completion."""

from __future__ import annotations

import numpy as np
import pytest
import simpy
from podsim.fabric.bound import lower_bound
from podsim.fabric.flow import FlowSim


def test_single_link_bound_is_load_over_capacity():
    cap = np.array([100e9])
    sizes = np.array([1e6, 2e6, 3e6])
    b = lower_bound(cap, np.zeros((3, 1), int), np.ones((3, 1)), sizes, names=["L"])
    assert b.time_s == pytest.approx(8 * sizes.sum() / 100e9, rel=1e-12)
    assert b.limit == "L" and b.limit_kind == "constraint"


def test_lone_flow_sets_the_bound_with_its_latency():
    # one big flow over a slow link plus a busy fast link that carries less time
    cap = np.array([10e9, 400e9])
    idx = np.array([[0, 1], [1, -1]])
    coef = np.array([[1.0, 1.0], [1.0, 0.0]])
    sizes = np.array([1e6, 1e6])
    b = lower_bound(cap, idx, coef, sizes, latency_s=np.array([5e-6, 1e-6]))
    assert b.time_s == pytest.approx(8e6 / 10e9 + 5e-6, rel=1e-12)
    assert b.limit_kind == "flow" and b.limit_index == 0


def test_coefficients_and_caps_enter_the_bound():
    cap = np.array([400e9])
    wf = 4178 / 4096  # wire bytes per payload byte of full 4 KiB RoCE packets
    b = lower_bound(cap, [[0]], [[wf]], [4096 * 100])
    assert b.time_s == pytest.approx(8 * 4178 * 100 / 400e9, rel=1e-12)
    b2 = lower_bound(cap, [[0]], [[1.0]], [1e6], caps=[1e9])
    assert b2.time_s == pytest.approx(8e6 / 1e9, rel=1e-12)


def test_groups_merge_parallel_constraints():
    cap = np.array([100e9, 100e9])
    idx = np.array([[0], [0]])
    b = lower_bound(cap, idx, np.ones((2, 1)), [1e6, 1e6])
    merged = lower_bound(cap, idx, np.ones((2, 1)), [1e6, 1e6], groups=np.array([0, 0]))
    assert merged.time_s == pytest.approx(b.time_s / 2, rel=1e-12)


def test_empty_phase_has_zero_bound():
    b = lower_bound(np.array([1.0]), np.zeros((0, 1), int), np.zeros((0, 1)), np.zeros(0))
    assert b.time_s == 0.0


@pytest.mark.parametrize("seed", range(5))
def test_bound_never_above_simulated_completion(seed):
    rng = np.random.default_rng(seed)
    n_links, n = 12, 60
    tab = np.full((n, 3), -1)
    for i in range(n):
        k = int(rng.integers(1, 4))
        tab[i, :k] = rng.choice(n_links, k, replace=False)
    coef = np.where(tab >= 0, rng.uniform(1.0, 1.1, tab.shape), 0.0)
    sizes = rng.integers(1_000, 5_000_000, n).astype(float)
    lat = rng.uniform(0, 5e-6, n)
    cap = rng.choice([100e9, 200e9, 400e9], n_links)
    b = lower_bound(cap, tab, coef, sizes, lat)
    for eta in (1.0, 0.8):
        env = simpy.Environment()
        sim = FlowSim(env, cap, eta=eta, switch_egress=np.ones(n_links, bool))
        sim.add(tab, coef, sizes, latency_s=lat)
        env.run()
        assert b.time_s <= sim.t_deliver[:n].max() * (1 + 1e-12)
        # and each lone-flow bound is below that flow's own completion
        assert np.all(b.flow_time_s <= sim.t_deliver[:n] * (1 + 1e-12))
