"""SuperPoD builder and presets: scale-up domains, NIC sharing, scale-out joins, contract."""

from __future__ import annotations

import networkx as nx
import pytest
from podsim.fabric.phy import get_phy
from podsim.fabric.topology import (
    TOPOLOGIES,
    build_topology,
    endpoints,
    gpu_nics,
    gpus,
    scaleout_view,
    switches,
    validate_graph,
)
from podsim.fabric.units import parse_rate, parse_time

PRESETS = ["h800-deepep", "superpod-128", "superpod-384"]


def _connected_with_pcie(g: nx.Graph) -> bool:
    """Whole cluster connected once every GPU is joined to the NIC ports that serve it."""
    h = nx.Graph(g.edges())
    h.add_nodes_from(g.nodes())
    for gid, ports in gpu_nics(g).items():
        h.add_edges_from((f"gpu{gid}", p) for p in ports)
    return nx.is_connected(h)


def test_presets_are_registered_with_descriptions():
    described = dict(TOPOLOGIES.describe())
    for name in PRESETS:
        assert described[name].startswith("preset:")


@pytest.mark.parametrize("name", PRESETS)
def test_every_preset_builds_validates_and_is_connected(name):
    g = build_topology(name)
    validate_graph(g)
    assert g.graph["builder"] == name
    planes = g.graph["params"]["planes"]
    view = scaleout_view(g)
    assert nx.number_connected_components(view) == planes
    for pod in {d for _, d in g.nodes(data="pod") if d is not None and d >= 0}:
        members = [n for n, d in g.nodes(data=True) if d["role"] in ("gpu", "scaleup")]
        members = [n for n in members if g.nodes[n]["pod"] == pod]
        assert nx.is_connected(g.subgraph(members))
    assert _connected_with_pcie(g)
    # no link joins the scale-up and the scale-out fabric
    for u, v, kind in g.edges(data="kind"):
        roles = {g.nodes[u]["role"], g.nodes[v]["role"]}
        assert (kind == "scaleup") == bool(roles & {"gpu", "scaleup"})


@pytest.mark.parametrize("pod_size", [8, 64, 128, 384])
@pytest.mark.parametrize("n_su", [1, 4])
def test_scaleup_domain_counts_rates_latency(pod_size, n_su):
    g = build_topology(
        "superpod",
        pods=2,
        gpus_per_pod=pod_size,
        scaleup_rate="200GB/s",
        scaleup_latency="300ns",
        scaleup_switches=n_su,
    )
    validate_graph(g)
    assert gpus(g) == list(range(2 * pod_size))
    assert len(switches(g, "scaleup")) == 2 * n_su
    su_edges = [(u, v, d) for u, v, d in g.edges(data=True) if d["kind"] == "scaleup"]
    assert len(su_edges) == 2 * pod_size * n_su
    for u, v, d in su_edges:
        assert d["rate_bps"] == pytest.approx(parse_rate("200GB/s") / n_su)
        assert d["latency_s"] == pytest.approx(parse_time("300ns") / 2)
        assert d["tier"] == "gpu-scaleup" and d["phy"] == "scaleup"
        gpu, sw = (u, v) if g.nodes[u]["role"] == "gpu" else (v, u)
        assert g.nodes[gpu]["pod"] == g.nodes[sw]["pod"]
    # one GPU's scale-up links add up to its scale-up bandwidth
    total = sum(d["rate_bps"] for _, _, d in g.edges("gpu0", data=True))
    assert total == pytest.approx(parse_rate("200GB/s"))
    for sw in switches(g, "scaleup"):
        assert g.nodes[sw]["radix"] == pod_size


