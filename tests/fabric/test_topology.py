"""Topology builders and the graph contract: counts from closed forms, rates, validation."""

from __future__ import annotations

import networkx as nx
import pytest
from podsim.fabric.topology import (
    TOPOLOGIES,
    TopologyError,
    build_topology,
    endpoints,
    gpu_nics,
    gpus,
    mac_rate,
    switches,
    validate_graph,
)


def _edges_by_tier(g: nx.Graph) -> dict[str, int]:
    out: dict[str, int] = {}
    for _, _, t in g.edges(data="tier"):
        out[t] = out.get(t, 0) + 1
    return out


def test_registry_lists_builders():
    names = TOPOLOGIES.names()
    assert {"star", "leaf-spine"} <= set(names)
    assert all(desc for _, desc in TOPOLOGIES.describe())


@pytest.mark.parametrize("hosts,planes", [(1, 1), (16, 1), (8, 2)])
def test_star_counts_and_contract(hosts, planes):
    g = build_topology("star", hosts=hosts, planes=planes)
    validate_graph(g)
    assert len(endpoints(g)) == hosts * planes
    assert len(switches(g)) == planes
    assert g.number_of_edges() == hosts * planes
    for sw in switches(g):
        assert g.nodes[sw]["radix"] == hosts
    assert nx.number_connected_components(g) == planes
    assert g.graph["builder"] == "star"
    assert g.graph["params"]["hosts"] == hosts


def test_star_edge_attrs_follow_phy_and_cable():
    g = build_topology("star", hosts=4, phy="800GbE", cable="3m")
    for _, _, d in g.edges(data=True):
        assert d["rate_bps"] == mac_rate("800GbE")
        assert d["length_m"] == 3.0
        assert d["phy"] == "800GbE"
        assert (d["kind"], d["tier"]) == ("scaleout", "nic-leaf")


def test_endpoint_names_and_order():
    g = build_topology("star", hosts=3, planes=2)
    assert endpoints(g) == ["nic0.p0", "nic0.p1", "nic1.p0", "nic1.p1", "nic2.p0", "nic2.p1"]
    d = g.nodes["nic2.p1"]
    assert (d["nic"], d["plane"], d["gpu"], d["server"], d["pod"]) == (2, 1, 2, 2, 2)


@pytest.mark.parametrize("hpl,leaves,ratio", [(8, 4, 1.0), (16, 4, 2.0), (12, 6, 3.0), (4, 2, 0.5)])
def test_leaf_spine_counts_and_oversubscription(hpl, leaves, ratio):
    g = build_topology("leaf-spine", hosts_per_leaf=hpl, leaves=leaves, oversubscription=ratio)
    validate_graph(g)
    spines = hpl / ratio  # equal host and fabric rates
    assert len(endpoints(g)) == hpl * leaves
    assert len(switches(g, "leaf")) == leaves
    assert len(switches(g, "spine")) == spines
    tiers = _edges_by_tier(g)
    assert tiers == {"nic-leaf": hpl * leaves, "leaf-spine": leaves * spines}
    assert nx.is_connected(g)
    # measured ratio: a leaf's downlink capacity over its uplink capacity
    for leaf in switches(g, "leaf"):
        down = sum(d["rate_bps"] for _, _, d in g.edges(leaf, data=True) if d["tier"] == "nic-leaf")
        up = sum(d["rate_bps"] for _, _, d in g.edges(leaf, data=True) if d["tier"] == "leaf-spine")
        assert down / up == pytest.approx(ratio)
        assert g.nodes[leaf]["radix"] == hpl + spines
    assert g.graph["params"]["oversubscription"] == pytest.approx(ratio)


def test_leaf_spine_mixed_rates_and_cables():
    g = build_topology(
        "leaf-spine", hosts_per_leaf=8, leaves=2, host_phy="400GbE", fabric_phy="800GbE"
    )
    validate_graph(g)
    # 8 x 400G down needs 4 x 800G up for 1:1
    assert len(switches(g, "spine")) == 8 * mac_rate("400GbE") / mac_rate("800GbE")
    lengths = {d["tier"]: d["length_m"] for _, _, d in g.edges(data=True)}
    assert lengths == {"nic-leaf": 2.0, "leaf-spine": 30.0}
    phys = {d["tier"]: d["phy"] for _, _, d in g.edges(data=True)}
    assert phys == {"nic-leaf": "400GbE", "leaf-spine": "800GbE"}


def test_leaf_spine_spines_given_sets_ratio():
    g = build_topology("leaf-spine", hosts_per_leaf=8, leaves=2, spines=2)
    assert g.graph["params"]["oversubscription"] == pytest.approx(4.0)


def test_leaf_spine_multi_plane():
    g = build_topology("leaf-spine", hosts_per_leaf=4, leaves=2, planes=2)
    validate_graph(g)
    assert len(endpoints(g)) == 16
    assert "p1.leaf0" in g and "p0.spine3" in g
    assert nx.number_connected_components(g) == 2
    for u, v in g.edges():
        assert g.nodes[u]["plane"] == g.nodes[v]["plane"]


@pytest.mark.parametrize(
    "kwargs,needle",
    [
        ({"oversubscription": 3.0}, "whole number"),
        ({"spines": 2, "oversubscription": 1.0}, "spines=2"),
        ({"leaves": 0}, "leaves"),
        ({"hosts_per_leaf": 2.5}, "hosts_per_leaf"),
        ({"host_phy": "401GbE"}, "401GbE"),
        ({"nic_cable": "two metres"}, "nic_cable"),
    ],
)
def test_leaf_spine_bad_input(kwargs, needle):
    with pytest.raises(ValueError, match=needle):
        build_topology("leaf-spine", **kwargs)


