from __future__ import annotations

import pytest
import yaml
from podsim.fabric.registry import UnknownNameError
from podsim.nic.pcie import (
    NODE_LAYOUTS,
    PcieTree,
    build_layout,
    external_switch,
    on_card_switch,
    root_complex,
)


def test_registry_lists_the_three_presets():
    assert NODE_LAYOUTS.names() == ["external-switch", "on-card-switch", "root-complex"]
    assert all(desc for _, desc in NODE_LAYOUTS.describe())
    with pytest.raises(UnknownNameError, match="on-card-switch"):
        NODE_LAYOUTS.get("on-card")


@pytest.mark.parametrize("name", ["external-switch", "on-card-switch", "root-complex"])
def test_presets_build_with_defaults(name):
    tree = build_layout(name)
    assert isinstance(tree, PcieTree)
    assert len(tree.gpus) == 8 and len(tree.nics) == 8
    assert tree.graph.graph["builder"] == name
    # every GPU has a NIC, and every GPU-NIC pair has a path class
    assert all(tree.nics_of_gpu(g) for g in tree.gpus)
    assert tree.topo_matrix().shape == (8, 8)


@pytest.mark.parametrize("gpus_per_nic", [1, 2, 4])
def test_external_switch_classes_closed_form(gpus_per_nic):
    gpus = 8
    tree = external_switch(gpus, gpus_per_nic=gpus_per_nic)
    nics = gpus // gpus_per_nic
    n_sw = min(nics, gpus // 2)  # two GPUs per switch, never splitting a GPU from its NIC
    assert len(tree.devices("switch")) == n_sw
    sw_of_gpu = {i: (i // gpus_per_nic) * n_sw // nics for i in range(gpus)}
    sw_of_nic = {n: n * n_sw // nics for n in range(nics)}
    for (g, n), cls in tree.path_classes().items():
        i, j = int(g[3:]), int(n[3:])
        assert cls == ("PIX" if sw_of_gpu[i] == sw_of_nic[j] else "PHB"), (g, n)
    for n in tree.nics:
        for g in tree.gpus_of_nic(n):
            assert tree.path_class(g, n) == "PIX"


def test_external_switch_two_sockets_gives_sys():
    tree = external_switch(8, 8, sockets=2)
    m = tree.topo_matrix()
    for i, g in enumerate(tree.gpus):
        for j, n in enumerate(tree.nics):
            same_sw = i // 2 == j // 2
            same_socket = (i // 2) * 2 // 4 == (j // 2) * 2 // 4
            assert m.loc[g, n] == ("PIX" if same_sw else "PHB" if same_socket else "SYS")


def test_external_switch_one_gpu_two_nics():
    tree = external_switch(4, 8)
    assert tree.nics_of_gpu("gpu0") == ["nic0", "nic1"]
    assert tree.path_class("gpu0", "nic1") == "PIX"


@pytest.mark.parametrize("gpus_per_nic", [1, 2, 4])
def test_on_card_switch_classes_and_structure(gpus_per_nic):
    tree = on_card_switch(8, gpus_per_nic=gpus_per_nic, ssds=4)
    nics = 8 // gpus_per_nic
    switches = tree.devices("switch")
    assert len(switches) == nics
    assert all(tree.graph.nodes[s]["on_card"] for s in switches)
    # host side Gen5 x32 (docs/physics.md: Panmai 920), GPUs x16, SSDs x4
    for s in switches:
        assert tree.graph.edges["root0", s]["link"].lanes == 32
    for g in tree.gpus:
        (sw,) = tree.graph.neighbors(g)
        assert tree.graph.edges[g, sw]["link"].lanes == 16
    for d in tree.ssds:
        (sw,) = tree.graph.neighbors(d)
        assert tree.role(sw) == "switch" and tree.graph.edges[d, sw]["link"].lanes == 4
    for (g, n), cls in tree.path_classes().items():
        assert cls == ("PIX" if int(g[3:]) // gpus_per_nic == int(n[3:]) else "PHB")


def test_root_complex_classes():
    tree = root_complex(8, 8)
    assert set(tree.path_classes().values()) == {"PHB"}
    assert not tree.devices("switch")
    two = root_complex(8, 8, sockets=2)
    for (g, n), cls in two.path_classes().items():
        assert cls == ("PHB" if int(g[3:]) // 4 == int(n[3:]) // 4 else "SYS")


def test_layout_parameters_reach_the_links_and_specs():
    tree = external_switch(
        4,
        4,
        gpu_lanes=8,
        uplink_lanes=32,
        link={"mps": 512, "header_bytes": 20},
        switch={"hop_latency_s": "105ns"},
        root={"p2p_limit_bps": "20GB/s", "latency_s": "400ns"},
    )
    ln = tree.graph.edges["sw0", "gpu0"]["link"]
    assert (ln.lanes, ln.mps, ln.header_bytes) == (8, 512, 20)
    assert tree.graph.edges["root0", "sw0"]["link"].lanes == 32
    assert tree.spec("sw0").hop_latency_s == pytest.approx(105e-9)
    assert tree.spec("root0").p2p_limit_bps == pytest.approx(160e9)
    assert tree.latency("gpu0", "nic0") == pytest.approx(105e-9)
    assert tree.latency("gpu0", "nic2") == pytest.approx(2 * 105e-9 + 400e-9)


@pytest.mark.parametrize(
    ("builder", "kwargs", "match"),
    [
        (external_switch, {"gpus": 8, "nics": 3}, "multiple"),
        (external_switch, {"gpus": 8, "nics": 4, "gpus_per_nic": 1}, "contradicts"),
        (external_switch, {"gpus": 8, "switches": 16}, "exceeds"),
        (external_switch, {"gpus": 0}, "gpus must be an integer >= 1"),
        (external_switch, {"gpus": 2, "gpu_lanes": 12}, "gpu_lanes"),
        (external_switch, {"gpus": 2, "link": {"lanes": 8}}, "link widths"),
        (on_card_switch, {"gpus": 4, "nics": 8}, "not supported"),
        (root_complex, {"gpus": 2, "root": {"p2p_limit": 1}}, "unknown root complex key"),
        (root_complex, {"gpus": 2, "ssds": -1}, "ssds"),
    ],
)
def test_bad_layout_parameters(builder, kwargs, match):
    with pytest.raises(ValueError, match=match):
        builder(**kwargs)


def test_build_layout_from_preset_mapping_and_yaml_round_trip():
    spec = yaml.safe_load(
        """
        preset: on-card-switch
        gpus: 4
        gpus_per_nic: 2
        ssds: 2
        switch: {hop_latency_s: 120ns}
        """
    )
    tree = build_layout(spec)
    assert len(tree.nics) == 2 and tree.spec("sw0").hop_latency_s == pytest.approx(120e-9)
    text = yaml.safe_dump(tree.to_dict())
    again = build_layout(yaml.safe_load(text))
    assert again.to_dict() == tree.to_dict()
    assert again.path_classes() == tree.path_classes()
    assert again.resource_names == tree.resource_names
    assert (again.resource_capacity_bps == tree.resource_capacity_bps).all()
    with pytest.raises(ValueError, match="unknown parameter"):
        build_layout({"preset": "root-complex", "switches": 2})
    with pytest.raises(ValueError, match="preset name"):
        build_layout(42)


def test_cost_model_can_count_the_layout_hardware():
    # scenarios.cost.node reads `role`/`on_card` off `.graph` of NODE_LAYOUTS.get(name)(gpus, nics)
    g = NODE_LAYOUTS.get("on-card-switch")(gpus=8, nics=4).graph
    assert sum(d["role"] == "switch" and d["on_card"] for _, d in g.nodes(data=True)) == 4
    g = NODE_LAYOUTS.get("external-switch")(gpus=8, nics=8).graph
    assert sum(d["role"] == "switch" and not d["on_card"] for _, d in g.nodes(data=True)) == 4


@pytest.mark.parametrize(
    ("builder", "kwargs", "want"),
    [
        # two SSDs on each of 4 switches: the switch's two GPUs read one each
        (external_switch, {"ssds": 8}, [f"ssd{i}" for i in range(8)]),
        # one SSD per switch: the switch's two GPUs share it
        (external_switch, {"ssds": 4}, [f"ssd{i // 2}" for i in range(8)]),
        # one card per GPU, one SSD per card
        (on_card_switch, {"ssds": 8}, [f"ssd{i}" for i in range(8)]),
        # two GPUs per card, two SSDs per card
        (on_card_switch, {"ssds": 8, "gpus_per_nic": 2}, [f"ssd{i}" for i in range(8)]),
        # every SSD on the root complex is equally near: spread over all GPUs
        (root_complex, {"ssds": 4}, [f"ssd{i % 4}" for i in range(8)]),
    ],
)
def test_storage_reads_spread_over_the_nearest_ssds(builder, kwargs, want):
    """A GPU reads from one of its nearest SSDs; GPUs that share the same nearest SSDs spread
    over them instead of all reading the lowest-numbered one."""
    tree = builder(8, **kwargs)
    assert [tree.storage_map[g] for g in tree.gpus] == want
    near = {g: len(tree.path(tree.storage_map[g], g).nodes) for g in tree.gpus}
    for g in tree.gpus:
        assert near[g] == min(len(tree.path(s, g).nodes) for s in tree.ssds)
