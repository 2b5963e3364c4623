"""Congestion control through the NIC: 16:1 incast under DCQCN, HPCC and no CC, and a user
plug-in (fixed window) that drives the NIC through the public API."""

from __future__ import annotations

import numpy as np
import pytest
import simpy
from podsim.fabric.kernel import call_at
from podsim.fabric.network import Network
from podsim.fabric.packet import ROCE_OVERHEAD
from podsim.fabric.switch import SwitchConfig
from podsim.fabric.topology import build_topology
from podsim.nic.congestion import (
    CC_ALGORITHMS,
    CongestionControl,
    CongestionControlError,
    PluginError,
)
from podsim.nic.nic import NicConfig, RdmaNetwork
from podsim.nic.transport.qp import ACK_WIRE_EXTRA

N_SENDERS = 16
GOODPUT = 400e9 * 4096 / (4096 + ROCE_OVERHEAD)  # payload rate of one 400G port


def incast(cfg: NicConfig, until: float, cable: str = "2m", window: float = 100e-6):
    """16 senders -> NIC 0 through one switch (star), long messages, PFC off. Samples every
    ``window`` the receiver's per-flow delivered bytes and the bottleneck queue."""
    env = simpy.Environment()
    g = build_topology("star", hosts=N_SENDERS + 1, cable=cable)
    net = Network(env, g, SwitchConfig(pfc=False), seed=1)
    rdma = RdmaNetwork(net, cfg, seed=1)
    for i in range(1, N_SENDERS + 1):
        rdma.post(i, 0, 1 << 30)
    qps = [rdma.qp(i, 0) for i in range(1, N_SENDERS + 1)]
    port = net.downlink("nic0.p0")
    times, queues, delivered = [], [], []

    def sample(_arg: object) -> None:
        times.append(env.now)
        queues.append(port.qbytes)
        delivered.append([q.rx.rel.delivered_bytes for q in qps])
        call_at(env, env.now + 2e-6, sample)

    call_at(env, 0.0, sample)
    rdma.run(until=until + 5e-6)
    return net, port, np.array(times), np.array(queues), np.array(delivered, dtype=float)


def window_stats(times, queues, delivered, t0: float, t1: float):
    i0, i1 = np.searchsorted(times, [t0, t1])
    rates = (delivered[i1] - delivered[i0]) * 8 / (times[i1] - times[i0])
    jain = rates.sum() ** 2 / (len(rates) * (rates**2).sum())
    return rates, jain, queues[i0 : i1 + 1].max()


def test_incast_dcqcn_converges_to_fair_share_without_drops() -> None:
    """DCQCN with a fast-reaction profile - alpha updated every 1 us (NVIDIA firmware,
    docs/physics.md), CNP and rate-decrease interval 4 us [E], timer-only rate increase (the ns-3
    Mellanox model) - on a 16:1 incast at 400G with PFC off: the initial line-rate burst is cut
    before the shared buffer overflows (no drop), the rates fall and recover, and by 2.4 ms
    (stated convergence time) the flows share the port fairly: over 2.4-3.0 ms aggregate goodput
    >= 90 % of the port's, every flow within 50 % of the fair share, Jain index >= 0.95, and
    the bottleneck queue stays below the ECN kmax (1.5 MB, NVIDIA default)."""
    cfg = NicConfig(
        cc="dcqcn",
        cc_params={
            "profile": "paper",
            "alpha_interval_s": 1e-6,
            "decrease_interval_s": 4e-6,
            "byte_counter_bytes": None,
        },
        cnp_interval_s=4e-6,
        selector="ecmp",
    )
    net, port, t, q, d = incast(cfg, until=3.0e-3)
    assert net.dropped_packets() == 0
    rates, jain, qmax = window_stats(t, q, d, 2.4e-3, 3.0e-3)
    fair = GOODPUT / N_SENDERS
    assert rates.sum() >= 0.9 * GOODPUT
    assert ((rates > 0.5 * fair) & (rates < 1.5 * fair)).all()
    assert jain >= 0.95
    assert qmax < SwitchConfig().ecn_kmax_bytes
    assert port.ecn_marks > 0