def test_unknown_builder_and_parameter():
    with pytest.raises(ValueError, match="leaf-spine"):
        build_topology("leaf_spine")
    with pytest.raises(TopologyError, match="hosts_per_leaf"):
        build_topology("leaf-spine", host_per_leaf=4)


def test_gpu_helpers_on_generic_graph():
    g = build_topology("leaf-spine", hosts_per_leaf=4, leaves=2, nics_per_server=2, planes=2)
    assert gpus(g) == list(range(8))
    m = gpu_nics(g)
    assert m[5] == ["nic5.p0", "nic5.p1"]
    assert g.nodes["nic5.p0"]["server"] == 2


def test_validate_reports_broken_graph():
    g = build_topology("star", hosts=2)
    g.nodes["nic0.p0"]["role"] = "host"
    g.edges["nic1.p0", "leaf0"]["rate_bps"] = 0.0
    del g.graph["builder"]
    with pytest.raises(TopologyError) as exc:
        validate_graph(g)
    msg = str(exc.value)
    assert "'nic0.p0'" in msg and "rate_bps=0.0" in msg and "'builder'" in msg


def test_validate_catches_radix_and_plane_mismatch():
    g = build_topology("leaf-spine", hosts_per_leaf=2, leaves=2, planes=2)
    g.add_edge("p0.leaf0", "p1.spine0", **dict(g.edges["p0.leaf0", "p0.spine0"]))
    with pytest.raises(TopologyError, match="joins planes"):
        validate_graph(g)


@pytest.mark.parametrize("k", [2, 4, 8])
def test_fat_tree_closed_form_counts(k):
    g = build_topology("fat-tree", k=k)
    validate_graph(g)
    assert len(endpoints(g)) == k**3 // 4
    assert len(switches(g)) == 5 * k**2 // 4
    assert len(switches(g, "leaf")) == k**2 // 2
    assert len(switches(g, "spine")) == k**2 // 2
    assert len(switches(g, "core")) == k**2 // 4
    assert _edges_by_tier(g) == {t: k**3 // 4 for t in ("nic-leaf", "leaf-spine", "spine-core")}
    assert all(g.nodes[s]["radix"] == k for s in switches(g))
    assert nx.is_connected(g)


def test_fat_tree_partial_and_planes():
    g = build_topology("fat-tree", k=4, hosts=10, planes=2)
    validate_graph(g)
    assert len(endpoints(g)) == 20
    assert len(switches(g)) == 2 * 5 * 4**2 // 4
    assert nx.number_connected_components(g) == 2
    # fat-tree pods (group) of the edge switches hosting NICs 0..9: k/2 hosts per edge switch
    assert g.nodes["p1.leaf4"]["group"] == 2
    assert g.has_edge("nic9.p1", "p1.leaf4")
    lengths = {d["tier"]: d["length_m"] for _, _, d in g.edges(data=True)}
    assert lengths == {"nic-leaf": 2.0, "leaf-spine": 30.0, "spine-core": 500.0}


@pytest.mark.parametrize("kwargs", [{"k": 3}, {"k": 4, "hosts": 17}, {"k": 0}])
def test_fat_tree_bad_input(kwargs):
    with pytest.raises(ValueError, match=r"k=|hosts="):
        build_topology("fat-tree", **kwargs)


@pytest.mark.parametrize(
    "servers,gps,gpn,planes,spg",
    [(4, 8, 1, 1, None), (6, 8, 2, 2, None), (8, 4, 1, 4, 2), (5, 8, 1, 1, 2)],
)
def test_rail_counts_and_rail_property(servers, gps, gpn, planes, spg):
    g = build_topology(
        "rail",
        servers=servers,
        gpus_per_server=gps,
        gpus_per_nic=gpn,
        planes=planes,
        servers_per_group=spg,
    )
    validate_graph(g)
    rails = gps // gpn
    group = servers if spg is None else spg
    groups = -(-servers // group)
    spines = group  # 1:1 with equal NIC and fabric rates: one uplink per host port
    assert len(endpoints(g)) == servers * rails * planes
    assert len(switches(g, "leaf")) == planes * groups * rails
    assert len(switches(g, "spine")) == planes * spines
    assert _edges_by_tier(g) == {
        "nic-leaf": servers * rails * planes,
        "leaf-spine": planes * groups * rails * spines,
    }
    assert nx.number_connected_components(g) == planes
    # rail property: GPU local index i is served by NIC i // gpn, which sits on rail leaf i // gpn
    served = gpu_nics(g)
    assert gpus(g) == list(range(servers * gps))
    for gid, ports in served.items():
        s, local = divmod(gid, gps)
        assert len(ports) == planes
        for port in ports:
            d = g.nodes[port]
            assert (d["server"], d["rail"]) == (s, local // gpn)
            (leaf,) = g.neighbors(port)
            assert g.nodes[leaf]["group"] == s // group
            assert leaf.endswith(f"leaf{(s // group) * rails + local // gpn}")


def test_rail_oversubscription_and_bad_sharing():
    g = build_topology("rail", servers=8, oversubscription=2.0)
    assert g.graph["params"]["spines"] == 4
    leaf = switches(g, "leaf")[0]
    down = sum(d["rate_bps"] for _, _, d in g.edges(leaf, data=True) if d["tier"] == "nic-leaf")
    up = sum(d["rate_bps"] for _, _, d in g.edges(leaf, data=True) if d["tier"] == "leaf-spine")
    assert down / up == pytest.approx(2.0)
    with pytest.raises(ValueError, match="gpus_per_nic=3"):
        build_topology("rail", gpus_per_nic=3)
