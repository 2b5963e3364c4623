"""One node's PCIe tree drawn on a matplotlib axes (the lower panel of ``topology.png``).

The tree is the one the run modelled: ``cluster.layout`` with ``cluster.layout_params``, sized
for the first server of the topology as :class:`podsim.nic.pcie.cluster.ClusterPcie` builds it
(GPUs and NIC cards per server from the graph). CPU root complexes on top, PCIe switches below,
GPUs and SSDs at the bottom. A switch on the NIC card (``on-card-switch``) is drawn inside a
dashed box with the NIC ASIC, named "NIC card", so the on-card switch is visible; an external
switch board has no box, and ``root-complex`` has no switch at all. Uplinks are labelled with
their width and generation; a note gives the device links' widths.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from typing import Any

import networkx as nx
from podsim.scenarios.report.style import FONT_PT, MIN_FONT_PT

__all__ = ["draw_node_pcie", "node_tree"]

_COLOUR = {
    "root": "#c9b3e6",
    "switch": "#ffc58a",
    "nic": "#9cc3e6",
    "gpu": "#a6dba0",
    "ssd": "#cccccc",
}
_NAME = {"root": "CPU", "switch": "sw", "nic": "NIC", "gpu": "GPU", "ssd": "SSD"}
_LEGEND = {
    "root": "CPU root complex",
    "switch": "PCIe switch",
    "nic": "NIC ASIC",
    "gpu": "GPU",
    "ssd": "NVMe SSD",
}
#: rows of the drawing (y): roots on top, then switches (and on-card NIC ASICs), then devices
_ROW = {"root": 2.0, "switch": 1.0, "nic": 0.0, "gpu": 0.0, "ssd": 0.0}


def node_tree(graph: nx.Graph | None, scenario: Mapping[str, Any] | None) -> Any:
    """The PCIe tree of the first server with GPUs and NICs, as the run built it, or None when
    the scenario sets no ``cluster.layout`` (or the graph is missing). Raises ValueError when
    the layout cannot be built (the run would have refused it)."""
    cluster = (scenario or {}).get("cluster") or {}
    name = cluster.get("layout")
    if graph is None or not name:
        return None
    from podsim.nic.pcie.cluster import _build_tree, _server_shapes
    from podsim.scenarios.input.registries import get_registry

    builder = get_registry("node layout").get(str(name))
    params = cluster.get("layout_params") or {}
    for server, shape in _server_shapes(graph).items():
        if shape.gpus and shape.cards:
            topo = str(graph.graph.get("name", "?"))
            return _build_tree(str(name), builder, params, shape, server, topo)
    return None


def _positions(tree: Any) -> dict[str, tuple[float, float]]:
    """x: leaves one unit apart in depth-first order (an on-card NIC before its GPUs), parents
    over the middle of their children; y by :data:`_ROW` (an on-card NIC on its switch's row)."""
    g = tree.graph
    roles = {n: g.nodes[n]["role"] for n in g}
    children: dict[str, list[str]] = defaultdict(list)
    for u, v in tree.edges():
        if roles[u] == "root" and roles[v] == "root":
            continue  # the inter-socket link: drawn, not a parent-child edge
        children[u].append(v)
    order = {"nic": 0, "switch": 1, "gpu": 2, "ssd": 3, "root": 4}
    for u in children:
        children[u].sort(key=lambda n: (order[roles[n]], g.nodes[n]["index"]))
    pos: dict[str, tuple[float, float]] = {}
    next_x = [0.0]

    def place(n: str) -> float:
        kids = children.get(n, [])
        if not kids:
            x = next_x[0]
            next_x[0] += 1.0
        else:
            xs = [place(c) for c in kids]
            own = [x for c, x in zip(kids, xs, strict=True) if not _on_card_nic(g, c)]
            x = sum(own or xs) / len(own or xs)
        y = _ROW[roles[n]]
        if _on_card_nic(g, n):
            y = _ROW["switch"]
        pos[n] = (x, y)
        return x

    for r in tree.devices("root"):
        place(r)
        next_x[0] += 0.5  # a gap between sockets
    for n in g:  # a tree without roots (explicit YAML) still gets every node placed
        if n not in pos:
            place(n)
    return pos


def _on_card_nic(g: nx.Graph, n: str) -> bool:
    if g.nodes[n]["role"] != "nic":
        return False
    return any(
        g.nodes[m]["role"] == "switch" and g.nodes[m].get("on_card", False) for m in g.neighbors(n)
    )


def _lanes(g: nx.Graph, u: str, v: str) -> str:
    link = g.edges[u, v].get("link")
    if link is None:
        return "inter-socket"
    return f"x{link.lanes} Gen{link.gen}"


def draw_node_pcie(ax: Any, tree: Any, layout: str = "") -> None:
    """Draw ``tree`` (a :class:`~podsim.nic.pcie.tree.PcieTree`, or None: the axes then says the
    run models no PCIe tree) on ``ax``; ``layout`` names it in the title."""
    from matplotlib.patches import FancyBboxPatch, Patch

    ax.set_xticks([])
    ax.set_yticks([])
    for side in ("top", "right", "bottom", "left"):
        ax.spines[side].set_visible(False)
    if tree is None:
        ax.text(
            0.5,
            0.5,
            "no node PCIe layout in this scenario (cluster.layout unset):\n"
            "GPU-NIC traffic is not modelled through PCIe",
            ha="center",
            va="center",
            fontsize=FONT_PT,
            transform=ax.transAxes,
        )
        ax.set_title("one node's PCIe tree", fontsize=FONT_PT + 1)
        return
    g = tree.graph
    pos = _positions(tree)
    n_units = max(x for x, _ in pos.values()) + 1
    # device labels turn upright when a unit is narrower than a label
    width_in = ax.get_position().width * ax.figure.get_figwidth()
    upright = width_in / max(n_units, 1.0) < 0.45
    for u, v in g.edges():
        (x0, y0), (x1, y1) = pos[u], pos[v]
        ax.plot([x0, x1], [y0, y1], color="0.45", lw=1.0, zorder=1)
        roles = {g.nodes[u]["role"], g.nodes[v]["role"]}
        if "root" in roles:  # uplinks (and the inter-socket link) carry their width
            ax.text((x0 + x1) / 2, (y0 + y1) / 2, _lanes(g, u, v), fontsize=MIN_FONT_PT,
                    ha="center", va="center", color="0.25", zorder=3,
                    bbox={"fc": "white", "ec": "none", "pad": 0.5})  # fmt: skip
    for sw in tree.devices("switch"):
        if not g.nodes[sw].get("on_card", False):
            continue
        members = [sw] + [n for n in g.neighbors(sw) if _on_card_nic(g, n)]
        xs = [pos[m][0] for m in members]
        y = _ROW["switch"]
        card = FancyBboxPatch((min(xs) - 0.45, y - 0.3), max(xs) - min(xs) + 0.9, 0.6,
                              boxstyle="round,pad=0.02", fc="none", ec="tab:blue", ls="--",
                              lw=1.2, zorder=2)  # fmt: skip
        ax.add_patch(card)
    for n, (x, y) in pos.items():
        role = g.nodes[n]["role"]
        label = f"{_NAME[role]}{g.nodes[n]['index']}"
        rot = 90 if upright and y == _ROW["gpu"] else 0
        ax.text(x, y, label, ha="center", va="center", fontsize=FONT_PT, rotation=rot, zorder=4,
                bbox={"boxstyle": "round,pad=0.3", "fc": _COLOUR[role], "ec": "0.3"})  # fmt: skip
    ax.set_xlim(-0.8, n_units - 0.2)
    ax.set_ylim(-0.6, 2.5)
    handles = [Patch(fc=_COLOUR[r], ec="0.3", label=_LEGEND[r])
               for r in ("root", "switch", "nic", "gpu", "ssd") if tree.devices(r)]  # fmt: skip
    if any(g.nodes[s].get("on_card", False) for s in tree.devices("switch")):
        handles.append(Patch(fc="none", ec="tab:blue", ls="--", label="NIC card"))
    ax.legend(handles=handles, fontsize=FONT_PT, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    widths = {}
    for u, v in g.edges():
        for dev in (u, v):
            role = g.nodes[dev]["role"]
            if role in ("gpu", "ssd") or (role == "nic" and not _on_card_nic(g, dev)):
                widths.setdefault(_LEGEND[role], _lanes(g, u, v))
            elif role == "nic":
                widths.setdefault("NIC ASIC (on the card)", _lanes(g, u, v))
    note = ", ".join(f"{k} {v}" for k, v in widths.items())
    ax.set_xlabel(f"device links: {note}", fontsize=FONT_PT)
    ax.set_title(
        f"one node's PCIe tree (cluster.layout {layout or tree.name}): "
        f"{len(tree.gpus)} GPUs, {len(tree.nics)} NICs, {len(tree.ssds)} SSDs, "
        f"{len(tree.devices('switch'))} PCIe switches",
        fontsize=FONT_PT + 1,
    )