def test_incast_nvidia_dcqcn_holds_a_16_to_1_incast_without_drops() -> None:
    """DCQCN is RoCE's congestion control on ConnectX NICs (NVIDIA, DCQCN CC Parameters) and
    was built to hold incasts without PFC (Zhu et al., SIGCOMM 2015): with the ConnectX defaults
    (profile `nvidia`: CNPs at most every 4 us, a cut clamps the target only after an increase)
    a 16:1 incast at 400G with PFC off loses nothing, and over 2-3 ms (stated [E]) the flows
    share the port: aggregate goodput >= 90 % of the port's, Jain index >= 0.95, every flow
    within 50 % of the fair share, the queue under 4 MB (of a 64 MiB shared buffer).
    Under the earlier reading (the target kept at line rate through byte-counter increases) the
    byte counter undid every cut within a few us and this incast dropped 160k packets in 1 ms."""
    net, _port, t, q, d = incast(NicConfig(cc="dcqcn", selector="ecmp"), until=3.0e-3)
    assert net.dropped_packets() == 0
    rates, jain, qmax = window_stats(t, q, d, 2.0e-3, 3.0e-3)
    fair = GOODPUT / N_SENDERS
    assert rates.sum() >= 0.9 * GOODPUT
    assert jain >= 0.95
    assert np.all(np.abs(rates - fair) <= 0.5 * fair)
    assert qmax < 4e6


def test_incast_hpcc_converges_to_fair_share_with_near_empty_queue() -> None:
    """HPCC (eta 0.95) on the same 16:1 incast. Cables are 300 m so that the fair window
    (fair rate x base RTT) spans several 4 KiB packets - with a one-packet window, window
    control cannot share fairly. Within 0.5 ms (stated) the aggregate settles at about
    eta x the port's goodput (>= 90 %), Jain index >= 0.95, and the bottleneck queue over
    0.5-1.0 ms stays within a few packets (<= 64 KB), far below the ECN kmin; no drops."""
    net, _port, t, q, d = incast(NicConfig(cc="hpcc", selector="ecmp"), 1.0e-3, cable="300m")
    assert net.dropped_packets() == 0
    rates, jain, qmax = window_stats(t, q, d, 0.5e-3, 1.0e-3)
    assert 0.9 * GOODPUT <= rates.sum() <= GOODPUT * 1.001
    assert jain >= 0.95
    assert qmax <= 64_000


def test_incast_without_cc_overflows_the_buffer() -> None:
    """No congestion control: 16 line-rate senders fill the switch's dynamic-threshold share
    of the shared buffer and packets are dropped (then recovered by retransmission)."""
    net, port, *_ = incast(NicConfig(cc="none", selector="ecmp"), until=0.2e-3)
    sw = next(iter(net.switches.values()))
    assert net.dropped_packets() > 0
    limit = SwitchConfig().dt_alpha * sw.buffer_bytes / 2  # alpha (B - q) with q = the queue
    assert port.max_qbytes >= 0.95 * limit


def test_incast_receiver_credits_cap_the_bottleneck() -> None:
    """RCCC: senders transmit only with credit the receiver grants at its line rate, so the
    16:1 incast never queues more than a few grants' worth at the last hop and finishes at the
    port's goodput (16 x 512 KiB in 16 x 512 KiB / goodput, within 2 %), with no drop."""
    env = simpy.Environment()
    net = Network(env, build_topology("star", hosts=N_SENDERS + 1), seed=1)
    rdma = RdmaNetwork(net, NicConfig(cc="rccc", selector="ecmp"), seed=1)
    size = 512 << 10
    for i in range(1, N_SENDERS + 1):
        rdma.post(i, 0, size)
    rdma.run()
    m = rdma.message_table()
    assert net.dropped_packets() == 0
    assert net.downlink("nic0.p0").max_qbytes < 100_000
    span = m.delivered_s.max() - m.start_s.min()
    assert span == pytest.approx(N_SENDERS * size * 8 / GOODPUT, rel=0.02)


# ------------------------------------------------------------------------- user plug-in


class FixedWindow(CongestionControl):
    """A user algorithm written here: a fixed window of ``packets`` MTUs, line-rate pacing."""

    name = "fixed-window"

    def __init__(self, packets: int = 2) -> None:
        self.packets = packets
        self.acks = 0

    def init_flow(self, flow, now):
        flow.window_bytes = self.packets * flow.mtu

    def on_ack(self, ev, flow):
        self.acks += 1


class Explodes(CongestionControl):
    def on_ack(self, ev, flow):
        raise RuntimeError("boom")


