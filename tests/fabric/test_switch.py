"""Switches: incast through one switch (line rate, queue growth, ECN, drops, PFC), shared
buffer with dynamic thresholds, INT, configuration."""

from __future__ import annotations

import math

import pytest
from podsim.fabric.counters import Sampler
from podsim.fabric.switch import SwitchConfig
from podsim.fabric.topology import star

from tests.fabric.fabric_testutil import OVERHEAD, build

N = 4  # senders
M = 100  # packets per sender
P = 4096
W = P + OVERHEAD
RATE = 400e9


def incast(cfg: SwitchConfig, *, n=N, m=M, seed=0, sample_s=None, **host_kw):
    """n senders (nic0..) -> the last host, all starting at t=0 on equal cables."""
    g = star(hosts=n + 1)
    env, net, hosts = build(g, cfg, seed=seed, mtu=P, **host_kw)
    dst = net.endpoints[-1]
    msgs = [hosts[s].add_message(dst, m * P) for s in net.endpoints[:-1]]
    sampler = Sampler(env, net, sample_s) if sample_s else None
    env.run()
    return net, hosts, msgs, net.downlink(dst), sampler


def test_incast_bottleneck_at_line_rate_and_queue_grows():
    net, hosts, msgs, bottleneck, smp = incast(SwitchConfig(ecn=False), sample_s=2e-6)
    rx = hosts[net.endpoints[-1]]
    assert rx.delivered_bytes == N * M * P and net.dropped_packets() == 0
    t0 = min(m.t_first_rx for m in msgs)
    t1 = max(m.t_last_rx for m in msgs)
    goodput = (N * M - 1) * P * 8 / (t1 - t0)
    assert goodput == pytest.approx(P / W * RATE, rel=1e-3)
    # N packets arrive per serialisation time and one leaves: the queue grows by (N-1) W per
    # serialisation time while the senders send, peaking near (N-1) M W
    assert (N - 1) * M * W - N * W <= bottleneck.max_qbytes <= (N - 1) * M * W
    q = smp.queue_of(bottleneck.name)
    t = smp.times
    ser = 8 * W / RATE
    sending = (t > 2e-6) & (t < M * ser)
    assert (q[sending][1:] > q[sending][:-1]).all()  # strictly growing while they send
    slope = (q[sending][-1] - q[sending][0]) / (t[sending][-1] - t[sending][0])
    assert slope == pytest.approx((N - 1) * W / ser, rel=0.05)


def test_ecn_marks_start_exactly_at_kmin():
    """Step marking (kmin = kmax): a packet is marked iff the queue behind it at dequeue
    exceeds kmin; the INT record of each packet carries that queue length."""
    kmin = 200_000
    cfg = SwitchConfig(ecn_kmin_bytes=kmin, ecn_kmax_bytes=kmin, ecn_pmax=1.0)
    net, hosts, _msgs, bn, _ = incast(cfg, telemetry=True, trace=True)
    trace = hosts[net.endpoints[-1]].trace
    assert len(trace) == N * M
    qs = [rec[-1][0] for *_, rec in trace]
    marks = [ecn for _, _, _, ecn, _ in trace]
    assert all(ecn == (q > kmin) for q, ecn in zip(qs, marks, strict=True))
    assert sum(marks) == bn.ecn_marks > 0
    # marking begins at the threshold: the last unmarked packets saw a queue within one
    # packet of kmin, the first marked ones saw just above it
    assert max(q for q, e in zip(qs, marks, strict=True) if not e) > kmin - W
    assert min(q for q, e in zip(qs, marks, strict=True) if e) <= kmin + W
    first_mark = marks.index(True)
    assert not any(marks[:first_mark])


def test_ecn_red_probability_is_linear():
    """Between kmin and kmax a packet is marked with probability pmax (q - kmin)/(kmax - kmin):
    the observed count matches the expected count within 4 binomial standard deviations."""
    kmin, kmax, pmax = 100_000, 1_100_000, 0.5
    cfg = SwitchConfig(ecn_kmin_bytes=kmin, ecn_kmax_bytes=kmax, ecn_pmax=pmax)
    net, hosts, *_ = incast(cfg, m=150, telemetry=True, trace=True)
    trace = hosts[net.endpoints[-1]].trace
    exp = var = obs = 0.0
    for *_, ecn, rec in trace:
        q = rec[-1][0]
        p = 0.0 if q <= kmin else 1.0 if q > kmax else pmax * (q - kmin) / (kmax - kmin)
        exp += p
        var += p * (1 - p)
        obs += ecn
    assert var > 10  # enough packets in the linear region for the test to mean something
    assert abs(obs - exp) <= 4 * math.sqrt(var)


