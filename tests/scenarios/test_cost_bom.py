"""BOM counts from built cluster graphs against closed forms, and the reach-class rules."""

from __future__ import annotations

import math

import pytest
from podsim.fabric.topology import build_topology
from podsim.scenarios.cost import (
    BomError,
    CostSpec,
    build_bom,
    choose_link,
    choose_switch,
    cost_cluster,
    load_catalog,
)
from podsim.scenarios.cost.scenario import cost_of_scenario


def _count(lines, category=None, item=None, detail=None) -> int:
    return sum(
        ln.count
        for ln in lines
        if (category is None or ln.category == category)
        and (item is None or ln.item == item)
        and (detail is None or detail in ln.detail)
    )


@pytest.mark.parametrize(("k", "planes"), [(4, 1), (8, 1), (6, 2)])
def test_fat_tree_counts_match_closed_form(k: int, planes: int) -> None:
    g = build_topology("fat-tree", k=k, planes=planes)
    lines = build_bom(g, layout="root-complex")
    hosts = k**3 // 4
    # Al-Fares: 5k^2/4 switches per tree, k^3/4 links per tier
    assert _count(lines, "switch") == planes * 5 * k * k // 4
    assert _count(lines, "nic") == hosts  # one card, one port per plane
    per_tier = planes * hosts
    # defaults: 2 m NIC-edge (DAC), 30 m edge-agg (SR on MMF), 500 m agg-core (DR on SMF)
    assert _count(lines, "cable", "cable-dac") == per_tier
    assert _count(lines, "optics", "optic-400g-sr4") == 2 * per_tier
    assert _count(lines, "cable", "cable-mmf-patch") == per_tier
    assert _count(lines, "optics", "optic-400g-dr4") == 2 * per_tier
    assert _count(lines, "cable", "cable-smf-patch") == per_tier
    links = _count(lines, "cable")
    assert links == 3 * per_tier == g.number_of_edges()
    assert _count(lines, "optics") == 2 * (links - _count(lines, "cable", "cable-dac"))


@pytest.mark.parametrize(
    ("servers", "gps", "gpn", "planes", "spg"),
    [(4, 8, 1, 1, None), (6, 8, 2, 2, 2), (5, 4, 1, 1, 2)],
)
def test_rail_counts_match_closed_form(
    servers: int, gps: int, gpn: int, planes: int, spg: int | None
) -> None:
    kw = {} if spg is None else {"servers_per_group": spg}
    g = build_topology("rail", servers=servers, gpus_per_server=gps, gpus_per_nic=gpn,
                       planes=planes, **kw)  # fmt: skip
    lines = build_bom(g, {"include_gpus": True}, layout="external-switch")
    rails = gps // gpn
    group = servers if spg is None else spg
    groups = math.ceil(servers / group)
    spines = group  # 1:1 at equal NIC and fabric rates: one uplink per downlink
    leaves = groups * rails
    # packed (default): each plane's spines (one port per leaf each) share 64-port 400G boxes
    spine_boxes = math.ceil(leaves * spines / 64)
    assert _count(lines, "switch") == planes * (leaves + spine_boxes)
    assert _count(lines, "switch", detail="leaf") == planes * leaves
    assert _count(lines, "switch", detail="graph nodes packed") == planes * spine_boxes
    drawn = build_bom(g, {"include_gpus": True, "switch_pricing": "box"}, layout="external-switch")
    assert _count(drawn, "switch") == planes * (leaves + spines)  # a box per node as drawn
    assert _count(lines, "nic") == servers * rails
    nic_links = planes * servers * rails
    fabric_links = planes * leaves * spines
    assert _count(lines, "cable", "cable-dac") == nic_links
    assert _count(lines, "optics") == 2 * fabric_links
    assert _count(lines, "cable") == nic_links + fabric_links == g.number_of_edges()
    assert _count(lines, "gpu") == servers * gps
    assert _count(lines, "server") == servers
    # external-switch assumption without a layout graph: one switch board per two GPUs
    assert _count(lines, "pcie", "pcie-switch-board") == servers * math.ceil(gps / 2)