def _fixed_window_transfer(packets: int, size: int, **nic: object):
    """One message of ``size`` bytes between two hosts of a star under :class:`FixedWindow`
    (``packets`` MTUs); returns the RDMA network, the message and the unloaded RTT (a data
    packet there, an ACK back)."""
    env = simpy.Environment()
    net = Network(env, build_topology("star", hosts=2), seed=1)
    cfg = NicConfig(
        cc=f"{__name__}:FixedWindow",
        cc_params={"packets": packets},
        allow_plugins=True,
        selector="ecmp",
        **nic,
    )
    rdma = RdmaNetwork(net, cfg, seed=1)
    m = rdma.post(0, 1, size)
    rdma.run()
    path = net.paths("nic0.p0", "nic1.p0")[0]
    rtt = net.unloaded_latency(path, 4096 + ROCE_OVERHEAD) + net.unloaded_latency(
        path[::-1], ROCE_OVERHEAD + ACK_WIRE_EXTRA
    )
    return rdma, m, rtt


def test_user_plugin_fixed_window_drives_the_nic() -> None:
    """A window of W bytes and no other limit: one window per round trip, so a long message
    completes at W / RTT (RTT = data packet + ACK unloaded delays), within 1 %."""
    spec = f"{__name__}:FixedWindow"
    with pytest.raises(PluginError, match="opt-in"):
        RdmaNetwork(
            Network(simpy.Environment(), build_topology("star", hosts=2)), NicConfig(cc=spec)
        )
    size = 256 * 4096
    rdma, m, rtt = _fixed_window_transfer(packets=2, size=size)
    q = rdma.qp_table()
    assert q.window_bytes.iloc[0] == 2 * 4096
    assert size / (m.done_s - m.start_s) == pytest.approx(2 * 4096 / rtt, rel=0.01)
    assert rdma.cc.inner.acks == 256  # plug-ins run inside the guard


@pytest.mark.parametrize("coalesce", [1, 4, 16])
def test_ack_request_keeps_a_small_window_moving_under_ack_coalescing(coalesce: int) -> None:
    """A window of 3 packets with the receiver acknowledging only every ``coalesce`` packets:
    the packet after which the window is full carries the ACK request (UEC's AR bit), so the
    receiver acknowledges it at once and the message completes with no timeout, where without
    the request a coalescing factor above 3 would stall every window until the retransmission
    timeout. Rate (within 1 %): W / RTT with an ACK per packet; with one ACK per window, a
    window every RTT plus the two packets' serialisation ahead of the one acknowledged."""
    size = 300 * 4096
    rdma, m, rtt = _fixed_window_transfer(packets=3, size=size, ack_every=coalesce)
    q = rdma.qp_table()
    assert q.timeouts.sum() == 0 and q.retx_pkts.sum() == 0
    cycle = rtt if coalesce == 1 else rtt + 2 * (4096 + ROCE_OVERHEAD) * 8 / 400e9
    assert size / (m.done_s - m.start_s) == pytest.approx(3 * 4096 / cycle, rel=0.01)
    assert rdma.cc.inner.acks == 300 // min(coalesce, 3)  # one ACK per window when coalescing


def test_user_plugin_that_raises_is_reported_with_flow_and_time() -> None:
    env = simpy.Environment()
    net = Network(env, build_topology("star", hosts=2), seed=1)
    rdma = RdmaNetwork(net, NicConfig(cc=f"{__name__}:Explodes", allow_plugins=True), seed=1)
    rdma.post(0, 1, 10_000)
    with pytest.raises(CongestionControlError, match=r"(?s)flow.*boom|boom.*flow"):
        rdma.run()


@pytest.mark.parametrize("cc", sorted(CC_ALGORITHMS.names()))
def test_every_registered_cc_runs_through_the_nic(cc: str) -> None:
    """Smoke test of the NIC-CC contract for every built-in: a 4:1 incast of 256 KiB messages
    for 2 ms; accounting stays consistent (acknowledged <= delivered <= posted, each byte once)
    and whatever completed was fully delivered."""
    env = simpy.Environment()
    net = Network(env, build_topology("star", hosts=5), seed=1)
    rdma = RdmaNetwork(net, NicConfig(cc=cc, selector="spray"), seed=1)
    size = 256 << 10
    for i in range(1, 5):
        rdma.post(i, 0, size)
    rdma.run(until=2e-3)
    q, m = rdma.qp_table(), rdma.message_table()
    assert (q.acked_bytes <= q.rx_delivered_bytes).all()
    assert (q.rx_delivered_bytes <= size).all()
    assert (q.acked_bytes[m.done_s.notna().to_numpy()] == size).all()
    assert q.tx_pkts.sum() > 0


