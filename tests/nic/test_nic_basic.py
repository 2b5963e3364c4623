"""SmartNIC on the packet fabric: timing closed forms, goodput, accounting, configuration."""

from __future__ import annotations

import math

import pandas as pd
import pytest
import simpy
from podsim.fabric.kernel import call_at
from podsim.fabric.network import Network
from podsim.fabric.packet import RETH_BYTES, ROCE_OVERHEAD
from podsim.fabric.switch import SwitchConfig
from podsim.fabric.topology import build_topology
from podsim.nic.nic import NicConfig, RdmaNetwork
from podsim.nic.transport.qp import ACK_WIRE_EXTRA


def make(topo: str = "star", cfg: NicConfig | None = None, seed: int = 1, switch=None, **topo_kw):
    env = simpy.Environment()
    net = Network(env, build_topology(topo, **topo_kw), switch, seed=seed)
    return net, RdmaNetwork(net, cfg or NicConfig(cc="none", selector="ecmp"), seed=seed)


def goodput(net: Network, m, mtu: int = 4096) -> float:
    """Payload rate of message ``m`` with the fixed path latency of its last packet taken out."""
    wire = mtu + ROCE_OVERHEAD
    src, dst = m.qp.nic.endpoints[0], m.qp.dst_nic.endpoints[0]
    fixed = net.unloaded_latency(net.paths(src, dst)[0], wire)
    fixed -= net.uplink(src).serialisation_s(wire)
    return m.size * 8 / (m.t_delivered - m.start_s - fixed)


def test_single_message_times_match_closed_form() -> None:
    """Idle star, one 1 MiB WRITE: delivery = QPC miss + serialisation of all but the last
    packet + the last packet's unloaded path delay; completion adds the ACK's return."""
    net, rdma = make(hosts=2)
    cfg = rdma.config
    size = 1 << 20
    m = rdma.post(0, 1, size)
    rdma.run()
    n = size // cfg.mtu
    last_wire = cfg.mtu + ROCE_OVERHEAD
    total_wire = size + n * ROCE_OVERHEAD + RETH_BYTES
    rate = net.uplink("nic0.p0").rate_bps
    path = net.paths("nic0.p0", "nic1.p0")[0]
    start = cfg.qpc_miss_penalty_s  # cold QP-context miss before the first packet
    assert m.start_s == pytest.approx(start, rel=1e-12)
    delivered = start + (total_wire - last_wire) * 8 / rate + net.unloaded_latency(path, last_wire)
    assert m.t_delivered == pytest.approx(delivered, rel=1e-9)
    ack_back = net.unloaded_latency(path[::-1], ROCE_OVERHEAD + ACK_WIRE_EXTRA)
    assert m.done_s == pytest.approx(delivered + ack_back, rel=1e-9)
    assert m.retx_pkts == 0


@pytest.mark.parametrize("mtu", [1024, 2048, 4096])
def test_long_message_goodput_is_payload_share_of_line_rate(mtu: int) -> None:
    """Goodput of a long WRITE = P/(P+82) x 400 Gb/s (docs/physics.md table) within 0.1 %, once the
    fixed path latency (propagation, FEC, switch) is taken out."""
    net, rdma = make(hosts=2, cfg=NicConfig(cc="none", selector="ecmp", mtu=mtu))
    size = 4 << 20
    m = rdma.post(0, 1, size)
    rdma.run()
    expect = mtu / (mtu + ROCE_OVERHEAD) * 400e9
    assert goodput(net, m, mtu) == pytest.approx(expect, rel=1e-3)


def test_bytes_conserved_and_counted_once() -> None:
    """Several senders, one receiver, drops (no CC): every message completes, the receiver
    holds each byte once and the sender's acknowledged bytes equal the message bytes."""
    # a shallow buffer (1.25 MB per port), so that the incast drops
    shallow = SwitchConfig(buffer_bytes=None)
    net, rdma = make(hosts=5, cfg=NicConfig(cc="none", selector="spray"), switch=shallow)
    sizes = [3 << 20, 1 << 20, 2 << 20 | 12345, 777]
    for i, s in enumerate(sizes, start=1):
        rdma.post(i, 0, s)
    rdma.run()
    q = rdma.qp_table()
    assert net.dropped_packets() > 0  # 4:1 at line rate overflows the queue
    assert (q.retx_pkts > 0).any()
    assert list(q.rx_delivered_bytes) == sizes
    assert list(q.acked_bytes) == sizes
    assert rdma.message_table().done_s.notna().all()
    assert all(n.rob.used == 0 for n in rdma.nics.values())