def test_reach_classes_follow_length() -> None:
    cat = load_catalog()
    r = 400e9
    assert choose_link(1.0, r, cat).cable == "cable-dac"
    assert choose_link(3.0, r, cat).cable == "cable-dac"
    assert choose_link(5.0, r, cat).cable == "cable-aec"
    assert choose_link(7.0, r, cat).cable == "cable-aec"
    c = choose_link(40.0, r, cat)
    assert (c.optic, c.cable) == ("optic-400g-sr4", "cable-mmf-patch")
    c = choose_link(300.0, r, cat)
    assert (c.optic, c.cable) == ("optic-400g-dr4", "cable-smf-patch")
    assert choose_link(1500.0, r, cat).optic == "optic-800g-2xfr4"
    assert choose_link(300.0, 800e9, cat).optic == "optic-800g-2xdr4"
    sr = cat.get("optic-400g-sr4")
    assert (
        choose_link(40.0, r, cat).price_usd
        == 2 * sr.price_usd + cat.get("cable-mmf-patch").price_usd
    )
    with pytest.raises(BomError, match="no catalog cable or optic reaches"):
        choose_link(5000.0, r, cat)


def test_switch_choice_by_radix_and_speed() -> None:
    cat = load_catalog()
    # 64 x 400G fits the cheaper 25.6T box; 65 ports or 800G need the 51.2T box
    assert choose_switch(64, 400e9, "scaleout", cat)[:3] == ("switch-qm9700-25t6", 400e9, 64)
    assert choose_switch(65, 400e9, "scaleout", cat)[:3] == ("switch-th5-51t2", 400e9, 128)
    assert choose_switch(32, 800e9, "scaleout", cat)[:3] == ("switch-th5-51t2", 800e9, 64)
    # more ports than any box: several boxes, cheapest total
    item, _speed, _ports, boxes = choose_switch(300, 400e9, "scaleout", cat)
    assert boxes * cat.get(item).price_usd == min(
        math.ceil(300 / 128) * 60000, math.ceil(300 / 64) * 36000
    )


def test_scaleup_counted_only_when_pod_spans_servers() -> None:
    inside = build_topology("h800-deepep", nodes=2)  # pod = one 8-GPU server
    assert _count(build_bom(inside), "scaleup") == 0
    g = build_topology("superpod", pods=1, gpus_per_pod=16, gpus_per_server=8)
    lines = build_bom(g)
    su = [d for *_, d in g.edges(data=True) if d["kind"] == "scaleup"]
    assert len(su) == 16
    # a 160 GB/s GPU link is faster than any cable: a bundle of ceil(rate / cable rate) DACs
    dac = load_catalog().get("cable-dac")
    lanes = math.ceil(su[0]["rate_bps"] / dac.rate)
    assert lanes == 2
    assert _count(lines, "scaleup", "cable-dac") == len(su) * lanes
    # 16 links x 2 ports of 800G fit one 64-port box
    assert _count(lines, "scaleup", "switch-scaleup-51t2") == 1


def test_nic_card_follows_the_layout() -> None:
    g = build_topology("rail", servers=2)
    lines = build_bom(g, layout="on-card-switch")
    assert _count(lines, "nic", "nic-panmai-920") == 16
    assert _count(lines, "pcie", "pcie-switch-board") == 0
    on_card = [ln for ln in lines if ln.category == "pcie"]
    assert on_card and all(ln.capex_usd == 0 for ln in on_card)
    # the scenario's SmartNIC model under an external switch is priced as a plain card, noted
    ext = build_bom(g, nic_model="panmai-920", layout="external-switch")
    nic = next(ln for ln in ext if ln.category == "nic")
    assert nic.item == "nic-cx7-400g" and "priced as nic-cx7-400g" in nic.detail
    assert _count(ext, "pcie", "pcie-switch-board") == 8
    # an explicit cost.nic that contradicts the layout is an error
    with pytest.raises(BomError, match=r"does not suit cluster\.layout"):
        build_bom(g, {"nic": "nic-cx7-400g"}, layout="on-card-switch")
    with pytest.raises(BomError, match=r"does not suit cluster\.layout"):
        build_bom(g, {"nic": "nic-panmai-920"}, layout="external-switch")