def test_drops_exactly_when_buffer_exceeded():
    """With dynamic thresholds off, a buffer of exactly the peak occupancy drops nothing and
    one byte less drops; occupancy never exceeds the buffer. ``dt_alpha=None`` (a scenario's
    ``alpha: null``) and ``math.inf`` both turn them off."""
    free = SwitchConfig(ecn=False, dt_alpha=math.inf, buffer_bytes=10**9)
    net, *_ = incast(free)
    peak = net.switches["leaf0"].max_used
    assert peak > 0 and net.dropped_packets() == 0
    net, *_ = incast(SwitchConfig(ecn=False, dt_alpha=None, buffer_bytes=peak))
    assert net.dropped_packets() == 0
    assert net.switches["leaf0"].max_used == peak
    tight = SwitchConfig(ecn=False, dt_alpha=math.inf, buffer_bytes=peak - 1)
    net, hosts, _msgs, bn, _ = incast(tight)
    assert bn.drops > 0 and net.dropped_bytes() == bn.drop_bytes == bn.drops * P
    assert net.switches["leaf0"].max_used <= peak - 1
    rx = hosts[net.endpoints[-1]]
    assert rx.delivered_bytes + net.dropped_bytes() == N * M * P


@pytest.mark.parametrize("alpha", [0.5, 1.0, 4.0])
def test_dynamic_threshold_caps_one_queue(alpha):
    """Choudhury-Hahne: one congested queue settles at alpha/(1+alpha) of the buffer."""
    buf = 600_000
    cfg = SwitchConfig(ecn=False, dt_alpha=alpha, buffer_bytes=buf)
    _net, _hosts, _msgs, bn, _ = incast(cfg)
    bound = alpha * buf / (1 + alpha)
    assert bn.drops > 0
    assert bn.max_qbytes <= alpha * (buf + W) / (1 + alpha)
    assert bn.max_qbytes > bound - (1 + alpha) * W


def test_pfc_lossless_pauses_upstream():
    lossy = SwitchConfig(ecn=False, buffer_bytes=1_000_000)
    net, *_ = incast(lossy)
    assert net.dropped_packets() > 0  # the buffer is too small without PFC
    cfg = SwitchConfig(
        ecn=False, buffer_bytes=1_000_000, pfc=True, pfc_xoff_bytes=100_000, pfc_xon_bytes=80_000
    )
    net, _hosts, msgs, _bn, _ = incast(cfg)
    assert net.dropped_packets() == 0
    assert all(m.done for m in msgs)
    ups = [net.uplink(s) for s in net.endpoints[:-1]]
    assert all(u.pauses_rcvd > 0 and u.paused_s > 0 for u in ups)
    assert all(u.reverse.pauses_sent == u.pauses_rcvd for u in ups)
    assert not any(u.paused for u in ups)  # everything resumed
    leaf = net.switches["leaf0"]
    assert set(ups) <= set(leaf.ingresses)  # the switch accounts for each incoming link
    assert not any(ing.xoff or ing.rx_bytes for ing in leaf.ingresses.values())
    assert net.switches["leaf0"].used == 0
    # pausing keeps the bottleneck busy: still line rate
    t0 = min(m.t_first_rx for m in msgs)
    t1 = max(m.t_last_rx for m in msgs)
    assert (N * M - 1) * P * 8 / (t1 - t0) == pytest.approx(P / W * RATE, rel=2e-3)
    # pause frames took link time on the switch->sender links
    assert all(u.reverse.mac_frames == 2 * u.pauses_rcvd for u in ups)
    assert all(u.reverse.tx_bytes == 84 * u.reverse.mac_frames for u in ups)


def test_int_records_every_hop():
    g = star(hosts=2)
    env, _net, hosts = build(g, telemetry=True, trace=True)
    hosts["nic0.p0"].add_message("nic1.p0", 3 * P)
    env.run()
    trace = hosts["nic1.p0"].trace
    for _, _, psn, _, rec in trace:
        assert len(rec) == 1
        q, txb, _t, rate = rec[0]
        assert q == 0 and rate == RATE and txb == psn * W


def test_config_validation_and_parsing():
    with pytest.raises(ValueError, match="ecn_kmax_bytes"):
        SwitchConfig(ecn_kmin_bytes=10, ecn_kmax_bytes=5)
    with pytest.raises(ValueError, match="pfc_xon_bytes"):
        SwitchConfig(pfc_xoff_bytes=10, pfc_xon_bytes=20)
    with pytest.raises(ValueError, match="ecn_pmax"):
        SwitchConfig(ecn_pmax=2.0)
    with pytest.raises(ValueError, match="latency_s"):
        SwitchConfig(latency_s=-1.0)
    cfg = SwitchConfig.from_mapping(
        {"latency_s": "1us", "ecn_kmin_bytes": "100KB", "buffer_bytes": "16MiB", "pfc": True}
    )
    assert cfg.latency_s == pytest.approx(1e-6)
    assert cfg.ecn_kmin_bytes == 100_000 and cfg.buffer_bytes == 16 * 2**20 and cfg.pfc
    with pytest.raises(ValueError, match="unknown switch config"):
        SwitchConfig.from_mapping({"latency": "1us"})
    assert SwitchConfig().to_dict()["ecn_kmin_bytes"] == 150_000


