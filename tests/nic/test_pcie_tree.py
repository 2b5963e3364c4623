from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
from podsim.fabric.maxmin import maxmin_rates
from podsim.nic.pcie import (
    PcieLink,
    PcieSwitch,
    PcieTree,
    RootComplex,
    build_layout,
    external_switch,
)

CUSTOM = {
    "name": "two-level",
    "devices": {
        "root0": {"role": "root"},
        "sw0": {"role": "switch"},
        "sw1": {"role": "switch", "hop_latency_s": "100ns"},
        "gpu0": {"role": "gpu"},
        "gpu1": {"role": "gpu"},
        "nic0": {"role": "nic", "serves": ["gpu0", "gpu1"]},
    },
    "links": [
        {"a": "root0", "b": "sw0", "lanes": 16},
        {"a": "sw0", "b": "sw1", "lanes": 16},
        {"a": "sw0", "b": "nic0", "lanes": 16},
        {"a": "sw1", "b": "gpu0", "lanes": 16},
        {"a": "root0", "b": "gpu1", "lanes": 8, "latency_s": "10ns"},
    ],
}


def test_custom_tree_classes_and_latencies():
    tree = build_layout(CUSTOM)
    assert tree.path_class("gpu0", "nic0") == "PXB"
    assert tree.path_class("gpu1", "nic0") == "PHB"
    assert tree.path_class("gpu0", "gpu0") == "X"
    assert tree.latency("gpu0", "nic0") == pytest.approx(100e-9 + 115e-9)
    assert tree.latency("gpu1", "nic0") == pytest.approx(10e-9 + 250e-9 + 115e-9)
    p = tree.path("gpu1", "nic0")
    assert p.nodes == ("gpu1", "root0", "sw0", "nic0")
    assert p.links == (("gpu1", "root0"), ("root0", "sw0"), ("sw0", "nic0"))
    assert "root0.p2p[gpu1]" in p.resources and "sw0" in p.resources
    assert p.rate_bps == pytest.approx(PcieLink(lanes=8).effective_bps)


def test_paths_are_symmetric_in_class_and_latency_but_not_in_direction():
    tree = external_switch(4, 4, sockets=2)
    for a in tree.gpus:
        for b in tree.nics:
            assert tree.path_class(a, b) == tree.path_class(b, a)
            assert tree.latency(a, b) == pytest.approx(tree.latency(b, a))
            fwd, back = tree.path(a, b), tree.path(b, a)
            assert {f"{u}->{v}" for u, v in fwd.links}.isdisjoint(
                {f"{u}->{v}" for u, v in back.links}
            )


def test_sys_path_uses_inter_socket_link_and_both_p2p_limits():
    tree = external_switch(
        4, 4, sockets=2, inter_socket={"rate_bps": "20GB/s", "latency_s": "200ns"}
    )
    p = tree.path("gpu0", "nic3")
    assert p.path_class == "SYS"
    assert {"root0.p2p[sw0]", "root0->root1"} <= set(p.resources)
    assert not any(r.startswith("root1.p2p") for r in p.resources)  # enters root1 by the UPI
    assert p.rate_bps == pytest.approx(160e9)
    sw, rc = tree.spec("sw0"), tree.spec("root0")
    assert p.latency_s == pytest.approx(2 * sw.hop_latency_s + 2 * rc.latency_s + 200e-9)


def test_resources_and_incidence():
    tree = external_switch(2, 2, ssds=1)
    names = tree.resource_names
    assert len(names) == len(set(names))
    assert {"sw0", "root0.p2p[sw0]", "ssd0.read", "ssd0.write", "gpu0->sw0"} <= set(names)
    assert "root0.p2p" not in names  # no aggregate P2P capacity by default
    cap = tree.resource_capacity_bps
    # a non-blocking switch's capacity is the sum of its ports' rates
    ports = [PcieLink(lanes=ln).effective_bps for ln in (16, 16, 16, 16, 16, 4)]  # up, 2+2, ssd
    assert cap[tree.resource_index("sw0")] == pytest.approx(sum(ports))
    a, c, n = tree.stream_incidence([("gpu0", "nic0"), ("ssd0", "gpu1")])
    assert a.shape == (len(names), 2) and n == names and np.array_equal(c, cap)
    col0 = {names[i] for i in a[:, [0]].nonzero()[0]}
    assert col0 == set(tree.path("gpu0", "nic0").resources)
    res = maxmin_rates(a, c)
    assert res.rates[1] == pytest.approx(14e9 * 8)
    with pytest.raises(ValueError, match="no PCIe resource"):
        tree.resource_index("sw9")


def test_invalid_trees_are_rejected():
    g = nx.Graph()
    g.add_node("root0", role="root", spec=RootComplex())
    g.add_node("gpu0", role="gpu")
    with pytest.raises(ValueError, match="has 0 links"):
        PcieTree(g)
    g.add_edge("root0", "gpu0", link=PcieLink())
    g.add_node("sw0", role="switch", spec=PcieSwitch())
    with pytest.raises(ValueError, match="must be a tree"):
        PcieTree(g)
    g.add_edge("sw0", "root0", link=PcieLink())
    g.add_node("cpu", role="host")
    with pytest.raises(ValueError, match="role 'host'"):
        PcieTree(g)
    bad = {**CUSTOM, "links": [*CUSTOM["links"], {"a": "sw1", "b": "gpu7"}]}
    with pytest.raises(ValueError, match="unknown device 'gpu7'"):
        build_layout(bad)
    with pytest.raises(ValueError, match="not a GPU"):
        build_layout(
            {**CUSTOM, "devices": {**CUSTOM["devices"], "nic0": {"role": "nic", "serves": ["sw0"]}}}
        )


def test_summary_lists_every_link():
    tree = external_switch(2, 2)
    df = tree.summary()
    assert len(df) == tree.graph.number_of_edges()
    assert set(df["lanes"]) == {16}
