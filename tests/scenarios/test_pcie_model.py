"""The cluster's node trees (nic.pcie.cluster), the node coupling (nic.pcie.coupling) and
the API the flow engine calls; closed forms computed here from the layout parameters."""

from __future__ import annotations

import math

import numpy as np
import pytest
from podsim.fabric.maxmin import maxmin_rates
from podsim.fabric.packet import ROCE_OVERHEAD
from podsim.nic.pcie import on_card_switch
from podsim.nic.pcie.coupling import NodeCoupling
from podsim.nic.pcie.devices import RootComplex, Ssd
from podsim.scenarios.build.cluster import build_cluster
from podsim.scenarios.errors import ScenarioError
from podsim.scenarios.input.loader import load_scenario

GOODPUT = 400e9 * 4096 / (4096 + ROCE_OVERHEAD)


def link_rate(lanes: int) -> float:
    return lanes * 32e9 * 128 / 130 * 256 / (256 + 24)


def read_rate(lanes: int) -> float:
    """A GPUDirect transmit is the NIC reading: 256 B completions with a 20 B (3-DW) header."""
    return lanes * 32e9 * 128 / 130 * 256 / (256 + 20)


def cluster(topology: dict, layout: str | None, ranks: int, layout_params: dict | None = None,
            storage: dict | None = None):  # fmt: skip
    workload: dict = {"synthetic": {"pattern": "uniform", "ranks": ranks, "size": "64KiB"}}
    if storage is not None:
        workload["storage"] = storage
    doc = {
        "name": "m",
        "cluster": {"topology": topology, "layout": layout, "layout_params": layout_params or {}},
        "workload": workload,
    }
    sc, _ = load_scenario(doc)
    return build_cluster(sc)


RAIL = {"name": "rail", "params": {"servers": 2, "gpus_per_server": 4, "gpus_per_nic": 2}}


# ---------------------------------------------------------------------------- coupling


def test_coupling_nic_cap_is_pcie_share_or_none_when_the_nic_binds():
    tree = on_card_switch(gpus=2, nics=1, nic_lanes=8)
    nc = NodeCoupling(tree, GOODPUT)
    both = {("gpu0", "nic0", "tx"): 1.0, ("gpu1", "nic0", "tx"): 1.0}
    res = nc.rates(both)
    assert res.nic_cap("nic0", "tx") == pytest.approx(read_rate(8))
    assert res.rate_bps[("gpu0", "nic0", "tx")] == pytest.approx(read_rate(8) / 2)
    assert res.nic_cap("nic0", "rx") is None  # nothing received
    wide = NodeCoupling(on_card_switch(gpus=2, nics=1), GOODPUT).rates(both)
    assert wide.nic_cap("nic0", "tx") is None  # x16 > 400G: the NIC's own port binds
    assert wide.rate_bps[("gpu1", "nic0", "tx")] == pytest.approx(GOODPUT / 2)
    # memo: the same active set is solved once
    nc.rates(dict(both))
    assert (nc.solves, nc.hits) == (1, 1)


def test_coupling_storage_read_takes_its_share_of_the_gpu_link():
    tree = on_card_switch(gpus=1, nics=1, ssds=1)
    res = NodeCoupling(tree, GOODPUT).rates(
        {("nic0", "gpu0", "rx"): 1.0, ("ssd0", "gpu0", "gds"): 1.0}
    )
    ssd = Ssd().read_bps
    assert res.rate_bps[("ssd0", "gpu0", "gds")] == pytest.approx(ssd)
    assert res.nic_cap("nic0", "rx") == pytest.approx(link_rate(16) - ssd)
    assert res.bottleneck[("nic0", "gpu0", "rx")] == "sw0->gpu0"


def test_coupling_rejects_bad_keys_and_goodput():
    tree = on_card_switch(gpus=1, nics=1)
    nc = NodeCoupling(tree, GOODPUT)
    with pytest.raises(ValueError, match="gpu -> nic"):
        nc.check_key(("nic0", "gpu0", "tx"))
    with pytest.raises(ValueError, match="gpu7"):
        nc.check_key(("gpu7", "nic0", "tx"))
    with pytest.raises(ValueError, match="nic3"):
        NodeCoupling(tree, {"nic3": 1e9})
    assert NodeCoupling(tree).rates({}).rate_bps == {}


# ---------------------------------------------------------------------------- building


def test_cluster_trees_follow_the_topology():
    cl = cluster(RAIL, "on-card-switch", 8, {"ssds": 2})
    p = cl.pcie
    assert sorted(p.nodes) == [0, 1]
    assert p.nodes[0].coupling is p.nodes[1].coupling  # alike servers share one tree
    tree = cl.layout
    assert len(tree.gpus) == 4 and len(tree.nics) == 2 and len(tree.ssds) == 2
    # NIC card of rank r serves GPUs 2k, 2k+1 of its server: the tree says the same
    for r in range(8):
        assert p.rank_gpu_dev[r] in tree.gpus_of_nic(p.rank_nic_dev[r])
    assert p.rank_nic_dev[5] == "nic0" and p.rank_gpu_dev[5] == "gpu1"
    assert p.same_card(4, 5) and not p.same_card(5, 6)
    assert p.ssd_of(2) == "ssd1"  # the SSD on its own NIC card
    assert cl.extra["pcie"]["gpu_nic_path_classes"] == ["PIX"]
    assert cl.extra["pcie"]["nic_goodput_bps"] == pytest.approx(GOODPUT)
    # a receive is a posted write (one hop, 115 ns); a transmit is the NIC's read: request
    # NIC -> switch -> GPU, the GPU's 1 us read latency, completion GPU -> switch -> NIC
    assert np.allclose(p.rx_latency_s, 115e-9)
    assert np.allclose(p.tx_latency_s, 115e-9 + 1e-6 + 115e-9)