def _two_to_one(profile: str, short: int = 2 << 20):
    """2:1 incast through one switch (PFC off), DCQCN ``profile``, CNPs at most every 4 us:
    sender 1 sends ``short`` bytes, sender 2 16 MiB. Returns the cut times of each flow, when
    sender 1's last byte arrived, and sender 2's delivered bytes sampled every microsecond."""
    env = simpy.Environment()
    net = Network(env, build_topology("star", hosts=3), SwitchConfig(pfc=False), seed=1)
    cfg = NicConfig(cc="dcqcn", cc_params={"profile": profile}, cnp_interval_s=4e-6)
    rdma = RdmaNetwork(net, cfg, seed=1)
    cc = rdma.cc
    cuts: dict[int, list[float]] = {}
    decrease = cc._decrease

    def record(s, flow, now):
        cuts.setdefault(id(flow), []).append(now)
        decrease(s, flow, now)

    cc._decrease = record
    rdma.post(1, 0, short)
    rdma.post(2, 0, 16 << 20)
    qa, qb = rdma.qp(1, 0), rdma.qp(2, 0)
    t, da, db = [], [], []

    def sample(_arg: object) -> None:
        t.append(env.now)
        da.append(qa.rx.rel.delivered_bytes)
        db.append(qb.rx.rel.delivered_bytes)
        call_at(env, env.now + 1e-6, sample)

    call_at(env, 0.0, sample)
    rdma.run(until=250e-6)
    t, da, db = np.array(t), np.array(da), np.array(db, dtype=float)
    return cuts, t[np.argmax(da >= short)], t, db


def test_nvidia_dcqcn_cuts_every_4us_at_most_and_remembers_the_reduced_rate() -> None:
    """The `nvidia` profile (ConnectX defaults) on a 2:1 incast: while both send, each flow is
    cut many times but never twice within rate_reduce_monitor_period (4 us). Between cuts the
    byte counter (32767 B) raises the rate, so each cut clamps the target to the current rate
    (clamp_tgt_rate_after_time_inc semantics): once sender 1 is done and the queue has drained,
    sender 2 is not back at line rate but climbs by additive increase only (5 Mb/s per 32767 B
    until the 300 us timer has expired twice): over two 40 us windows from 20 us after its last
    cut its goodput stays below 80 % of the port's and changes by at most the additive bound
    (about 0.2 Gb/s in 40 us) plus one packet per window. The `paper` profile is below half the
    line rate then too (RT = RC on every cut, 55 us stages)."""
    cuts, t_end, t, db = _two_to_one("nvidia")
    spacing = [np.diff(c).min() for c in cuts.values() if len(c) > 1]
    assert len(spacing) == 2 and min(spacing) >= 4e-6 * (1 - 1e-9)
    assert all(len(c) >= 10 for c in cuts.values())
    last = max(c[-1] for c in cuts.values())
    assert last > t_end  # the queue of the incast drains after sender 1's end: marks go on

    def goodput(a: float, b: float) -> float:
        i0, i1 = np.searchsorted(t, [last + a, last + b])
        return (db[i1] - db[i0]) * 8 / (t[i1] - t[i0])

    g1, g2 = goodput(20e-6, 60e-6), goodput(60e-6, 100e-6)
    assert 0.2 * GOODPUT < g1 < 0.8 * GOODPUT
    additive = 40e-6 * g1 / (32767 * 8) * 5e6  # 5 Mb/s per byte-counter expiry
    one_packet = 4096 * 8 / 40e-6
    assert abs(g2 - g1) <= additive + 2 * one_packet
    cuts, t_end, t, db = _two_to_one("paper")
    i0, i1 = np.searchsorted(t, [t_end + 10e-6, t_end + 60e-6])
    assert (db[i1] - db[i0]) * 8 / (t[i1] - t[i0]) < 0.5 * GOODPUT


