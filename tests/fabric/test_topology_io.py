"""GraphML round trip and drawing of topology graphs."""

from __future__ import annotations

import pytest
from podsim.fabric.topology import build_topology, validate_graph
from podsim.fabric.topology_io import draw_topology, read_graphml, write_graphml


@pytest.mark.parametrize(
    "name,kwargs",
    [
        ("star", {"hosts": 4, "planes": 2}),
        ("leaf-spine", {"oversubscription": 2.0}),
        ("fat-tree", {"k": 4}),
        ("superpod-128", {"pods": 1}),
        ("superpod", {"pods": 2, "gpus_per_pod": 8, "scaleout": "fat-tree"}),
    ],
)
def test_graphml_round_trip(tmp_path, name, kwargs):
    g = build_topology(name, **kwargs)
    path = tmp_path / "t.graphml"
    write_graphml(g, str(path))
    h = read_graphml(str(path))
    validate_graph(h)
    assert h.graph["params"] == g.graph["params"]
    assert (h.graph["name"], h.graph["builder"]) == (g.graph["name"], g.graph["builder"])
    assert dict(h.nodes(data=True)) == dict(g.nodes(data=True))
    assert {frozenset((u, v)): d for u, v, d in h.edges(data=True)} == {
        frozenset((u, v)): d for u, v, d in g.edges(data=True)
    }
    # types survive: ints stay ints, rates stay floats
    d = h.nodes["nic0.p0"]
    assert isinstance(d["gpu"], int) and isinstance(d["plane"], int)
    assert all(isinstance(x, float) for _, _, x in h.edges(data="rate_bps"))


def test_write_does_not_touch_the_graph(tmp_path):
    g = build_topology("star", hosts=2)
    write_graphml(g, str(tmp_path / "s.graphml"))
    assert isinstance(g.graph["params"], dict) and "params_json" not in g.graph


@pytest.mark.parametrize("name,kwargs", [("leaf-spine", {}), ("superpod-384", {"pods": 1})])
def test_draw_topology(tmp_path, name, kwargs):
    g = build_topology(name, **kwargs)
    path = tmp_path / "t.png"
    draw_topology(g, str(path))
    assert path.stat().st_size > 1000
    assert path.read_bytes()[:4] == b"\x89PNG"
