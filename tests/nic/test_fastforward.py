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
    done_fast = ff.msg_times(rdma.messages, "done_s")
    assert np.all(np.abs(done_fast - done_full) <= 0.02 * t_full)
    # every byte was accounted once: what the QPs count as sent equals what was posted
    posted = sum(m.size for m in rdma.messages)
    assert sum(q.rx.rel.delivered_bytes for q in rdma._qp_list) == posted
    assert [m.npkts for m in rdma.messages] == [m.npkts for m in full_rdma.messages]
    assert sum(m.skipped for m in rdma.messages) == ff.skipped_packets
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
    assert reason == "" and dt > 0 and len(plan.lanes) == 56  # steady: a jump is on offer
    return env, rdma, ff, qps, dt


def test_plan_ends_before_a_pending_new_flow(steady):
    """A message pending for an idle QP (a new flow) ends the jump a tick before its post."""
    env, rdma, ff, qps, dt = steady
    at = env.now + dt / 2
    rdma.post(0, 1, 1 << 20, at=at, qp=1)  # QP index 1 of 0 -> 1 has sent nothing yet
    dt2, reason, _ = ff.plan(qps)
    assert reason == "" and 0 < dt2 < at - env.now


def test_plan_crosses_a_post_behind_an_active_qps_message(steady):
    """A message pending for a QP that is sending queues behind its current message, which
    the jump does not finish: the jump may run through its post."""
    env, rdma, ff, qps, dt = steady
    ev_at = env.now + dt / 2
    rdma.post(0, 1, 1 << 20, at=ev_at, qp=0)
    assert ff.plan(qps)[0] == pytest.approx(dt)


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
    t0, dt = ff.windows[0]
    assert ff.jumps >= 1 and t0 < 300e-6 < t0 + dt and ff.crossed >= 1  # run inside the jump
    assert fired == [pytest.approx(300e-6, rel=1e-12)]


def test_a_crossed_event_that_starts_a_new_flow_ends_the_jump_there():
    """An executor-style timeout inside a jump posts a message to an idle QP: the jump ends
    at the timeout's virtual time (the new flow is simulated packet by packet from its post),
    and the run still agrees with the full run."""

    def run(ff_on: bool):
        env, _, rdma, ff = all_to_all(ff_on)
        to = env.timeout(300e-6)
        new = []
        to.callbacks.append(lambda _e: new.append(rdma.post(0, 1, 1 << 20, qp=1)))
        rdma.run()
        return rdma, ff, new[0]

    full_rdma, _, full_msg = run(False)
    _, ff, msg = run(True)
    ends = [t0 + dt for t0, dt in ff.windows]
    assert any(e == pytest.approx(300e-6, rel=1e-12) for e in ends)
    assert not any(t0 < 300e-6 - 1e-12 and t0 + dt > 300e-6 + 1e-12 for t0, dt in ff.windows)
    assert ff.msg_time(msg, "post_s") == pytest.approx(300e-6, rel=1e-12) == full_msg.post_s
    t_full = max(m.done_s for m in full_rdma.messages)
    assert abs(ff.msg_time(msg, "done_s") - full_msg.done_s) <= 0.02 * t_full


def chains(ff: bool, *, n: int = 5, then=None):
    """4 hosts on two leaves, every NIC sends ``n`` messages of ~400 KB (sizes differ, so
    every message ends on a short packet) to every other on one QP, all posted at once: each
    QP's messages follow one another, ~60 us each. ``then(rdma, msg)`` runs at each
    completion (an executor's reaction)."""
    env = simpy.Environment()
    net = Network(env, build_topology("leaf-spine", hosts_per_leaf=2, leaves=2), seed=1)
    rdma = RdmaNetwork(net, NicConfig(cc="none", selector="spray"), seed=1)
    if then is not None:
        rdma.on_done.append(lambda m: then(rdma, m))
    for a in range(4):
        for b in range(4):
            if a != b:
                for i in range(n):
                    rdma.post(a, b, 400_000 + 1000 * i, qp=0)
    f = FastForward(env, rdma) if ff else None
    if f is not None:
        f.wake()
    return env, net, rdma, f


def test_a_jump_crosses_message_boundaries_as_the_full_run_does():
    """Jumps run through the QPs' message boundaries in closed form: each message's first
    packet, its delivery and its completion get their virtual times, within a microsecond of
    the full run's (the run lasts ~300 us), and every byte and packet is accounted once."""
    _, _, full, _ = chains(False)
    full.run()
    _, net, rdma, ff = chains(True)
    checker = Checker(net, endpoints=[RdmaEndpoints(rdma)])
    rdma.run()
    checker.check_all(final=True)
    assert ff.jumps >= 1 and ff.crossed > 0
    crossed = ff._exact["done_s"]
    assert len(crossed) >= len(rdma._qp_list)  # at least one completion per QP in a jump
    for field in ("start_s", "t_delivered", "done_s"):
        a = np.array([getattr(m, field) for m in full.messages])
        b = ff.msg_times(rdma.messages, field)
        assert np.all(np.abs(b - a) <= 1e-6), field
        ids = [m.id for m in rdma.messages if m.id in ff._exact[field]]
        assert ids  # some of each were set by a jump
    assert [q.tx_bytes for q in rdma._qp_list] == [q.tx_bytes for q in full._qp_list]
    assert [q.tx_pkts for q in rdma._qp_list] == [q.tx_pkts for q in full._qp_list]
    assert sum(m.skipped for m in rdma.messages) == ff.skipped_packets > 0
    assert sum(q.snd.acked_bytes for q in rdma._qp_list) == sum(m.size for m in rdma.messages)


