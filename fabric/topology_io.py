"""Topology graphs to files: GraphML export/import and a layered matplotlib drawing.

GraphML holds scalar attributes only; the contract keeps every node and edge attribute a
str/int/float, and the one dict (graph attr ``params``) travels as the JSON string
``params_json``.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Sequence
from typing import Any

import networkx as nx
from podsim.fabric.topology import ROLES

__all__ = ["draw_topology", "read_graphml", "write_graphml"]


def write_graphml(g: nx.Graph, path: str) -> None:
    """Write ``g`` as GraphML. ``params`` (a dict) is stored as the JSON string ``params_json``;
    every other attribute is already a str/int/float scalar."""
    h = g.copy()
    h.graph = {k: v for k, v in g.graph.items() if k != "params"}
    h.graph["params_json"] = json.dumps(g.graph.get("params", {}), sort_keys=True)
    nx.write_graphml(h, path)


def read_graphml(path: str) -> nx.Graph:
    """Read a graph written by :func:`write_graphml` back into the contract form."""
    g = nx.read_graphml(path, node_type=str)
    g = nx.Graph(g)
    params_json = g.graph.pop("params_json", "{}")
    g.graph["params"] = json.loads(params_json)
    return g


_LAYER = {"scaleup": -2.0, "gpu": -1.0, "nic": 0.0, "leaf": 1.0, "spine": 2.0, "core": 3.0}
_COLOUR = {
    "nic": "tab:blue",
    "gpu": "tab:green",
    "leaf": "tab:orange",
    "spine": "tab:red",
    "core": "tab:purple",
    "scaleup": "tab:olive",
}


def _layout(g: nx.Graph) -> dict[str, tuple[float, float]]:
    """Layered layout: y by role (scale-up below NICs, core on top), x spread evenly per layer
    in (plane, pod, natural name) order so planes and pods sit side by side."""

    def natural(name: str) -> tuple[Any, ...]:
        return tuple(int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name))

    layers: dict[str, list[str]] = {}
    for n, role in g.nodes(data="role"):
        layers.setdefault(role, []).append(n)
    pos: dict[str, tuple[float, float]] = {}
    for role, nodes in layers.items():
        nodes.sort(key=lambda n: (g.nodes[n].get("plane", 0), g.nodes[n].get("pod", 0), natural(n)))
        m = len(nodes)
        y = _LAYER.get(role, 4.0)
        for i, n in enumerate(nodes):
            pos[n] = ((i + 0.5) / m, y)
    return pos


def draw_topology(
    g: nx.Graph,
    path: str | Sequence[str],
    *,
    labels: bool | None = None,
    dpi: int = 150,
    below: Callable[[Any], None] | None = None,
    min_font_pt: float = 8.0,
    save: Callable[[Any, str, float], None] | None = None,
) -> None:
    """Draw ``g`` to ``path`` (PNG/SVG/PDF by extension; several paths: one drawing saved in
    each format) in a layered layout by tier. Node names are drawn when asked, or by default
    when the graph has at most 32 nodes. ``below``, when given, draws a second panel under the
    fabric on the axes it is passed (the report draws one node's PCIe tree there). No text is
    smaller than ``min_font_pt``; the canvas is 11 x 5.5 in (11 x 9 with ``below``). ``save``,
    when given, writes each file as ``save(figure, path, dpi)`` (the report's
    :func:`podsim.scenarios.report.style.save_figure`), else ``Figure.savefig``."""
    # a Figure of its own, not pyplot's: no global state, no backend switch, and no pyplot
    # import in a run (issue 18); savefig draws it with Agg (PNG) or by file extension
    from matplotlib.collections import LineCollection
    from matplotlib.figure import Figure

    pos = _layout(g)
    low = None
    if below is None:
        fig = Figure(figsize=(11, 5.5))
        ax = fig.subplots()
    else:
        fig = Figure(figsize=(11, 9))
        ax, low = fig.subplots(2, 1, gridspec_kw={"height_ratios": [1.15, 1.0]})
    segs_out = [(pos[u], pos[v]) for u, v, k in g.edges(data="kind") if k != "scaleup"]
    segs_up = [(pos[u], pos[v]) for u, v, k in g.edges(data="kind") if k == "scaleup"]
    ax.add_collection(LineCollection(segs_out, colors="0.55", linewidths=0.4, alpha=0.6))
    ax.add_collection(LineCollection(segs_up, colors="tab:green", linewidths=0.4, alpha=0.4))
    size = max(4.0, 80.0 / math.sqrt(max(1, g.number_of_nodes())) * 4)
    for role in ROLES:
        nodes = [n for n, r in g.nodes(data="role") if r == role]
        if nodes:
            xs, ys = zip(*(pos[n] for n in nodes), strict=True)
            ax.scatter(xs, ys, s=size, c=_COLOUR[role], label=f"{role} ({len(nodes)})", zorder=3)
    if labels or (labels is None and g.number_of_nodes() <= 32):
        for n, (x, y) in pos.items():
            ax.annotate(n, (x, y), fontsize=min_font_pt, rotation=60, ha="left", va="bottom")
    ax.set_title(f"fabric: {g.graph.get('name', 'topology')}", fontsize=min_font_pt + 2)
    ax.set_xlim(-0.02, 1.02)
    ax.set_yticks(sorted({_LAYER[r] for r in ROLES}))
    ax.set_yticklabels(["scale-up sw", "gpu", "nic", "leaf", "spine", "core"])
    ax.tick_params(labelsize=max(min_font_pt, 9.0))
    ax.set_xticks([])
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=max(min_font_pt, 9.0))
    # fixed margins in inches (room for the legends on the right)
    w, h = fig.get_size_inches()
    fig.subplots_adjust(left=0.95 / w, right=1 - 2.0 / w, top=1 - 0.45 / h, bottom=0.55 / h,
                        hspace=0.35)  # fmt: skip
    if below is not None and low is not None:
        below(low)
    for p in [path] if isinstance(path, str) else path:
        if save is not None:
            save(fig, p, dpi)
        else:
            fig.savefig(p, dpi=dpi)
