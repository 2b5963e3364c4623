"""Bisection bandwidth of the scale-out fabric: from the graph (max-flow) and in closed form.

Definition used throughout: split the NIC cards into two halves by NIC index (cards
0 .. n/2-1 on side A, the rest on side B; every plane port of a card on the card's side). The
bisection bandwidth is the capacity, in bit/s and one direction, of the minimum set of
scale-out links whose removal separates every A port from every B port; by max-flow/min-cut it
equals the maximum A->B flow when every link carries ``rate_bps`` each way (each edge is a
full-duplex link). Builders number NICs server by server and fill switches in NIC order, so
this "natural" split is the one a job placed on the first half of the cluster sees. It is not
the worst balanced split over all partitions (NP-hard in general); pass ``side_a`` to test
another one. Scale-up links are not part of it (GPUs do not appear on the scale-out fabric).
"""

from __future__ import annotations

from collections.abc import Iterable

import networkx as nx
from podsim.fabric.topology import TopologyError, endpoints, mac_rate, scaleout_view

__all__ = ["bisection_bandwidth", "bisection_closed_form", "natural_split"]

_SRC, _DST = "__bisect_src__", "__bisect_dst__"


def natural_split(g: nx.Graph) -> list[str]:
    """Side A of the natural split: the ports of NIC cards with index below half the cards."""
    cards = sorted({g.nodes[n]["nic"] for n in endpoints(g)})
    half = set(cards[: len(cards) // 2])
    return [n for n in endpoints(g) if g.nodes[n]["nic"] in half]


def bisection_bandwidth(g: nx.Graph, side_a: Iterable[str] | None = None) -> float:
    """Max A->B flow (bit/s) over the scale-out links of ``g``, A = ``side_a`` NIC ports
    (default :func:`natural_split`), B = all other NIC ports. Planes are disconnected from each
    other, so each connected component is solved alone and the results summed."""
    ports = endpoints(g)
    a = set(natural_split(g) if side_a is None else side_a)
    unknown = a - set(ports)
    if unknown:
        raise TopologyError(f"side_a holds nodes that are not NIC ports: {sorted(unknown)[:5]}")
    view = scaleout_view(g)
    total = 0.0
    for comp in nx.connected_components(view):
        comp_ports = [n for n in comp if view.nodes[n]["role"] == "nic"]
        a_ports = [n for n in comp_ports if n in a]
        b_ports = [n for n in comp_ports if n not in a]
        if not a_ports or not b_ports:
            continue
        h = nx.Graph()
        h.add_edges_from(
            (u, v, {"capacity": d["rate_bps"]}) for u, v, d in view.subgraph(comp).edges(data=True)
        )
        h.add_edges_from((_SRC, n) for n in a_ports)  # no capacity attr: unbounded
        h.add_edges_from((n, _DST) for n in b_ports)
        total += nx.maximum_flow_value(h, _SRC, _DST, capacity="capacity")
    return float(total)


def bisection_closed_form(g: nx.Graph) -> float:
    """Closed-form bisection bandwidth (bit/s, one direction) for the natural split, from the
    builder's parameters in ``g.graph["params"]``. Cases with a closed form here:

    * ``star``: min(|A|, |B|) x r x planes.
    * ``leaf-spine`` with an even number of leaves: planes x L/2 x min(h x r_host,
      S x r_fabric), i.e. N x r_host / 2 / max(1, oversubscription) per plane.
    * ``fat-tree`` fully populated: planes x k^3/8 x min(r_host, r_fabric) (half the hosts at
      line rate when host and fabric rates match: the fat-tree is non-blocking).
    * ``rail`` (and SuperPoD presets with a rail scale-out), per plane and rail: one group of
      S servers (S even) splits every rail leaf in half and needs no spine: S/2 x r_nic; an even
      number G of full groups puts whole groups on each side: G/2 x min(spg x r_nic,
      spines x r_fabric).
    * SuperPoD with a fully populated fat-tree scale-out: as ``fat-tree``.

    Other cases raise :class:`TopologyError` (no closed form is claimed for them).
    """
    p = g.graph.get("params", {})
    builder = g.graph.get("builder")
    planes = p.get("planes", 1)
    if builder == "star":
        n = p["hosts"]
        return float(planes * (n // 2) * mac_rate(p["phy"]))
    if builder == "leaf-spine":
        leaves, hpl, spines = p["leaves"], p["hosts_per_leaf"], p["spines"]
        if leaves % 2:
            raise TopologyError(f"no closed form for leaf-spine with odd leaves={leaves}")
        down = hpl * mac_rate(p["host_phy"])
        up = spines * mac_rate(p["fabric_phy"])
        return float(planes * (leaves // 2) * min(down, up))
    if builder == "fat-tree" or p.get("scaleout") == "fat-tree":
        k = p["k"]
        hosts = p["hosts"] if builder == "fat-tree" else _cards(p)
        if hosts != k**3 // 4:
            raise TopologyError(f"no closed form for a partly populated fat-tree ({hosts} hosts)")
        host_phy = p.get("host_phy", p.get("nic_phy"))
        rate = min(mac_rate(host_phy), mac_rate(p["fabric_phy"]))
        return float(planes * (k**3 // 8) * rate)
    if builder == "rail" or p.get("scaleout") == "rail":
        servers = p["servers"] if builder == "rail" else _servers(p)
        rails = p["gpus_per_server"] // p["gpus_per_nic"]
        spg = p["servers_per_group"]
        r_nic, r_fab = mac_rate(p["nic_phy"]), mac_rate(p["fabric_phy"])
        groups = -(-servers // spg)
        if groups == 1 and servers % 2 == 0:
            return float(planes * rails * (servers // 2) * r_nic)
        if groups % 2 == 0 and servers == groups * spg:
            per_leaf = min(spg * r_nic, p["spines"] * r_fab)
            return float(planes * rails * (groups // 2) * per_leaf)
        raise TopologyError(
            f"no closed form for a rail fabric of {servers} servers in groups of {spg}"
        )
    raise TopologyError(f"no closed form for builder {builder!r}")


def _servers(p: dict) -> int:
    return p["pods"] * p["gpus_per_pod"] // p["gpus_per_server"]


def _cards(p: dict) -> int:
    return _servers(p) * (p["gpus_per_server"] // p["gpus_per_nic"])
