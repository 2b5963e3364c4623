"""FlowSim capacity changes and re-routes (the primitives of podsim.fabric.flow.faults)."""

from __future__ import annotations

import numpy as np
import pytest
import simpy
from podsim.fabric.flow import FlowSim


def test_capacity_drop_and_repair_closed_form():
    env = simpy.Environment()
    done: dict[int, float] = {}
    sim = FlowSim(env, np.array([100e9, 100e9]), on_deliver=lambda f: done.update({f: env.now}))
    nbytes = 1_000_000
    sim.add(np.array([[0]]), np.array([[1.0]]), np.array([nbytes]))
    t1, t2 = 20e-6, 50e-6
    env.process(_at(env, t1, lambda: sim.set_capacity(np.array([0]), 0.0)))
    env.process(_at(env, t2, lambda: sim.set_capacity(np.array([0]), 50e9)))
    env.run()
    bits = 8.0 * nbytes
    assert done[0] == pytest.approx(t2 + (bits - 100e9 * t1) / 50e9, rel=1e-12)


def test_reroute_moves_a_stalled_flow():
    env = simpy.Environment()
    done: dict[int, float] = {}
    sim = FlowSim(env, np.array([0.0, 40e9]), on_deliver=lambda f: done.update({f: env.now}))
    ids = sim.add(np.array([[0]]), np.array([[1.0]]), np.array([500_000]))
    t = 10e-6
    env.process(_at(env, t, lambda: sim.reroute(ids, [[1]], [[1.0]], [[1.0]])))
    env.run()
    assert done[0] == pytest.approx(t + 8.0 * 500_000 / 40e9, rel=1e-12)


def test_negative_capacity_is_refused():
    sim = FlowSim(simpy.Environment(), np.array([1.0]))
    with pytest.raises(ValueError, match="capacity"):
        sim.set_capacity(np.array([0]), -1.0)


def _at(env: simpy.Environment, t: float, fn):
    yield env.timeout(t)
    fn()