def test_nscc_late_joiner_converges_to_the_fair_share() -> None:
    """NSCC closed loop: a flow joins a line-rate flow at a 2:1 bottleneck (200 m cables, a
    4 us base RTT, ECN marking from 0.2 to 0.8 BDP with probability 1 at the top, as the UEC
    reference simulator's queues). From 15 us (about 4 RTTs) after the join the two share the
    bottleneck within 6 % in every 10 us window (one packet is 1.7 % of one), as the reference's
    2:1 incast ends its two flows within 2 % of each other (uet-htsim 40ccb05,
    benchmarks/validate_htsim.py: 183.7 and 187.1 us), keep it at least 80 % busy, and hold the
    queue near kmax (without CC it grows to megabytes)."""
    env = simpy.Environment()
    g = build_topology("star", hosts=3, cable="200m")
    ecn = {"ecn_kmin_bytes": 40_000, "ecn_kmax_bytes": 160_000, "ecn_pmax": 1.0}
    net = Network(env, g, SwitchConfig(pfc=False, **ecn), seed=1)
    rdma = RdmaNetwork(net, NicConfig(cc="nscc", selector="ecmp"), seed=1)
    join = 30e-6
    rdma.post(1, 0, 8 << 20)
    call_at(env, join, lambda _arg: rdma.post(2, 0, 8 << 20))
    port = net.downlink("nic0.p0")
    t: list[float] = []
    d: list[list[int]] = []
    q: list[int] = []

    def sample(_arg: object) -> None:
        t.append(env.now)
        d.append([rdma.qp(1, 0).rx.rel.delivered_bytes, rdma.qp(2, 0).rx.rel.delivered_bytes])
        q.append(port.qbytes)
        call_at(env, env.now + 10e-6, sample)

    call_at(env, join, sample)
    rdma.run(until=join + 200e-6)
    times, delivered = np.array(t), np.array(d, dtype=float)
    rates = np.diff(delivered, axis=0) * 8 / np.diff(times)[:, None]
    after = times[:-1] >= join + 15e-6  # windows starting 15 us after the join or later
    assert after.sum() >= 15
    a, b = rates[after, 0], rates[after, 1]
    assert np.abs(a - b).max() <= 0.06 * np.maximum(a, b).min()
    assert (a + b).min() >= 0.8 * GOODPUT
    assert max(q[5:]) < 250_000  # from 50 us after the join
    assert net.dropped_packets() == 0


def test_paper_dcqcn_fast_recovery_returns_to_the_target_in_f_timer_stages() -> None:
    """Zhu et al. (SIGCOMM 2015, section 3.1): after a cut, fast recovery halves the gap between
    the current rate and the target (the rate before the cut) at each of F = 5 timer (55 us) or
    byte-counter (10 MB) expiries, so 5 x 55 us after its last cut a flow sends at
    >= RT (1 - 2^-5 / 2) and, having only additive steps of 80 Mb/s to come, not above RT: the
    paper profile remembers the rate a congestion episode left, it does not return to line
    rate. Closed loop: a 2:1 incast (2 MiB) cuts the long flow, which then runs alone."""
    env = simpy.Environment()
    net = Network(env, build_topology("star", hosts=3), SwitchConfig(pfc=False), seed=1)
    rdma = RdmaNetwork(net, NicConfig(cc="dcqcn", cc_params={"profile": "paper"}), seed=1)
    cc = rdma.cc
    cuts: list[tuple[float, float]] = []
    decrease = cc._decrease

    def record(s, flow, now):
        decrease(s, flow, now)
        if flow is long_qp.fcc:
            cuts.append((now, s.target))

    cc._decrease = record
    rdma.post(1, 0, 2 << 20)
    rdma.post(2, 0, 256 << 20)
    long_qp = rdma.qp(2, 0)
    t, db = [], []

    def sample(_arg: object) -> None:
        t.append(env.now)
        db.append(long_qp.rx.rel.delivered_bytes)
        call_at(env, env.now + 1e-6, sample)

    call_at(env, 0.0, sample)
    rdma.run(until=1.5e-3)
    t_cut, rt = cuts[-1]
    assert len(cuts) >= 2 and t_cut < 0.8e-3 and rt < 0.75 * 400e9
    i0, i1 = np.searchsorted(t, [t_cut + 5 * 55e-6 + 5e-6, t_cut + 5 * 55e-6 + 55e-6])
    goodput = (db[i1] - db[i0]) * 8 / (t[i1] - t[i0])
    payload = GOODPUT / 400e9  # goodput per wire bit/s
    assert rt * payload * (1 - 2**-6) * 0.99 <= goodput <= rt * payload * 1.01
