"""fabric.topology.topology_size: the closed-form size of every builder equals what it builds."""

from __future__ import annotations

import networkx as nx
import pytest
from podsim.fabric.topology import TOPOLOGIES, build_topology, endpoints, topology_size

CASES = [
    ("star", {}),
    ("star", {"hosts": 5, "planes": 3}),
    ("leaf-spine", {}),
    ("leaf-spine", {"hosts_per_leaf": 4, "leaves": 3, "oversubscription": 2, "planes": 2}),
    ("fat-tree", {}),
    ("fat-tree", {"k": 6, "hosts": 20, "planes": 2}),
    ("rail", {}),
    ("rail", {"servers": 10, "servers_per_group": 3, "gpus_per_nic": 2, "planes": 2, "spines": 3}),
    ("superpod", {}),
    ("superpod", {"pods": 3, "gpus_per_pod": 16, "scaleout": "fat-tree", "planes": 2}),
    ("superpod", {"pods": 2, "gpus_per_pod": 16, "scaleup_switches": 3}),
    ("superpod", {"pods": 3, "gpus_per_pod": 16, "servers_per_group": 4}),
    ("h800-deepep", {}),
    ("h800-deepep", {"nodes": 3, "scaleout": "fat-tree"}),
    ("h800-deepep", {"nodes": 2, "planes": 2, "gpus_per_nic": 2}),
    ("superpod-128", {}),
    ("superpod-128", {"pods": 1, "planes": 1, "nic_phy": "400GbE"}),
    ("superpod-128", {"pods": 1, "oversubscription": 2}),
    ("superpod-384", {"pods": 1}),
    ("nvl72", {}),
    ("m890", {"pods": 1}),
    ("atlas-a3", {"pods": 1}),
    ("atlas-950", {"gpus_per_pod": 64, "pods": 2}),
]


@pytest.mark.parametrize(("name", "params"), CASES)
def test_size_equals_the_built_graph(name: str, params: dict) -> None:
    g = build_topology(name, **params)
    size = topology_size(name, params)
    assert size is not None
    assert (size.nodes, size.edges, size.endpoints) == (
        g.number_of_nodes(),
        g.number_of_edges(),
        len(endpoints(g)),
    )
    assert size.elements == g.number_of_nodes() + g.number_of_edges()


def test_every_registered_topology_has_a_size() -> None:
    # a builder without one could not be refused before it is built
    assert {name for name, _ in TOPOLOGIES.describe()} == {n for n, _ in CASES}


def test_an_absurd_size_is_computed_without_building_anything(monkeypatch) -> None:
    # closed form: not one graph node may be created (benchmarks/bench_topology.py times builds)
    def no_graph(*args, **kwargs):
        raise AssertionError("topology_size built a graph")

    monkeypatch.setattr(nx.Graph, "add_node", no_graph)
    monkeypatch.setattr(nx.Graph, "add_nodes_from", no_graph)
    monkeypatch.setattr(nx.Graph, "add_edge", no_graph)
    monkeypatch.setattr(nx.Graph, "add_edges_from", no_graph)
    size = topology_size("h800-deepep", {"nodes": 100_000_000})
    assert size is not None and size.endpoints == 8 * 100_000_000
    # GPUs + NIC ports + one scale-up switch per node, at least
    assert size.nodes > 2 * 8 * 100_000_000


@pytest.mark.parametrize(
    ("name", "params"),
    [("star", {"hosts": 0}), ("fat-tree", {"k": 3.5}), ("rail", {"nope": 1}), ("zzz", {})],
)
def test_bad_parameters_give_no_size(name: str, params: dict) -> None:
    # the builder, not the size function, reports bad parameters
    assert topology_size(name, params) is None


def test_unknown_preset_override_gives_no_size() -> None:
    assert topology_size("superpod-128", {"pods": 1, "bogus": 2}) is None


def test_builder_parameters_follow_a_preset_to_the_builder_it_passes_to() -> None:
    import inspect

    from podsim.fabric.topology import builder_parameters

    own = [p for p in inspect.signature(TOPOLOGIES.get("superpod")).parameters]
    for preset in ("superpod-128", "superpod-384", "h800-deepep"):
        accepted = builder_parameters(preset)
        assert set(own) <= set(accepted), preset
        # every accepted keyword builds (the size function binds them without a TypeError)
        assert topology_size(preset, {accepted[0]: 2}) is not None or accepted[0] == "name"
    assert "k" in builder_parameters("fat-tree") and "pods" not in builder_parameters("fat-tree")
