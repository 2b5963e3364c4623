"""The steady-state fast-forward on the NIC transport (podsim.nic.fastforward): agreement with
the full run with every invariant holding, and the planner's refusals: never across a pending
release, never with congestion feedback in flight or before a binding CC timer, never with an
event of unknown kind pending."""

from __future__ import annotations

import math

import numpy as np
import pytest
import simpy
from podsim.fabric.invariants import Checker
from podsim.fabric.kernel import call_at
from podsim.fabric.network import Network
from podsim.fabric.packet import CNP, ROCE_OVERHEAD
from podsim.fabric.topology import build_topology
from podsim.nic.fastforward import BLOCK, INTERNAL, NEUTRAL, SHIFT, FastForward
from podsim.nic.nic import NicConfig, RdmaNetwork
from podsim.nic.transport.qp import RdmaPacket
from podsim.scenarios.execution.faults import RdmaEndpoints

SIZE = 3 << 20  # bytes per message: a steady stretch of ~400 us


def all_to_all(ff: bool, *, hold: bool = False, cc: str = "none"):
    """8 hosts on two leaves, every NIC sends SIZE to every other: 7 QPs per NIC share it."""
    env = simpy.Environment()
    net = Network(env, build_topology("leaf-spine", hosts_per_leaf=4, leaves=2), seed=1)
    rdma = RdmaNetwork(net, NicConfig(cc=cc, selector="spray"), seed=1)
    for a in range(8):
        for b in range(8):
            if a != b:
                rdma.post(a, b, SIZE)
    f = None
    if ff:
        f = FastForward(env, rdma)
        if hold:  # plan, but never jump: the tests call plan() themselves
            f._jump = lambda *_a: None  # type: ignore[method-assign]
        f.wake()
    return env, net, rdma, f


def test_agrees_with_the_full_run_and_every_invariant_holds():
    _, _, full_rdma, _ = all_to_all(False)
    t_full = full_rdma.run()
    _, net, rdma, ff = all_to_all(True)
    checker = Checker(net, endpoints=[RdmaEndpoints(rdma)])
    rdma.run()
    checker.check_all(final=True)  # conservation, queues, delivery: nothing appeared or vanished
    assert ff.jumps >= 1 and ff.skipped_packets > 0
    t_fast = ff.now()
    assert abs(t_fast - t_full) <= 0.02 * t_full
    done_full = np.array([m.done_s for m in full_rdma.messages])
    done_fast = ff.virt(np.array([m.done_s for m in rdma.messages]))
    assert np.all(np.abs(done_fast - done_full) <= 0.02 * t_full)
    # every byte was accounted once: what the QPs count as sent equals what was posted
    posted = sum(m.size for m in rdma.messages)
    assert sum(q.rx.rel.delivered_bytes for q in rdma._qp_list) == posted
    assert [m.npkts + m.skipped for m in rdma.messages] == [m.npkts for m in full_rdma.messages]
    # links: the jumps' share is kept apart from the simulated counters
    extra = ff.link_extra["tx_bytes"].sum()
    assert extra > 0
    sim = sum(p.tx_bytes for p in net.ports)
    full_ports = sum(p.tx_bytes for p in full_rdma.network.ports)
    assert abs(sim + extra - full_ports) <= 0.02 * full_ports


@pytest.fixture
def steady():
    """A steady all-to-all, run until its window is full, with jumps held back."""
    env, _, rdma, ff = all_to_all(True, hold=True)
    rdma.run(until=120e-6)
    qps = ff._active()
    dt, reason, plan = ff.plan(qps)
    assert reason == "" and dt > 0 and len(plan) == 56  # steady: a jump is on offer
    return env, rdma, ff, qps, dt


def test_plan_ends_before_a_pending_release(steady):
    env, rdma, ff, qps, dt = steady
    at = env.now + dt / 2
    rdma.post(0, 1, 1 << 20, at=at)
    dt2, reason, _ = ff.plan(qps)
    assert reason == "" and 0 < dt2 < at - env.now


def test_plan_refuses_while_a_cnp_is_in_flight(steady):
    env, rdma, ff, qps, _ = steady
    nic = rdma.nics[1]
    qp = qps[0]
    cnp = RdmaPacket(CNP, 0, ROCE_OVERHEAD + 16, nic.eids[0], qp.nic.eids[0], qp.id, 0, 0,
                     env.now, qp)  # fmt: skip
    ev = call_at(env, env.now + 1e-6, qp.nic._rx_later, cnp)  # in the sender's RX pipeline
    assert ff.classify(ev) == INTERNAL
    assert ff.plan(qps)[:2] == (0.0, "cc")
    ev.cancel()
    assert ff.plan(qps)[1] == ""


def test_plan_refuses_while_a_cc_timer_is_pending(steady):
    """A QP its congestion control holds below line rate, with a timer due (a rate change
    pending): no jump, however short (it would delay the timer). A timer of a QP at line
    rate does not stop it (it cannot raise the rate)."""
    env, _, ff, qps, dt = steady
    fcc = qps[3].fcc
    fcc.rate_bps, fcc.timer_due_s = 0.5 * fcc.line_rate_bps, env.now + 2 * dt
    assert ff.plan(qps)[:2] == (0.0, "cc")
    fcc.rate_bps = fcc.line_rate_bps
    assert ff.plan(qps)[0] == pytest.approx(dt)
    fcc.rate_bps, fcc.timer_due_s = None, math.inf


def test_plan_refuses_with_an_event_of_unknown_kind_pending(steady):
    env, _, ff, qps, _ = steady
    ev = call_at(env, env.now + 50e-6, lambda _a: None)
    assert ff.classify(ev) == BLOCK
    assert ff.plan(qps)[:2] == (0.0, "pending")
    ev.cancel()
    assert ff.classify(ev) == NEUTRAL
    assert ff.plan(qps)[1] == ""


def test_outside_world_timers_keep_their_virtual_time():
    """An executor-style timeout pending across a jump fires at its virtual time."""
    env, _, rdma, ff = all_to_all(True)
    fired = []
    to = env.timeout(300e-6)
    to.callbacks.append(lambda _e: fired.append(ff.now()))
    assert ff.classify(to) == SHIFT
    rdma.run()
    assert ff.jumps >= 1 and ff.windows[0][0] + ff.windows[0][1] < 300e-6
    assert fired == [pytest.approx(300e-6, rel=1e-12)]