def test_a_completion_that_posts_to_an_idle_qp_ends_the_jump_at_its_time():
    """A completion inside a jump whose callback starts a new flow (a post to an idle QP)
    ends the jump at the completion's virtual time; the new message then agrees with the
    full run."""

    def then(rdma, m):
        if m.qp.nic.card == 0 and m.qp.dst_nic.card == 1 and m.id == 1:
            rdma.post(0, 1, 1 << 20, qp=1)

    _, _, full, _ = chains(False, then=then)
    full.run()
    _, _, rdma, ff = chains(True, then=then)
    rdma.run()
    done = ff.msg_time(rdma.messages[1], "done_s")
    assert 1 in ff._exact["done_s"] and ff.ends.get("new flow", 0) >= 1
    assert any(t0 + dt == pytest.approx(done, rel=1e-12) for t0, dt in ff.windows)
    new, new_full = rdma.messages[-1], full.messages[-1]
    assert ff.msg_time(new, "post_s") == pytest.approx(done, rel=1e-12)
    assert abs(ff.msg_time(new, "done_s") - new_full.done_s) <= 0.01 * new_full.done_s


def test_a_completion_that_posts_to_its_own_qp_is_crossed():
    """A completion whose callback posts the QP's next message (DeepEP's next chunk) is run
    inside the jump: the post gets its virtual time and the jump goes on."""

    def then(rdma, m):
        if m.id < 12 and rdma.pending < 40:  # one chunk more on the QP that completed
            rdma.post(m.qp.nic.card, m.qp.dst_nic.card, 300_000, qp=0)

    _, _, full, _ = chains(False, then=then)
    full.run()
    _, _, rdma, ff = chains(True, then=then)
    rdma.run()
    assert len(rdma.messages) == len(full.messages) > 60
    posted = [m for m in rdma.messages[60:] if m.id in ff._exact["post_s"]]
    assert posted and "new flow" not in ff.ends
    for m in posted:  # posted at the virtual time of the completion that posted it
        assert ff.msg_time(m, "post_s") in set(ff.msg_times(rdma.messages, "done_s"))
    a = np.array([m.done_s for m in full.messages])
    assert np.all(np.abs(ff.msg_times(rdma.messages, "done_s") - a) <= 1e-6)


def test_a_jump_stops_short_of_a_qps_last_packet_by_the_rate_tolerance(steady):
    """The jump keeps every QP sending: even at a rate ``tolerance`` above its measured one,
    no QP would reach its last queued packet."""
    _, rdma, ff, qps, dt = steady
    mtu = rdma.config.mtu
    bound = min(
        (q.snd.end_psn - q.snd.high_sent - 1) * mtu / (r * (1 + ff.tolerance))
        for q, r in ff.plan(qps)[2].lanes
    )
    assert dt == pytest.approx(min(bound, ff.plan(qps)[2].dt_ext))
    assert dt <= bound


def test_sampling_stops_when_nothing_can_move_the_pending_messages():
    """A run that has stalled (messages pending, no event left: say a destination is
    unreachable) ends as it would without fast-forward: the sampler does not keep the event
    loop alive on its own ticks."""
    env, _, rdma, ff = chains(True)
    # every event but the sampler's first tick gone: the messages can never complete
    env._queue[:] = [e for e in env._queue if e[3] is ff._tick_cb]
    assert env._queue
    rdma.run(until=1e-3)
    assert rdma.pending > 0
    assert ff._tick_cb is None  # stopped sampling, instead of ticking every RTT to the limit


def test_a_post_inside_a_jump_does_not_end_it():
    """The packet engine wakes the sampler on every post (scenarios/engines/packet.py); a post
    made by a callback the jump crosses must not schedule a tick the jump then stops at."""
    holder = []

    def then(rdma, m):
        if m.id < 12 and rdma.pending < 40:
            rdma.post(m.qp.nic.card, m.qp.dst_nic.card, 300_000, qp=0)
            holder[0].wake()  # as the engine's transport does after each post

    _, _, rdma, ff = chains(True, then=then)
    holder.append(ff)
    rdma.run()
    assert ff.jumps >= 1 and any(m.id in ff._exact["post_s"] for m in rdma.messages[60:])
    assert "scheduled FastForward._tick" not in ff.ends


def test_the_events_of_every_scale_up_domain_are_the_pipes_and_may_be_crossed():
    """The scale-up pipes schedule through one fluid per domain (podsim.fabric.scaleup): a
    jump counts those events as the pipes' (outside-world, crossable), not as unknown ones that
    would block every jump while a transfer is in flight."""
    from podsim.fabric.kernel import Callback
    from podsim.fabric.scaleup import ScaleUpPipes

    env, _, rdma, _ = all_to_all(False)
    pipes = ScaleUpPipes(env, build_topology("superpod", pods=2, gpus_per_pod=8, gpus_per_server=8))
    ff = FastForward(env, rdma, fluids=(pipes,))
    pipes.send(0, 1, 1 << 20, lambda _a: None)
    pipes.send(8, 9, 1 << 20, lambda _a: None)
    mine = [
        e[3]
        for e in env._queue
        if isinstance(e[3], Callback) and getattr(e[3].fn, "__self__", None) in pipes.domains
    ]
    assert len(mine) == 2  # each domain solves its own transfers
    assert all(ff.classify(ev) == SHIFT and ff.crossable(ev, set()) for ev in mine)