def test_same_seed_same_results() -> None:
    def run(seed: int) -> pd.DataFrame:
        _net, rdma = make(
            "leaf-spine",
            NicConfig(cc="dcqcn", selector="reps"),
            seed=seed,
            hosts_per_leaf=4,
            leaves=2,
            oversubscription=2,
        )
        for i in range(8):
            rdma.post(i, (i + 4) % 8, 300_000)
            rdma.post(i, (i + 1) % 8, 100_000, at=5e-6)
        rdma.run()
        return rdma.message_table()

    a, b = run(7), run(7)
    pd.testing.assert_frame_equal(a, b)
    assert not a.equals(run(8))


def test_multi_plane_nic_sprays_across_planes() -> None:
    """A two-plane NIC (two 400G ports) spraying one QP uses both ports evenly and doubles
    the goodput; ECMP keeps the QP on one plane."""
    size = 4 << 20
    res = {}
    for sel in ("spray", "ecmp"):
        net, rdma = make(hosts=2, planes=2, cfg=NicConfig(cc="none", selector=sel))
        m = rdma.post(0, 1, size)
        rdma.run()
        res[sel] = (
            goodput(net, m),
            [net.uplink(e).tx_pkts for e in rdma.nic(0).endpoints],
        )
    one_port = 4096 / (4096 + ROCE_OVERHEAD) * 400e9
    rate, per_port = res["spray"]
    assert per_port[0] == per_port[1] == size // 4096 // 2
    assert rate == pytest.approx(2 * one_port, rel=2e-3)
    rate, per_port = res["ecmp"]
    assert sorted(per_port) == [0, size // 4096]
    assert rate == pytest.approx(one_port, rel=2e-3)


def test_ack_coalescing_cuts_acks() -> None:
    acks = {}
    for every in (1, 4):
        _net, rdma = make(hosts=2, cfg=NicConfig(cc="none", ack_every=every))
        rdma.post(0, 1, 256 * 4096)
        rdma.run()
        acks[every] = int(rdma.qp_table().acks_sent.iloc[0])
    assert acks[1] == 256
    assert acks[4] == 256 // 4


def test_qp_context_cache_makes_many_qps_cost() -> None:
    """Round-robin over more QPs than the cache holds: every packet misses and the QP-context
    fetch (1 us, 16 in parallel) caps the packet rate at 16 / 1 us = 16 Mpps."""
    small = NicConfig(cc="none", qpc_entries=8, qps_per_pair=64, mtu=1024)
    big = NicConfig(cc="none", qpc_entries=None, qps_per_pair=64, mtu=1024)
    times = {}
    for name, cfg in (("small", small), ("big", big)):
        _net, rdma = make(hosts=2, cfg=cfg)
        for _ in range(64 * 8):
            rdma.post(0, 1, 1024)
        rdma.run()
        t = rdma.message_table()
        times[name] = (t.start_s.max() - t.start_s.min(), rdma.nic_table())
    n_pkts = 64 * 8
    span_small, tab = times["small"]
    assert tab.qpc_misses.iloc[0] > n_pkts  # data and ACK lookups keep missing
    assert n_pkts / span_small < 16.5e6
    span_big, tab = times["big"]
    assert list(tab.qpc_misses) == [64, 64]  # one cold miss per QP on each NIC
    line_span = (n_pkts - 1) * (1024 + ROCE_OVERHEAD) * 8 / 400e9
    assert line_span <= span_big < 1.05 * line_span  # unbounded cache: line-rate bound


def test_pcie_rate_cap_limits_goodput() -> None:
    """The PCIe hook caps payload DMA: goodput follows the cap, not the 400G port."""
    net, rdma = make(hosts=2)
    rdma.nic(0).set_pcie_rate_cap(100e9)
    m = rdma.post(0, 1, 2 << 20)
    rdma.run()
    assert rdma.nic(0).pcie_rate_cap_bps == 100e9
    assert goodput(net, m) == pytest.approx(100e9, rel=2e-3)


def test_post_trace_uses_rank_map_and_start_times() -> None:
    _net, rdma = make(hosts=4, cfg=NicConfig(cc="none"))
    trace = pd.DataFrame(
        {
            "step": 0,
            "layer": 0,
            "phase": "dispatch",
            "src_rank": [0, 1, 2, 3, 0],
            "dst_rank": [1, 2, 3, 0, 0],
            "bytes": [10_000, 20_000, 30_000, 40_000, 5],
            "tokens": 1,
            "start_s": [0.0, 1e-6, 2e-6, 3e-6, 0.0],
            "hop": ["rdma", "rdma", "rdma", "scaleup", "rdma"],
        }
    )
    msgs = rdma.post_trace(trace, [0, 1, 2, 3], t0=10e-6)
    assert [m.tag for m in msgs] == [0, 1, 2]  # scaleup row and same-NIC row not posted
    rdma.run()
    t = rdma.message_table()
    assert list(t.bytes) == [10_000, 20_000, 30_000]
    assert list(t.post_s) == pytest.approx([10e-6, 11e-6, 12e-6])
    assert t.done_s.notna().all()
    with pytest.raises(ValueError, match="lacks column"):
        rdma.post_trace(trace.drop(columns=["hop"]), [0, 1, 2, 3])


def test_config_parsing_and_errors() -> None:
    cfg = NicConfig.from_mapping(
        {"mtu": "2KiB", "pps": "200Mpps", "rto_min_s": "50us", "reorder_buffer_bytes": "4MiB"}
    )
    assert (cfg.mtu, cfg.pps, cfg.rto_min_s, cfg.reorder_buffer_bytes) == (
        2048,
        200e6,
        pytest.approx(50e-6),
        4 << 20,
    )
    with pytest.raises(ValueError, match="unknown NIC config key"):
        NicConfig.from_mapping({"mtuu": 4096})
    with pytest.raises(ValueError, match="mtu 1500"):
        NicConfig(mtu=1500)
    with pytest.raises(ValueError, match="Did you mean 'spray'"):
        NicConfig(selector="spary")
    with pytest.raises(ValueError, match="'gbn' or 'sr'"):
        NicConfig(reliability="tcp")
    with pytest.raises(ValueError, match="congestion control"):
        make(hosts=2, cfg=NicConfig(cc="dcqnc"))
    _net, rdma = make(hosts=2)
    with pytest.raises(ValueError, match="message size"):
        rdma.post(0, 1, -5)
    with pytest.raises(ValueError, match="no SmartNic for NIC card 9"):
        rdma.post(0, 9, 10)
    with pytest.raises(ValueError, match="two different NICs"):
        rdma.post(1, 1, 10)


def test_tables_have_one_row_per_entity() -> None:
    _net, rdma = make(hosts=3, cfg=NicConfig(cc="dcqcn"))
    rdma.post(0, 1, 5000, tag="a")
    rdma.post(2, 1, 5000, tag="b")
    rdma.run()
    m, q, n = rdma.message_table(), rdma.qp_table(), rdma.nic_table()
    assert len(m) == 2 and list(m.tag) == ["a", "b"]
    assert len(q) == 2 and len(n) == 3
    assert (m.fct_s > 0).all() and not math.isnan(m.delivered_s.iloc[0])
    assert int(n.rx_data_pkts.sum()) == int(q.rx_pkts.sum()) == 4


@pytest.mark.parametrize("reliability", ["sr", "gbn"])
def test_retransmission_timeout_recovers_a_blackout(reliability: str) -> None:
    """NIC 0's uplink is dark for the first 50 us: everything it sends is lost and no ACK
    comes back, so each of its QPs times out once, at its first send + RTO (initial RTO =
    rto_min = 100 us), resends and completes. Every QP is served by the NIC's one timer heap."""
    net, rdma = make(hosts=9, cfg=NicConfig(cc="none", selector="spray", reliability=reliability))
    up = net.uplink("nic0.p0")
    up.set_up(False)
    call_at(net.env, 50e-6, lambda _: up.set_up(True))
    msgs = [rdma.post(0, d, 64 << 10) for d in range(1, 9)]
    rdma.run()
    q = rdma.qp_table()
    rto = rdma.config.rto_min_s
    assert list(q.timeouts) == [1] * 8
    assert (q.rx_delivered_bytes == 64 << 10).all() and (q.acked_bytes == 64 << 10).all()
    for m in msgs:
        assert m.done_s > m.start_s + rto
        assert m.done_s < m.start_s + rto + 30e-6  # resend 8 x 64 KiB at 400G ~ 11 us
    assert up.drops > 0
