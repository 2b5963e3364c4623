"""Bisection bandwidth: max-flow over the graph equals the closed forms from the inputs."""

from __future__ import annotations

import pytest
from podsim.fabric.bisection import bisection_bandwidth, bisection_closed_form, natural_split
from podsim.fabric.phy import get_phy
from podsim.fabric.topology import TopologyError, build_topology, endpoints

R400 = get_phy("400GbE").mac_rate_bps
R800 = get_phy("800GbE").mac_rate_bps
R200 = get_phy("200GbE").mac_rate_bps


def _check(g, expected):
    assert bisection_bandwidth(g) == pytest.approx(expected, rel=1e-12)
    assert bisection_closed_form(g) == pytest.approx(expected, rel=1e-12)


def test_natural_split_keeps_card_planes_together():
    g = build_topology("star", hosts=5, planes=2)
    a = natural_split(g)
    assert a == ["nic0.p0", "nic0.p1", "nic1.p0", "nic1.p1"]


@pytest.mark.parametrize("hosts,planes", [(2, 1), (7, 1), (16, 2)])
def test_star(hosts, planes):
    g = build_topology("star", hosts=hosts, planes=planes)
    _check(g, planes * (hosts // 2) * R400)


@pytest.mark.parametrize(
    "hpl,leaves,ratio,host_phy,fabric_phy",
    [
        (8, 4, 1.0, "400GbE", "400GbE"),
        (16, 4, 2.0, "400GbE", "400GbE"),
        (12, 2, 3.0, "400GbE", "400GbE"),
        (8, 6, 1.0, "400GbE", "800GbE"),
        (16, 2, 4.0, "400GbE", "800GbE"),
        (4, 2, 0.5, "400GbE", "400GbE"),
    ],
)
def test_leaf_spine_with_oversubscription(hpl, leaves, ratio, host_phy, fabric_phy):
    g = build_topology(
        "leaf-spine",
        hosts_per_leaf=hpl,
        leaves=leaves,
        oversubscription=ratio,
        host_phy=host_phy,
        fabric_phy=fabric_phy,
    )
    r = get_phy(host_phy).mac_rate_bps
    # half the hosts at line rate, divided by the oversubscription when it is above 1
    _check(g, hpl * leaves * r / 2 / max(1.0, ratio))


@pytest.mark.parametrize("k,planes", [(2, 1), (4, 1), (8, 1), (4, 2)])
def test_fat_tree_is_full_bisection(k, planes):
    g = build_topology("fat-tree", k=k, planes=planes)
    _check(g, planes * (k**3 / 4) / 2 * R400)


def test_fat_tree_slow_fabric_limits_bisection():
    g = build_topology("fat-tree", k=4, host_phy="400GbE", fabric_phy="200GbE")
    _check(g, (4**3 / 4) / 2 * R200)


@pytest.mark.parametrize("servers,gps,gpn,planes", [(4, 8, 1, 1), (6, 8, 2, 2), (2, 4, 1, 3)])
def test_rail_single_group_needs_no_spine(servers, gps, gpn, planes):
    g = build_topology(
        "rail", servers=servers, gpus_per_server=gps, gpus_per_nic=gpn, planes=planes
    )
    ports = servers * gps // gpn * planes
    _check(g, ports / 2 * R400)


@pytest.mark.parametrize("spg,groups,ratio", [(4, 2, 1.0), (4, 2, 2.0), (2, 4, 1.0), (4, 4, 4.0)])
def test_rail_groups_with_oversubscription(spg, groups, ratio):
    g = build_topology(
        "rail", servers=spg * groups, servers_per_group=spg, oversubscription=ratio, planes=2
    )
    ports = spg * groups * 8 * 2
    _check(g, ports / 2 * R400 / max(1.0, ratio))


@pytest.mark.parametrize(
    "name,kwargs,expected",
    [
        ("h800-deepep", {"nodes": 2}, 16 / 2 * R400),
        ("h800-deepep", {"nodes": 4}, 32 / 2 * R400),
        ("h800-deepep", {"nodes": 8}, 64 / 2 * R400),
        # 256 accelerators, a 400G card per pair split in two 200G planes
        ("superpod-128", {"pods": 2}, 128 * 2 / 2 * R200),
        # 4 pods = 64 servers = one rail group: every rail leaf splits in half locally, so the
        # spines' oversubscription does not reduce this split
        ("superpod-128", {"pods": 4, "oversubscription": 2.0}, 256 * 2 / 2 * R200),
        ("superpod-384", {"pods": 2}, 768 / 2 * R400),
        ("superpod", {"pods": 2, "gpus_per_pod": 64, "scaleout": "fat-tree"}, 128 / 2 * R400),
        ("superpod", {"pods": 2, "gpus_per_pod": 8, "fabric_phy": "800GbE"}, 16 / 2 * R400),
    ],
)
def test_superpod_presets_report_bisection(name, kwargs, expected):
    g = build_topology(name, **kwargs)
    _check(g, expected)


def test_superpod_128_oversubscribed_across_rail_groups():
    # 4 pods of 16 servers in groups of 16: whole pods per side, spines cap the cut
    g = build_topology("superpod-128", pods=4, servers_per_group=16, oversubscription=4.0)
    cards = 4 * 128 // 2
    _check(g, cards * 2 / 2 * R200 / 4.0)


def test_custom_side_and_errors():
    g = build_topology("star", hosts=4)
    assert bisection_bandwidth(g, ["nic0.p0"]) == pytest.approx(R400)
    with pytest.raises(TopologyError, match="not NIC ports"):
        bisection_bandwidth(g, ["leaf0"])
    assert bisection_bandwidth(g, endpoints(g)) == 0.0
    odd = build_topology("leaf-spine", leaves=3)
    with pytest.raises(TopologyError, match="odd leaves"):
        bisection_closed_form(odd)
    partial = build_topology("fat-tree", k=4, hosts=10)
    with pytest.raises(TopologyError, match="partly populated"):
        bisection_closed_form(partial)
    # max-flow still answers where no closed form is claimed
    assert bisection_bandwidth(odd) > 0