def test_buffer_per_port_scales_with_ports_when_no_total_is_given():
    g = star(hosts=6)
    _env, net, _ = build(g, SwitchConfig(buffer_bytes=None))
    assert net.switches["leaf0"].buffer_bytes == 6 * 1_250_000
    _env, net, _ = build(g)  # the default: one total buffer per switch
    assert net.switches["leaf0"].buffer_bytes == SwitchConfig().buffer_bytes == 64 * 2**20


def test_pfc_pauses_propagate_through_two_tiers():
    """Six senders on three leaves -> one receiver through a single spine: the spine's
    downlink is the bottleneck, the spine pauses the leaf uplinks, the leaves' queues fill and
    they pause their hosts in turn; nothing is lost and every byte arrives."""
    from podsim.fabric.topology import leaf_spine

    g = leaf_spine(hosts_per_leaf=2, leaves=4, spines=1, oversubscription=None)
    cfg = SwitchConfig(
        ecn=False, buffer_bytes=1_500_000, pfc=True, pfc_xoff_bytes=100_000, pfc_xon_bytes=80_000
    )
    env, net, hosts = build(g, cfg, mtu=P)
    dst = "nic2.p0"  # on leaf1
    senders = ["nic0.p0", "nic1.p0", "nic4.p0", "nic5.p0", "nic6.p0", "nic7.p0"]
    msgs = [hosts[s].add_message(dst, 150 * P) for s in senders]
    env.run()
    assert net.dropped_packets() == 0 and all(m.done for m in msgs)
    assert sum(net.port("spine0", f"leaf{i}").pauses_sent for i in (0, 2, 3)) > 0
    assert sum(net.port(f"leaf{i}", "spine0").pauses_rcvd for i in (0, 2, 3)) > 0
    assert sum(net.uplink(s).pauses_rcvd for s in senders) > 0
    assert all(not p.paused for p in net.ports) and all(s.used == 0 for s in net.switches.values())
    t0 = min(m.t_first_rx for m in msgs)
    t1 = max(m.t_last_rx for m in msgs)
    assert (len(msgs) * 150 - 1) * P * 8 / (t1 - t0) == pytest.approx(P / W * RATE, rel=5e-3)


@pytest.mark.parametrize("hold", [False, True])
def test_pfc_hold_until_sent_counts_the_frame_being_sent(hold):
    """One frame through an idle switch: it never waits, so an ingress count that releases a
    frame when it starts serialising (the default) never passes an xoff just below one frame,
    while one that holds it until its last bit has left (htsim's LosslessInputQueue) passes it
    and pauses the sender until the frame is sent; either way nothing is lost and the counts
    return to zero."""
    cfg = SwitchConfig(
        ecn=False, pfc=True, pfc_xoff_bytes=W - 1, pfc_xon_bytes=0, pfc_hold_until_sent=hold
    )
    net, _hosts, msgs, _bn, _ = incast(cfg, n=1, m=1)
    assert net.dropped_packets() == 0 and all(m.done for m in msgs)
    up = net.uplink(net.endpoints[0])
    if hold:  # paused for (about) the frame's serialisation, then resumed
        assert up.pauses_rcvd == 1 and 0 < up.paused_s < 2 * 8 * W / RATE
    else:
        assert up.pauses_rcvd == 0
    leaf = net.switches["leaf0"]
    assert leaf.held_bytes == 0 and leaf.used == 0
    assert not any(ing.xoff or ing.rx_bytes for ing in leaf.ingresses.values())
    # the count peaked at exactly one frame: the frame being sent
    assert max(ing.max_rx_bytes for ing in leaf.ingresses.values()) == (W if hold else 0)


def test_pfc_hold_until_sent_refused_with_traffic_classes():
    from podsim.fabric.classed import ClassedSwitch
    from podsim.fabric.classes import TrafficClass, TrafficClasses

    cfg = SwitchConfig(pfc=True, pfc_hold_until_sent=True)
    two = TrafficClasses((TrafficClass("bulk", pfc=True), TrafficClass("urgent", priority=1)))
    with pytest.raises(ValueError, match="hold_until_sent"):
        ClassedSwitch(None, "s", cfg, classes=two)  # type: ignore[arg-type]
