"""The scale-out fabric is priced with parts of its own kind (issue 16 item 4): an Ethernet
cluster buys Ethernet switches, an InfiniBand one InfiniBand switches, and every NIC, optic and
cable in the BOM serves that network."""

from __future__ import annotations

import pytest
from podsim.fabric.topology import build_topology
from podsim.scenarios.cost import BomError, build_bom, choose_switch, load_catalog
from podsim.scenarios.cost.scenario import cost_of_scenario

CLUSTERS = [
    ("rail", {"servers": 4}),
    ("fat-tree", {"k": 4}),
    ("leaf-spine", {}),
    ("superpod-128", {"pods": 1}),
]


def _networks(item) -> tuple[str, ...]:
    """What a catalog item serves: a switch its one network, NICs/optics/cables their list,
    other kinds (GPUs, servers, PCIe, scale-up parts) none."""
    if item.kind == "switch":
        return (item.network,) if item.network else ()
    return tuple(getattr(item, "networks", ()))


@pytest.mark.parametrize(("builder", "params"), CLUSTERS)
@pytest.mark.parametrize(
    ("network", "other"), [("ethernet", "infiniband"), ("infiniband", "ethernet")]
)
def test_bom_has_only_parts_of_the_fabric_kind(builder, params, network, other) -> None:
    g = build_topology(builder, **params)
    cat = load_catalog()
    lines = build_bom(g, {"network": network})
    scaleout_switches = [
        ln for ln in lines if ln.category == "switch" and cat.get(ln.item).fabric == "scaleout"
    ]
    assert scaleout_switches, "the cluster has scale-out switches"
    for ln in lines:
        nets = _networks(cat.get(ln.item))
        if ln.category in ("switch", "nic", "optics", "cable"):
            assert network in nets, (ln.item, nets)
        # no part that serves only the other network
        assert nets != (other,), (ln.item, nets)
    for ln in scaleout_switches:
        assert cat.get(ln.item).network == network


def test_default_network_is_the_simulated_ethernet() -> None:
    # every PHY profile podsim simulates is Ethernet: the default BOM has no InfiniBand box
    cost = cost_of_scenario("quickstart")
    cat = load_catalog()
    switches = [ln.item for ln in cost.lines if ln.category == "switch"]
    assert switches and all(cat.get(s).network == "ethernet" for s in switches)
    assert "switch-qm9700-25t6" not in switches
    ib = cost_of_scenario("quickstart", ["cost.network=infiniband"])
    assert {ln.item for ln in ib.lines if ln.category == "switch"} == {"switch-qm9700-25t6"}
    nic = next(ln for ln in ib.lines if ln.category == "nic")
    assert "priced as infiniband (cost.network); simulated as ethernet" in nic.detail


def test_switch_choice_keeps_to_the_network() -> None:
    cat = load_catalog()
    assert choose_switch(64, 400e9, "scaleout", cat, network="ethernet")[0] == "switch-th4-25t6"
    assert choose_switch(64, 400e9, "scaleout", cat, network="infiniband")[0] == (
        "switch-qm9700-25t6"
    )
    assert choose_switch(32, 800e9, "scaleout", cat, network="infiniband")[0] == (
        "switch-qm3400-115t2"
    )
    with pytest.raises(BomError, match="no infiniband scaleout switch"):
        choose_switch(64, 400e9, "scaleout", cat, ["switch-th5-51t2"], network="infiniband")


def test_an_ethernet_only_card_on_infiniband_is_refused() -> None:
    g = build_topology("rail", servers=2)
    with pytest.raises(BomError, match=r"nic-panmai-920.*not the infiniband fabric"):
        build_bom(g, {"network": "infiniband"}, layout="on-card-switch")


def test_scaleout_switch_without_network_is_refused() -> None:
    from podsim.scenarios.cost.catalog import CatalogError

    new = {"kind": "switch", "fabric": "scaleout", "price_usd": 1, "power_w": 1,
           "ports": {"400Gbps": 8}, "estimate": True, "source": "test", "date": "2026",
           "confidence": "none"}  # fmt: skip
    with pytest.raises(CatalogError, match="needs 'network'"):
        load_catalog(overrides={"switch-x": new})


def test_an_infiniband_nic_model_is_priced_as_an_infiniband_fabric() -> None:
    # cluster.nic.model cx7-ib has link_layer infiniband: no cost.network needed
    cat = load_catalog()
    cost = cost_of_scenario("quickstart", ["cluster.nic.model=cx7-ib"])
    switches = {ln.item for ln in cost.lines if ln.category == "switch"}
    assert switches and all(cat.get(s).network == "infiniband" for s in switches)
    for ln in cost.lines:
        assert _networks(cat.get(ln.item)) != ("ethernet",), ln.item
    nic = next(ln for ln in cost.lines if ln.category == "nic")
    assert nic.item == "nic-cx7-400g" and "infiniband" in nic.detail
    assert "priced as" not in nic.detail  # the simulation and the price agree