def test_no_layout_means_no_tree():
    cl = cluster(RAIL, None, 8)
    assert cl.pcie is None and cl.layout is None and "pcie" not in cl.extra


@pytest.mark.parametrize(
    ("params", "key"),
    [
        ({"gpus": 8}, "cluster.layout_params.gpus"),
        ({"gpus_per_nic": 1}, "cluster.layout_params.gpus_per_nic"),
        ({"nics": 4}, "cluster.layout_params.nics"),
        ({"gpu_lanes": 3}, "cluster.layout_params.gpu_lanes"),
        ({"wings": 2}, "cluster.layout_params.wings"),
    ],
)
def test_layout_params_that_contradict_the_topology_name_the_key(params, key):
    with pytest.raises(ScenarioError) as err:
        cluster(RAIL, "on-card-switch", 8, params)
    assert err.value.path == key


def test_layout_params_that_agree_are_accepted():
    cl = cluster(RAIL, "external-switch", 8, {"gpus": 4, "gpus_per_nic": 2})
    assert len(cl.layout.nics) == 2


@pytest.mark.parametrize(
    ("layout", "params", "storage", "key"),
    [
        (None, {}, {"reads_per_gpu": "1GiB"}, "workload.storage"),
        ("on-card-switch", {}, {"reads_per_gpu": "1GiB"}, "cluster.layout_params.ssds"),
        ("on-card-switch", {"ssds": 2}, {"reads_per_gpu": "1GiB", "ranks": [9]},
         "workload.storage.ranks[0]"),
    ],
)  # fmt: skip
def test_storage_needs_a_layout_with_ssds(layout, params, storage, key):
    with pytest.raises(ScenarioError) as err:
        cluster(RAIL, layout, 8, params, storage)
    assert err.value.path == key


def test_storage_size_must_be_positive():
    with pytest.raises(ScenarioError, match="reads_per_gpu"):
        cluster(RAIL, "on-card-switch", 8, {"ssds": 2}, {"reads_per_gpu": 0})


# ---------------------------------------------------------------------------- flow engine API


def test_flow_caps_two_gpus_share_their_nic_card():
    cl = cluster(RAIL, "on-card-switch", 8, {"nic_lanes": 8})
    # ranks 0 and 1 share card 0 and send to server 1; rank 2 alone on card 1
    caps, stor = cl.pcie.flow_caps([0, 1, 2], [4, 6, 5])
    # ranks 0 and 1 read over card 0's x8 link (completions: read_rate); rank 0's receiver
    # (rank 4) shares card 2's x8 link (writes: link_rate) with rank 5's receive stream
    assert caps[:2] == pytest.approx([link_rate(8) / 2, read_rate(8) / 2])
    # rank 2's stream has card 1 to itself, but its receiver (rank 5) shares card 2's x8 link
    # with rank 4's receive stream
    assert caps[2] == pytest.approx(link_rate(8) / 2)
    assert stor.size == 0
    alone, _ = cl.pcie.flow_caps([2], [5])
    assert alone == pytest.approx([link_rate(8)])


def test_flow_caps_root_complex_p2p_and_storage():
    cl = cluster(RAIL, "root-complex", 8, {"ssds": 1})
    p2p = RootComplex().p2p_limit_bps
    caps, stor = cl.pcie.flow_caps([0, 1], [4, 0], storage_ranks=[4])
    assert caps[0] == pytest.approx(p2p)  # GPU -> CPU -> NIC: the root port's P2P limit
    assert caps[1] == pytest.approx(p2p)  # same card: GPU -> CPU -> GPU
    assert stor == pytest.approx([Ssd().read_bps])  # SSD -> GPU, media-bound
    # two streams entering the CPU from one GPU's root port share its P2P limit
    shared, _ = cl.pcie.flow_caps([0, 0], [4, 1])
    assert shared == pytest.approx([p2p / 2, p2p / 2])


def test_flow_resources_joint_solve_matches_closed_form():
    cl = cluster(RAIL, "on-card-switch", 8, {"nic_lanes": 8, "ssds": 2})
    p = cl.pcie
    src, dst = np.array([0, 1, 0]), np.array([4, 6, 1])
    idx, coef = p.flow_loads(src, dst, storage_ranks=[4])
    names, cap = p.constraint_names, p.constraint_capacity_bps
    assert idx.shape[0] == 4 and idx.max() < len(names)
    rows, cols = np.nonzero(idx >= 0)
    a = np.zeros((len(names), 4))
    a[idx[rows, cols], rows] = coef[rows, cols]
    res = maxmin_rates(a, cap)
    used = {names[i] for i in idx[0] if i >= 0}
    assert "s0:gpu0->sw0" in used and "s1:sw0->gpu0" in used  # both ends' trees
    # flows 0 and 1 share card 0's x8 switch -> NIC link; the P2P copy stays off it
    assert res.rates[0] == pytest.approx(read_rate(8) / 2)
    assert res.rates[1] == pytest.approx(read_rate(8) / 2)
    # rank 4's GPU link carries flow 0's NIC writes (x8-bound) and the SSD read (media-bound)
    assert res.rates[3] == pytest.approx(Ssd().read_bps)
    assert math.isfinite(res.rates[2]) and res.rates[2] > link_rate(8)
