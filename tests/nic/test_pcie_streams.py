"""Issue 5 "Must show" (PCIe part): closed forms computed here from the layout's parameters."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from podsim.fabric.packet import ROCE_OVERHEAD
from podsim.nic.pcie import (
    PcieLink,
    Stream,
    external_switch,
    gpudirect_streams,
    nic_dma_caps,
    on_card_switch,
    root_complex,
    solve_streams,
)

GB = 8e9  # bits/s per GB/s
NIC_MAC_BPS = 400e9


def goodput(payload: int, mac_bps: float = NIC_MAC_BPS) -> float:
    """RoCEv2 goodput of a NIC port (docs/physics.md): P / (P + 82) x MAC rate."""
    return payload / (payload + ROCE_OVERHEAD) * mac_bps


def link_rate(lanes: int, mps: int = 256, header: int = 24) -> float:
    """Gen5 effective payload rate per direction from first principles."""
    return lanes * 32e9 * 128 / 130 * mps / (mps + header)


def read_rate(lanes: int, completion: int = 256) -> float:
    """Gen5 payload rate of DMA-read completions (3-DW header, 20 B on the wire)."""
    return lanes * 32e9 * 128 / 130 * completion / (completion + 20)


#: Capacity (write-payload units) a read's requests take in the reverse direction per payload
#: bit: one 24 B Memory Read TLP per 512 B (the default MRRS), over a 256 B write's 280 B.
REQ = 24 / 512 * 256 / 280


@pytest.mark.parametrize("lanes", [4, 8, 16])
@pytest.mark.parametrize("payload", [1024, 4096])
@pytest.mark.parametrize("layout", [on_card_switch, external_switch])
def test_gpu_to_nic_p2p_is_min_of_pcie_path_and_nic_goodput(layout, lanes, payload):
    tree = layout(gpus=2, nics=2, gpu_lanes=lanes)
    nic_bps = goodput(payload)
    res = solve_streams(tree, [Stream("gpu0", "nic0")], nic_tx_bps=nic_bps)
    expected = min(link_rate(lanes), link_rate(16), nic_bps)
    assert res.rate("gpu0", "nic0") == pytest.approx(expected, rel=1e-12)
    assert res.bottleneck[0] == ("nic0.tx" if nic_bps < link_rate(lanes) else "gpu0->sw0")
    assert tree.path("gpu0", "nic0").rate_bps == pytest.approx(min(link_rate(lanes), link_rate(16)))


def test_x16_with_400g_nic_is_nic_bound_by_physics_margin():
    tree = on_card_switch(gpus=1, nics=1)
    res = solve_streams(tree, [Stream("gpu0", "nic0")], nic_tx_bps=NIC_MAC_BPS)
    pcie = tree.path("gpu0", "nic0").rate_bps
    assert pcie == pytest.approx(link_rate(16))
    assert res.rate("gpu0", "nic0") == pytest.approx(NIC_MAC_BPS)
    assert res.bottleneck == ("nic0.tx",)
    # docs/physics.md: "a 400GbE NIC needs 50 GB/s: Gen5 x16 leaves 13-15 % headroom".
    headroom = (pcie - NIC_MAC_BPS) / pcie
    assert 0.13 <= headroom <= 0.15
    assert pcie / NIC_MAC_BPS - 1 == pytest.approx(0.152, abs=0.001)


def test_dllp_overhead_eats_the_headroom():
    frac = 0.05
    tree = on_card_switch(gpus=1, nics=1, link={"dllp_overhead": frac})
    assert tree.path("gpu0", "nic0").rate_bps == pytest.approx(link_rate(16) * (1 - frac))


@pytest.mark.parametrize("direction", ["tx", "rx"])
def test_two_gpus_sharing_an_x16_uplink_to_a_400g_nic_get_half_each(direction):
    tree = external_switch(gpus=2, gpus_per_nic=2)
    assert tree.gpus_of_nic("nic0") == ["gpu0", "gpu1"]
    g = goodput(4096)
    other = "rx" if direction == "tx" else "tx"
    streams = gpudirect_streams(tree, **{f"{direction}_bps": math.inf, f"{other}_bps": None})
    res = solve_streams(tree, streams, **{f"nic_{direction}_bps": g})
    rates = res.rate_bps
    share = min(g, link_rate(16)) / 2
    assert rates == pytest.approx([share, share], rel=1e-12)


def test_two_gpus_sharing_an_x8_nic_link_split_the_link():
    tree = external_switch(gpus=2, gpus_per_nic=2, nic_lanes=8)
    res = solve_streams(tree, gpudirect_streams(tree, rx_bps=None), nic_tx_bps=goodput(4096))
    # transmit is the NIC reading: the x8 link carries completions (256 B + 20 B each)
    assert res.rate_bps == pytest.approx([read_rate(8) / 2] * 2, rel=1e-12)
    assert set(res.bottleneck) == {"sw0->nic0"}


def _ssd_vs_network(nic_bps: float, ssd_into: str, net_label: str = "rx"):
    tree = on_card_switch(gpus=2, nics=2, ssds=2)  # ssd0 sits on card 0 with gpu0 and nic0
    net = (
        Stream("nic0", "gpu0", label="rx")
        if net_label == "rx"
        else Stream("gpu0", "nic0", label="tx")
    )
    gds = Stream("ssd0", ssd_into, label="gds")
    kw = {"nic_rx_bps": nic_bps} if net_label == "rx" else {"nic_tx_bps": nic_bps}
    return tree, solve_streams(tree, [net, gds], **kw)


def test_ssd_read_lowers_network_goodput_by_the_link_budget_when_the_link_saturates():
    ssd = 14 * GB  # Gen5 NVMe read (docs/physics.md)
    g = goodput(4096)
    tree, res = _ssd_vs_network(g, "gpu0")
    e = tree.path("sw0", "gpu0").rate_bps  # the shared link: card switch -> gpu0
    assert g + ssd > e  # 49 + 14 GB/s > 57.6 GB/s: the link saturates
    # Max-min on the shared link: the SSD's 14 GB/s is below the fair half, so it gets it all.
    assert res.rate("ssd0", "gpu0") == pytest.approx(ssd)
    assert res.rate("nic0", "gpu0") == pytest.approx(e - ssd)
    assert g - res.rate("nic0", "gpu0") == pytest.approx(g + ssd - e)  # the predicted loss
    assert res.bottleneck == ("sw0->gpu0", "ssd0.read")
    assert res.load("sw0->gpu0") == pytest.approx(e)


@pytest.mark.parametrize(
    ("nic_bps", "ssd_into", "net"),
    [
        (200e9 * 4096 / 4178, "gpu0", "rx"),  # 200G NIC: 24.5 + 14 GB/s fits in 57.6 GB/s
        (None, "gpu0", "tx"),  # the network sends (gpu0 -> nic0): opposite link direction
        (None, "gpu1", "rx"),  # the SSD feeds a GPU on the other card
    ],
)
def test_ssd_read_costs_the_network_nothing_when_no_shared_link_saturates(nic_bps, ssd_into, net):
    g = goodput(4096) if nic_bps is None else nic_bps
    _, res = _ssd_vs_network(g, ssd_into, net)
    pair = ("nic0", "gpu0") if net == "rx" else ("gpu0", "nic0")
    assert res.rate(*pair) == pytest.approx(g, rel=1e-12)
    assert res.rate("ssd0", ssd_into) == pytest.approx(14 * GB)


def test_host_traffic_on_the_gpu_link_removes_the_headroom():
    tree = on_card_switch(gpus=1, nics=1)
    host = Stream("root0", "gpu0", 10 * GB, label="h2d")
    res = solve_streams(tree, [Stream("nic0", "gpu0"), host], nic_rx_bps=NIC_MAC_BPS)
    assert res.rate("nic0", "gpu0") == pytest.approx(link_rate(16) - 10 * GB)
    assert res.bottleneck[0] == "sw0->gpu0"


def test_root_complex_path_is_slower_than_pix_by_latency_and_p2p_cap():
    pix = on_card_switch(gpus=1, nics=1)
    phb = root_complex(gpus=1, nics=1)
    assert pix.path_class("gpu0", "nic0") == "PIX" and phb.path_class("gpu0", "nic0") == "PHB"
    sw, rc = pix.spec("sw0"), phb.spec("root0")
    assert phb.latency("gpu0", "nic0") - pix.latency("gpu0", "nic0") == pytest.approx(
        rc.latency_s - sw.hop_latency_s
    )
    g = goodput(4096)
    r_pix = solve_streams(pix, [Stream("gpu0", "nic0")], nic_tx_bps=g)
    r_phb = solve_streams(phb, [Stream("gpu0", "nic0")], nic_tx_bps=g)
    assert r_pix.rate_bps[0] == pytest.approx(min(g, link_rate(16)))
    assert r_phb.rate_bps[0] == pytest.approx(min(g, link_rate(16), rc.p2p_limit_bps))
    assert r_phb.bottleneck == ("root0.p2p[gpu0]",)
    assert r_phb.latency_s[0] - r_pix.latency_s[0] == pytest.approx(rc.latency_s - sw.hop_latency_s)


def test_root_port_p2p_limit_is_shared_by_streams_entering_by_that_port():
    tree = root_complex(gpus=2, nics=2, root={"p2p_limit_bps": "40GB/s"})
    # gpu0 -> nic0 and gpu1 -> nic1 enter by different root ports: each gets the full limit.
    res = solve_streams(tree, gpudirect_streams(tree, rx_bps=None), nic_tx_bps=NIC_MAC_BPS)
    assert res.rate_bps == pytest.approx([40 * GB, 40 * GB])
    # Both GPUs sending to nic0 share nic0's link, not a P2P port.
    both = solve_streams(tree, [Stream("gpu0", "nic0"), Stream("gpu1", "nic0")])
    assert both.rate_bps == pytest.approx([link_rate(16) / 2] * 2)
    assert set(both.bottleneck) == {"root0->nic0"}
    # Cross-switch (PHB) traffic from two GPUs under one switch shares that uplink's P2P limit.
    ext = external_switch(gpus=4, nics=4)
    cross = solve_streams(ext, [Stream("gpu0", "nic2"), Stream("gpu1", "nic3")])
    lim = ext.spec("root0").p2p_limit_bps
    assert cross.rate_bps == pytest.approx([lim / 2, lim / 2])
    assert set(cross.bottleneck) == {"root0.p2p[sw0]"}
    # Host-memory traffic does not count against the P2P limits.
    host = solve_streams(tree, [Stream("root0", "nic0"), Stream("gpu0", "root0")])
    assert host.rate_bps == pytest.approx([link_rate(16)] * 2)


def test_aggregate_p2p_capacity_binds_when_set():
    tree = root_complex(gpus=2, nics=2, root={"p2p_capacity_bps": "40GB/s"})
    res = solve_streams(tree, gpudirect_streams(tree, rx_bps=None))
    assert res.rate_bps == pytest.approx([20 * GB, 20 * GB])
    assert set(res.bottleneck) == {"root0.p2p"}


def test_ssd_is_capped_by_its_media_rate_and_link():
    tree = on_card_switch(gpus=1, nics=1, ssds=1)
    res = solve_streams(tree, [Stream("ssd0", "gpu0")])
    assert res.rate_bps[0] == pytest.approx(min(14 * GB, link_rate(4)))
    assert res.bottleneck == ("ssd0.read",)
    slow = on_card_switch(gpus=1, nics=1, ssds=1, ssd_lanes=2)
    assert solve_streams(slow, [Stream("ssd0", "gpu0")]).bottleneck == ("ssd0->sw0",)


def test_switch_capacity_binds_when_set():
    tree = external_switch(gpus=2, nics=2, switch={"capacity_bps": "40GB/s"})
    res = solve_streams(tree, gpudirect_streams(tree))  # 4 streams through sw0
    assert res.rate_bps == pytest.approx([10 * GB] * 4)
    assert set(res.bottleneck) == {"sw0"}


def test_weights_and_demands():
    tree = external_switch(gpus=2, gpus_per_nic=2)
    streams = [Stream("gpu0", "nic0", weight=3.0), Stream("gpu1", "nic0", weight=1.0)]
    res = solve_streams(tree, streams)
    e = link_rate(16)
    assert res.rate_bps == pytest.approx([0.75 * e, 0.25 * e])
    capped = solve_streams(tree, [Stream("gpu0", "nic0", 5 * GB), Stream("gpu1", "nic0")])
    assert capped.rate_bps == pytest.approx([5 * GB, e - 5 * GB])
    assert capped.bottleneck == ("demand", "sw0->nic0")
    frame = capped.to_frame()
    assert list(frame.columns) == [
        "src",
        "dst",
        "label",
        "demand_bps",
        "rate_bps",
        "bottleneck",
        "latency_s",
    ]


def test_bad_streams_are_rejected():
    tree = on_card_switch(gpus=1, nics=1)
    with pytest.raises(ValueError, match="starts and ends"):
        Stream("gpu0", "gpu0")
    with pytest.raises(ValueError, match="demand_bps"):
        Stream("gpu0", "nic0", -1.0)
    with pytest.raises(ValueError, match="Did you mean 'gpu0'"):
        solve_streams(tree, [Stream("gpu9", "nic0")])
    with pytest.raises(ValueError, match="unknown NIC"):
        solve_streams(tree, [Stream("gpu0", "nic0")], nic_tx_bps={"nic7": 1e9})


def test_link_rate_helper_matches_the_model():
    assert PcieLink(lanes=8).effective_bps == pytest.approx(link_rate(8))


def test_nic_dma_caps_for_the_nic_engine():
    shared = external_switch(gpus=4, gpus_per_nic=2)
    caps = nic_dma_caps(shared)
    assert set(caps) == {"nic0", "nic1"}
    # two GPUs at full load both ways: the NIC -> switch direction carries the receive writes
    # and the transmit reads' requests, rx + REQ x tx = C; max-min gives both the same level
    both = link_rate(16) / (1 + REQ)
    for nic in caps:
        assert caps[nic] == {"tx": pytest.approx(both), "rx": pytest.approx(both)}
    card = on_card_switch(gpus=2, nics=2, ssds=2)
    with_ssd = nic_dma_caps(card, extra=[Stream("ssd0", "gpu0", label="gds")])
    # sw0 -> gpu0 carries the SSD's 14 GB/s, the receive writes and the read requests
    shared = (link_rate(16) - 14 * GB) / (1 + REQ)
    assert with_ssd["nic0"] == {"tx": pytest.approx(shared), "rx": pytest.approx(shared)}
    assert with_ssd["nic1"] == {"tx": pytest.approx(both), "rx": pytest.approx(both)}
    capped = nic_dma_caps(card, nic_bps=goodput(4096))
    assert capped["nic1"]["tx"] == pytest.approx(goodput(4096))


@settings(max_examples=40, deadline=None)
@given(
    layout=st.sampled_from([external_switch, on_card_switch, root_complex]),
    gpus_per_nic=st.sampled_from([1, 2]),
    sockets=st.sampled_from([1, 2]),
    seed=st.integers(0, 2**31),
)
def test_property_streams_never_overload_and_each_is_justified(layout, gpus_per_nic, sockets, seed):
    tree = layout(4, gpus_per_nic=gpus_per_nic, ssds=2, sockets=sockets)
    rng = np.random.default_rng(seed)
    names = tree.gpus + tree.nics + tree.ssds + tree.devices("root")
    streams = []
    for _ in range(int(rng.integers(1, 9))):
        src, dst = rng.choice(len(names), size=2, replace=False)
        demand = math.inf if rng.random() < 0.5 else float(rng.uniform(1, 80)) * GB
        streams.append(Stream(names[src], names[dst], demand))
    res = solve_streams(tree, streams, nic_tx_bps=NIC_MAC_BPS)
    assert np.all(res.load_bps <= res.capacity_bps * (1 + 1e-9))
    for i, (s, b) in enumerate(zip(res.streams, res.bottleneck, strict=True)):
        if b == "demand":
            assert res.rate_bps[i] == pytest.approx(s.demand_bps)
            continue
        assert b in tree.path(s.src, s.dst).resources or b == f"{s.dst}.tx"
        assert res.load(b) == pytest.approx(res.capacity_bps[res.resource_names.index(b)])
        users = [
            j
            for j, t in enumerate(res.streams)
            if b in tree.path(t.src, t.dst).resources or b == f"{t.dst}.tx"
        ]
        assert res.rate_bps[i] >= max(res.rate_bps[users]) * (1 - 1e-9)