@pytest.mark.parametrize("nodes", [2, 4, 8])
def test_h800_deepep_is_rail_optimised(nodes):
    g = build_topology("h800-deepep", nodes=nodes)
    validate_graph(g)
    assert len(gpus(g)) == 8 * nodes
    assert len(endpoints(g)) == 8 * nodes  # one NIC per GPU, one plane
    rate = get_phy("400GbE").mac_rate_bps
    assert all(d["rate_bps"] == rate for _, _, d in g.edges(data=True) if d["kind"] == "scaleout")
    su = [d["rate_bps"] for _, _, d in g.edges(data=True) if d["kind"] == "scaleup"]
    assert su == [parse_rate("160GB/s")] * (8 * nodes)
    # GPU local index i of every node is on rail leaf i; each node is its own pod
    leaf_of_local: dict[int, set[str]] = {}
    for gid, ports in gpu_nics(g).items():
        (port,) = ports
        (leaf,) = g.neighbors(port)
        leaf_of_local.setdefault(gid % 8, set()).add(leaf)
        assert g.nodes[f"gpu{gid}"]["pod"] == gid // 8 == g.nodes[port]["server"]
    assert all(len(v) == 1 for v in leaf_of_local.values())
    assert len({next(iter(v)) for v in leaf_of_local.values()}) == 8


def test_superpod_128_gpu_pairs_share_multi_plane_nics():
    g = build_topology("superpod-128", pods=2)
    validate_graph(g)
    p = g.graph["params"]
    assert (p["gpus_per_pod"], p["gpus_per_nic"], p["planes"]) == (128, 2, 2)
    nics = gpu_nics(g)
    assert len(gpus(g)) == 256
    assert len(endpoints(g)) == 256 // 2 * 2
    assert nics[0] == nics[1] == ["nic0.p0", "nic0.p1"]
    assert nics[2] == ["nic1.p0", "nic1.p1"]
    # a NIC card's planes add up to 400G
    card = sum(g.edges[port, next(iter(g.neighbors(port)))]["rate_bps"] for port in nics[0])
    assert card == pytest.approx(400e9)
    # rail groups hold whole pods
    for port in endpoints(g):
        (leaf,) = g.neighbors(port)
        assert g.nodes[leaf]["group"] == g.nodes[port]["server"] // p["servers_per_group"]
    assert p["servers_per_group"] % (128 // 8) == 0


def test_superpod_128_one_nic_per_gpu_single_plane():
    g = build_topology("superpod-128", pods=1, gpus_per_nic=1, planes=1, nic_phy="400GbE")
    validate_graph(g)
    assert len(endpoints(g)) == 128
    assert all(len(v) == 1 for v in gpu_nics(g).values())


def test_superpod_fat_tree_scaleout_picks_smallest_k():
    g = build_topology("superpod", pods=3, gpus_per_pod=8, scaleout="fat-tree", planes=2)
    validate_graph(g)
    k = g.graph["params"]["k"]
    assert k**3 // 4 >= 24 > (k - 2) ** 3 // 4
    assert len(switches(g, "core")) == 2 * (k // 2) ** 2
    assert _connected_with_pcie(g)


def test_superpod_384_shape():
    g = build_topology("superpod-384", pods=1)
    validate_graph(g)
    assert len(gpus(g)) == 384
    assert len({g.nodes[n]["server"] for n in endpoints(g)}) == 48
    assert len(switches(g, "scaleup")) == 7


@pytest.mark.parametrize(
    "kwargs,needle",
    [
        ({"gpus_per_pod": 12}, "gpus_per_pod=12"),
        ({"scaleout": "torus"}, "scaleout='torus'"),
        ({"k": 8}, "k applies"),
        ({"scaleout": "fat-tree", "oversubscription": 2.0}, "oversubscription"),
        ({"scaleout": "fat-tree", "k": 4}, "raise k"),
        ({"gpus_per_nic": 3}, "gpus_per_nic=3"),
        ({"scaleup_rate": "fast"}, "scaleup_rate"),
        ({"scaleup_switches": 0}, "scaleup_switches"),
    ],
)
def test_superpod_bad_input(kwargs, needle):
    with pytest.raises(ValueError, match=needle):
        build_topology("superpod", **kwargs)


def test_preset_rejects_unknown_parameter():
    with pytest.raises(ValueError, match="nodez"):
        build_topology("h800-deepep", nodez=4)


def test_ten_thousand_gpu_cluster_builds():
    # its build time is a benchmark figure (benchmarks/bench_topology.py), not a test
    g = build_topology("superpod-128", pods=80)
    assert len(gpus(g)) == 10_240