def test_price_override_changes_only_that_item() -> None:
    g = build_topology("fat-tree", k=4)
    base = cost_cluster(g)
    cheap = cost_cluster(g, {"prices": {"cable-dac": {"price_usd": 0}}})
    dac = _count(base.lines, "cable", "cable-dac") * load_catalog().get("cable-dac").price_usd
    assert base.capex_usd - cheap.capex_usd == pytest.approx(dac)
    over = next(ln for ln in cheap.lines if ln.item == "cable-dac")
    assert over.unit_price_usd == 0


def test_missing_length_uses_tier_default() -> None:
    g = build_topology("fat-tree", k=4)
    for *_, d in g.edges(data=True):
        del d["length_m"]
    lines = build_bom(g, CostSpec(lengths={"leaf-spine": "5m"}))
    assert _count(lines, "cable", "cable-aec") == 16  # leaf-spine now 5 m: AEC
    assert _count(lines, "optics", "optic-400g-dr4") == 32  # spine-core keeps 500 m


def test_port_pricing_pays_used_ports_only() -> None:
    g = build_topology("fat-tree", k=4)  # every switch uses 4 of a 64-port box
    box = cost_cluster(g, {"include_gpus": False}).capex_by_category()["switch"]
    port = cost_cluster(g, {"include_gpus": False, "switch_pricing": "port"})
    assert port.capex_by_category()["switch"] == pytest.approx(box * 4 / 64)


def test_an_800g_nic_is_priced_as_the_catalog_card_that_fast() -> None:
    """800GbE NIC ports: the catalog's 400G cards cannot carry them, so the BOM prices the
    cheapest card fast enough that suits the layout (the ConnectX-8 class card, which carries a
    PCIe switch: the on-card layout), says so, and refuses a layout no such card suits."""
    cat = load_catalog()
    cx8 = cat.get("nic-cx8-800g", "nic")
    assert cx8.port_rate == 800e9 and cx8.pcie_switch_on_card
    assert cx8.price_confidence == "none" and "ESTIMATE" in cx8.source
    g = build_topology("rail", servers=2, nic_phy="800GbE", fabric_phy="800GbE")
    lines = build_bom(g, nic_model="smartnic-400g", layout="on-card-switch")
    nic = next(ln for ln in lines if ln.category == "nic")
    assert (nic.item, nic.count) == ("nic-cx8-800g", 16)
    assert "priced as nic-cx8-800g" in nic.detail and "800Gbps" in nic.detail
    # at 400G the model's own card stands
    g400 = build_topology("rail", servers=2)
    nic400 = next(ln for ln in build_bom(g400, layout="on-card-switch") if ln.category == "nic")
    assert nic400.item == "nic-panmai-920"
    # no 800G card without an on-card switch: refused with the layout and the candidates
    with pytest.raises(BomError, match=r"800Gbps.*external-switch.*nic-cx8-800g \(with an on"):
        build_bom(g, layout="external-switch")
    # an explicit cost.nic is taken as given, and checked against the links
    with pytest.raises(BomError, match=r"choose a faster cost\.nic"):
        build_bom(g, {"nic": "nic-panmai-920"}, layout="on-card-switch")


def test_layout_parameters_reach_the_bill_of_materials() -> None:
    """cluster.layout_params size the priced node as they size the simulated PCIe tree: SSDs
    on the switches and the number of external boards."""
    g = build_topology("rail", servers=2)  # 8 GPUs and 8 NIC cards per server
    plain = build_bom(g, layout="external-switch")
    assert _count(plain, "ssd", "ssd-gen5-7t68") == 0
    assert _count(plain, "pcie", "pcie-switch-board") == 2 * 4
    tuned = build_bom(g, layout="external-switch", layout_params={"ssds": 8, "switches": 2})
    assert _count(tuned, "ssd", "ssd-gen5-7t68") == 2 * 8
    assert _count(tuned, "pcie", "pcie-switch-board") == 2 * 2
    # a scenario's layout_params reach the BOM through cost_of_scenario too
    sc = {"name": "lp", "cluster": {"topology": {"name": "rail", "params": {"servers": 2}},
                                    "layout": "on-card-switch", "layout_params": {"ssds": 4}},
          "workload": {"synthetic": {"pattern": "uniform", "size": "64KiB"}}}  # fmt: skip
    cost = cost_of_scenario(sc)
    assert cost.capex_by_category()["ssd"] == 2 * 4 * load_catalog().get("ssd-gen5-7t68").price_usd
