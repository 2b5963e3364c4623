"""Cluster topology graphs: the contract every engine reads, its helpers and the builders.

A topology is an undirected :class:`networkx.Graph`; each edge is one full-duplex link and no
node pair has two links (bundles are expressed as more switches or planes). The contract (team
brief, "Topology graph"):

* graph attrs ``name`` (str), ``builder`` (registry name), ``params`` (dict of resolved builder
  arguments, SI units);
* node attr ``role``: ``"nic"`` (one NIC *port* on the scale-out fabric: ``server``, ``gpu``,
  ``plane``, ``pod``, ``nic``), ``"leaf"``/``"spine"``/``"core"``/``"scaleup"`` switches
  (``tier``, ``plane``, ``pod``, ``radix``) and ``"gpu"`` (an accelerator's scale-up port:
  ``gpu``, ``server``, ``pod``);
* edge attrs ``rate_bps`` (MAC rate), ``length_m``, ``phy`` (a :mod:`fabric.phy` profile name on
  scale-out links), ``kind`` (``"scaleout"``/``"scaleup"``), ``tier`` (``"nic-leaf"``,
  ``"leaf-spine"``, ``"spine-core"``, ``"gpu-scaleup"``); scale-up edges add ``latency_s``.

Conventions this module adds (all graphml-safe scalars):

* ``pod`` is always the scale-up domain. Builders without a scale-up fabric make every server its
  own pod (``pod == server``), so "same pod" still means "can talk without the NIC".
* NIC ports also carry ``gpu_count`` (the port serves GPUs ``gpu .. gpu+gpu_count-1``; 2 when two
  GPUs share one NIC) and ``rail`` (the NIC's index inside its server). Scale-out switches carry
  ``group`` (fat-tree pod or rail group; -1 for none) and ``pod == -1``; scale-up switches have
  ``plane == -1``.
* GPU nodes (SuperPoD graphs) also carry ``local`` (index inside the server) and ``nic`` (the
  NIC card serving it).
* Switch names are plane-qualified (``p1.leaf3``) when the fabric has more than one plane.
* There is no GPU-NIC edge: the PCIe path is modelled by :mod:`nic`, and an edge here would let
  routing run scale-out traffic through the scale-up fabric. GPUs reach their NICs through the
  ``gpu``/``gpu_count`` attributes (see :func:`gpu_nics`).

Every builder and SuperPoD preset lives in the one :data:`TOPOLOGIES` registry (presets are
builders with defaults; their descriptions start with ``preset:``); scenarios call
:func:`build_topology`. Related modules: :mod:`fabric.superpod` (scale-up domains and presets),
:mod:`podsim.fabric.bisection`, :mod:`podsim.fabric.rankmap` (ranks -> GPUs -> NIC ports),
:mod:`podsim.fabric.topology_io` (GraphML, drawing). Cable defaults follow the brief: 2 m DAC
NIC-leaf, 30 m leaf-spine, 500 m spine-core; propagation is 5 ns/m (docs/physics.md, "Fibre
propagation") in the port model.
"""

from __future__ import annotations

import inspect
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import networkx as nx
from podsim.fabric.phy import get_phy
from podsim.fabric.registry import Registry
from podsim.fabric.units import parse_length

__all__ = [
    "EDGE_TIERS",
    "KINDS",
    "ROLES",
    "SCALEOUT_SWITCH_ROLES",
    "SIZERS",
    "SWITCH_ROLES",
    "TOPOLOGIES",
    "TopologyError",
    "TopologySize",
    "build_topology",
    "builder_arguments",
    "builder_parameters",
    "endpoints",
    "gpu_nics",
    "gpu_table",
    "gpus",
    "mac_rate",
    "passes_to",
    "scaleout_view",
    "switches",
    "topology_size",
    "validate_graph",
]

#: builders and presets; the SuperPoD ones (podsim.fabric.superpod builds on the helpers here)
#: register on the first lookup
TOPOLOGIES: Registry = Registry("topology", builtins=("podsim.fabric.superpod",))

ROLES = ("nic", "leaf", "spine", "core", "scaleup", "gpu")
#: switch roles of the scale-out fabric (simulated packet by packet) and of every switch
SCALEOUT_SWITCH_ROLES = ("leaf", "spine", "core")
SWITCH_ROLES = (*SCALEOUT_SWITCH_ROLES, "scaleup")
KINDS = ("scaleout", "scaleup")
EDGE_TIERS = ("nic-leaf", "leaf-spine", "spine-core", "gpu-scaleup")
_TIER_OF_ROLE = {"leaf": 1, "spine": 2, "core": 3, "scaleup": 1}

DEFAULT_NIC_CABLE = "2m"  # DAC inside the rack (brief)
DEFAULT_LEAF_SPINE_CABLE = "30m"  # (brief)
DEFAULT_SPINE_CORE_CABLE = "500m"  # (brief)


class TopologyError(ValueError):
    """A topology request that cannot be built, or a graph that breaks the contract."""


# --------------------------------------------------------------------------------------------
# small helpers


def mac_rate(phy: str) -> float:
    """MAC rate in bit/s of the Ethernet :mod:`fabric.phy` profile ``phy`` (e.g. ``"400GbE"``)."""
    try:
        rate = float(get_phy(phy).mac_rate_bps)
    except (KeyError, ValueError) as exc:
        raise TopologyError(f"PHY: {exc}") from None
    if not rate > 0:
        raise TopologyError(f"PHY {phy!r} has no MAC rate; a scale-out link needs an Ethernet PHY")
    return rate


def _phy_known(phy: str) -> bool:
    try:
        mac_rate(phy)
    except TopologyError:
        return False
    return True


def int_param(value: object, key: str, minimum: int = 1) -> int:
    """``value`` as an int >= ``minimum`` (whole floats accepted); else a TopologyError."""
    whole = isinstance(value, int) or (isinstance(value, float) and value.is_integer())
    if isinstance(value, bool) or not whole:
        raise TopologyError(f"{key}={value!r} must be an integer >= {minimum}")
    if value < minimum:
        raise TopologyError(f"{key}={value!r} must be >= {minimum}")
    return int(value)


def length_param(value: str | float, key: str) -> float:
    """A cable length in metres from ``"30m"`` or a number; errors name ``key``."""
    try:
        return parse_length(value)
    except ValueError as exc:
        raise TopologyError(f"{key}: {exc}") from None


def _sw(kind: str, i: int, plane: int, planes: int) -> str:
    return f"p{plane}.{kind}{i}" if planes > 1 else f"{kind}{i}"


def new_graph(name: str, builder: str, params: dict[str, Any]) -> nx.Graph:
    """An empty topology graph carrying the contract's graph attributes."""
    return nx.Graph(name=name, builder=builder, params=dict(params))


def set_radix(g: nx.Graph) -> None:
    """Record every switch's used ports (its degree) as ``radix``; builders call it last."""
    deg = g.degree
    for n, role in g.nodes(data="role"):
        if role in SWITCH_ROLES:
            g.nodes[n]["radix"] = int(deg[n])


# A NIC card: (nic index, server, first gpu, gpu_count, pod, rail). Builders make a list of
# these, add one port node per plane, then hand them to a scale-out fabric attacher.
Card = tuple[int, int, int, int, int, int]


def _simple_cards(hosts: int, nics_per_server: int) -> list[Card]:
    """One GPU per NIC card; ``nics_per_server`` consecutive cards form a server (its own pod)."""
    return [
        (n, n // nics_per_server, n, 1, n // nics_per_server, n % nics_per_server)
        for n in range(hosts)
    ]


def add_nic_ports(g: nx.Graph, cards: Sequence[Card], planes: int) -> list[list[str]]:
    """Add the NIC port nodes; returns port names indexed [plane][card position]."""
    ports: list[list[str]] = []
    for p in range(planes):
        names = [f"nic{c[0]}.p{p}" for c in cards]
        g.add_nodes_from(
            (
                name,
                {
                    "role": "nic",
                    "server": c[1],
                    "gpu": c[2],
                    "gpu_count": c[3],
                    "plane": p,
                    "pod": c[4],
                    "nic": c[0],
                    "rail": c[5],
                },
            )
            for name, c in zip(names, cards, strict=True)
        )
        ports.append(names)
    return ports


def switch_attrs(role: str, plane: int, group: int = -1, pod: int = -1) -> dict[str, Any]:
    return {
        "role": role,
        "tier": _TIER_OF_ROLE[role],
        "plane": plane,
        "pod": pod,
        "group": group,
        "radix": 0,
    }


def _edge(rate: float, length: float, phy: str, tier: str) -> dict[str, Any]:
    return {"rate_bps": rate, "length_m": length, "phy": phy, "kind": "scaleout", "tier": tier}


# --------------------------------------------------------------------------------------------
# scale-out fabric attachers: each adds the switches of every plane and links the given ports


def attach_star(g: nx.Graph, ports: list[list[str]], phy: str, cable_m: float) -> None:
    planes = len(ports)
    nic_leaf = _edge(mac_rate(phy), cable_m, phy, "nic-leaf")
    for p, plane_ports in enumerate(ports):
        sw = _sw("leaf", 0, p, planes)
        g.add_node(sw, **switch_attrs("leaf", p))
        g.add_edges_from((port, sw, nic_leaf) for port in plane_ports)


def attach_two_tier(
    g: nx.Graph,
    ports: list[list[str]],
    leaf_of: Sequence[int],
    group_of_leaf: Sequence[int],
    spines: int,
    host_phy: str,
    fabric_phy: str,
    nic_cable_m: float,
    leaf_spine_cable_m: float,
) -> None:
    """Two-tier Clos per plane: port i goes to leaf ``leaf_of[i]``; every leaf links every spine."""
    planes = len(ports)
    leaves = len(group_of_leaf)
    nic_leaf = _edge(mac_rate(host_phy), nic_cable_m, host_phy, "nic-leaf")
    leaf_spine = _edge(mac_rate(fabric_phy), leaf_spine_cable_m, fabric_phy, "leaf-spine")
    for p, plane_ports in enumerate(ports):
        leaf_names = [_sw("leaf", i, p, planes) for i in range(leaves)]
        spine_names = [_sw("spine", j, p, planes) for j in range(spines)]
        g.add_nodes_from(
            (name, switch_attrs("leaf", p, group_of_leaf[i])) for i, name in enumerate(leaf_names)
        )
        g.add_nodes_from((name, switch_attrs("spine", p)) for name in spine_names)
        g.add_edges_from(
            (port, leaf_names[leaf_of[i]], nic_leaf) for i, port in enumerate(plane_ports)
        )
        g.add_edges_from((lf, sp, leaf_spine) for lf in leaf_names for sp in spine_names)


def attach_fat_tree(
    g: nx.Graph,
    ports: list[list[str]],
    k: int,
    host_phy: str,
    fabric_phy: str,
    nic_cable_m: float,
    leaf_spine_cable_m: float,
    spine_core_cable_m: float,
) -> None:
    """k-ary fat-tree per plane (Al-Fares et al. 2008): k pods of k/2 edge ("leaf") and k/2
    aggregation ("spine") switches, (k/2)^2 cores; aggregation switch j of every pod links cores
    j*k/2 .. j*k/2+k/2-1. Ports fill edge switches in order, k/2 per edge switch."""
    if len(ports[0]) > k**3 // 4:
        raise TopologyError(
            f"{len(ports[0])} NIC ports per plane do not fit a k={k} fat-tree "
            f"({k**3 // 4} host ports); raise k"
        )
    planes = len(ports)
    h = k // 2
    nic_leaf = _edge(mac_rate(host_phy), nic_cable_m, host_phy, "nic-leaf")
    leaf_spine = _edge(mac_rate(fabric_phy), leaf_spine_cable_m, fabric_phy, "leaf-spine")
    spine_core = _edge(mac_rate(fabric_phy), spine_core_cable_m, fabric_phy, "spine-core")
    for p, plane_ports in enumerate(ports):
        leaf = [_sw("leaf", i, p, planes) for i in range(k * h)]
        spine = [_sw("spine", i, p, planes) for i in range(k * h)]
        core = [_sw("core", i, p, planes) for i in range(h * h)]
        g.add_nodes_from((n, switch_attrs("leaf", p, i // h)) for i, n in enumerate(leaf))
        g.add_nodes_from((n, switch_attrs("spine", p, i // h)) for i, n in enumerate(spine))
        g.add_nodes_from((n, switch_attrs("core", p)) for n in core)
        g.add_edges_from((port, leaf[i // h], nic_leaf) for i, port in enumerate(plane_ports))
        g.add_edges_from(
            (leaf[pod * h + e], spine[pod * h + a], leaf_spine)
            for pod in range(k)
            for e in range(h)
            for a in range(h)
        )
        g.add_edges_from(
            (spine[pod * h + a], core[a * h + c], spine_core)
            for pod in range(k)
            for a in range(h)
            for c in range(h)
        )


def spines_for(
    down_ports: int,
    host_rate: float,
    fabric_rate: float,
    spines: int | None,
    oversubscription: float | None,
) -> tuple[int, float]:
    """Resolve (spines, oversubscription) for a leaf with ``down_ports`` host ports and one
    uplink per spine. Oversubscription = downlink capacity / uplink capacity of a leaf."""
    down = down_ports * host_rate
    if spines is None:
        ratio = 1.0 if oversubscription is None else float(oversubscription)
        if not ratio > 0:
            raise TopologyError(f"oversubscription={oversubscription!r} must be > 0")
        exact = down / (ratio * fabric_rate)
        n = round(exact)
        if n < 1 or abs(exact - n) > 1e-9 * exact:
            raise TopologyError(
                f"oversubscription={ratio:g} needs {exact:g} spines per plane "
                f"({down_ports} host ports x {host_rate:g} bit/s / ({ratio:g} x {fabric_rate:g} "
                f"bit/s uplinks)); choose a ratio that gives a whole number >= 1, or give spines"
            )
        return n, ratio
    n = int_param(spines, "spines")
    ratio = down / (n * fabric_rate)
    if oversubscription is not None and not math.isclose(ratio, float(oversubscription)):
        raise TopologyError(
            f"spines={n} gives oversubscription {ratio:g}, not the requested "
            f"{oversubscription!r}; give only one of spines / oversubscription"
        )
    return n, ratio


# --------------------------------------------------------------------------------------------
# generic builders


@TOPOLOGIES.register("star", "N NIC ports on one switch (per plane)")
def star(
    hosts: int = 16,
    *,
    nics_per_server: int = 1,
    planes: int = 1,
    phy: str = "400GbE",
    cable: str | float = DEFAULT_NIC_CABLE,
    name: str | None = None,
) -> nx.Graph:
    """Single switch: ``hosts`` NIC cards, each with one port per plane, all on switch ``leaf0``
    (``p{plane}.leaf0`` with several planes).

    Parameters: ``hosts`` NIC cards; ``nics_per_server`` consecutive cards form a server (each
    card serves one GPU, GPU id = NIC id; each server is its own pod); ``planes`` ports per card,
    one switch per plane; ``phy`` the link PHY (rate = its MAC rate); ``cable`` NIC-switch cable
    length (default 2 m DAC, brief). Assumes the switch has enough ports (radix is recorded, not
    capped).
    """
    hosts = int_param(hosts, "hosts")
    nps = int_param(nics_per_server, "nics_per_server")
    planes = int_param(planes, "planes")
    cable_m = length_param(cable, "cable")
    params = {
        "hosts": hosts,
        "nics_per_server": nps,
        "planes": planes,
        "phy": phy,
        "cable_m": cable_m,
    }
    g = new_graph(name or f"star-{hosts}", "star", params)
    ports = add_nic_ports(g, _simple_cards(hosts, nps), planes)
    attach_star(g, ports, phy, cable_m)
    set_radix(g)
    return g


@TOPOLOGIES.register("leaf-spine", "two-tier Clos with hosts per leaf and oversubscription")
def leaf_spine(
    hosts_per_leaf: int = 8,
    leaves: int = 4,
    *,
    spines: int | None = None,
    oversubscription: float | None = None,
    nics_per_server: int = 1,
    planes: int = 1,
    host_phy: str = "400GbE",
    fabric_phy: str = "400GbE",
    nic_cable: str | float = DEFAULT_NIC_CABLE,
    leaf_spine_cable: str | float = DEFAULT_LEAF_SPINE_CABLE,
    name: str | None = None,
) -> nx.Graph:
    """Two-tier leaf-spine: ``leaves`` leaves of ``hosts_per_leaf`` NIC ports, every leaf linked
    once to every spine (per plane).

    Oversubscription = leaf downlink capacity / uplink capacity
    = ``hosts_per_leaf`` x rate(host_phy) / (``spines`` x rate(fabric_phy)). Give ``spines`` or
    ``oversubscription`` (default 1, non-blocking); the other is derived and must come out whole.
    ``nics_per_server`` consecutive NIC cards form a server (each card serves one GPU, GPU id =
    NIC id; each server is its own pod). ``planes`` > 1 replicates the fabric, one port per card
    per plane. Cables: ``nic_cable`` (default 2 m DAC), ``leaf_spine_cable`` (default 30 m).
    Hosts fill leaves in NIC order, so leaf i holds NICs i*hosts_per_leaf onward.
    """
    hpl = int_param(hosts_per_leaf, "hosts_per_leaf")
    leaves = int_param(leaves, "leaves")
    nps = int_param(nics_per_server, "nics_per_server")
    planes = int_param(planes, "planes")
    n_spines, ratio = spines_for(
        hpl, mac_rate(host_phy), mac_rate(fabric_phy), spines, oversubscription
    )
    nic_m = length_param(nic_cable, "nic_cable")
    ls_m = length_param(leaf_spine_cable, "leaf_spine_cable")
    hosts = hpl * leaves
    params = {
        "hosts_per_leaf": hpl,
        "leaves": leaves,
        "spines": n_spines,
        "oversubscription": ratio,
        "nics_per_server": nps,
        "planes": planes,
        "host_phy": host_phy,
        "fabric_phy": fabric_phy,
        "nic_cable_m": nic_m,
        "leaf_spine_cable_m": ls_m,
    }
    g = new_graph(name or f"leaf-spine-{leaves}x{hpl}", "leaf-spine", params)
    ports = add_nic_ports(g, _simple_cards(hosts, nps), planes)
    attach_two_tier(
        g,
        ports,
        [i // hpl for i in range(hosts)],
        list(range(leaves)),
        n_spines,
        host_phy,
        fabric_phy,
        nic_m,
        ls_m,
    )
    set_radix(g)
    return g


def rail_cards(
    servers: int, gpus_per_server: int, gpus_per_nic: int, pod_of_server: Sequence[int]
) -> list[Card]:
    """NIC cards of rail-style servers: ``gpus_per_server / gpus_per_nic`` cards per server;
    card j of server s has NIC id s*rails+j, serves GPUs s*G + j*gpus_per_nic onward and sits
    on rail j."""
    rails = gpus_per_server // gpus_per_nic
    return [
        (
            s * rails + j,
            s,
            s * gpus_per_server + j * gpus_per_nic,
            gpus_per_nic,
            pod_of_server[s],
            j,
        )
        for s in range(servers)
        for j in range(rails)
    ]


def attach_rail(
    g: nx.Graph,
    ports: list[list[str]],
    cards: Sequence[Card],
    rails: int,
    servers_per_group: int,
    spines: int,
    nic_phy: str,
    fabric_phy: str,
    nic_cable_m: float,
    leaf_spine_cable_m: float,
) -> None:
    """Rail-optimised two-tier fabric per plane: servers are grouped ``servers_per_group`` at a
    time; in each group, NIC rail j of every server goes to leaf group*rails + j (the rail
    switch); every leaf of a plane links every spine of that plane."""
    servers = max(c[1] for c in cards) + 1
    groups = -(-servers // servers_per_group)
    leaf_of = [(c[1] // servers_per_group) * rails + c[5] for c in cards]
    group_of_leaf = [i // rails for i in range(groups * rails)]
    attach_two_tier(
        g,
        ports,
        leaf_of,
        group_of_leaf,
        spines,
        nic_phy,
        fabric_phy,
        nic_cable_m,
        leaf_spine_cable_m,
    )


@TOPOLOGIES.register("fat-tree", "k-ary three-tier fat-tree: k^3/4 hosts, 5k^2/4 switches")
def fat_tree(
    k: int = 4,
    *,
    hosts: int | None = None,
    nics_per_server: int = 1,
    planes: int = 1,
    host_phy: str = "400GbE",
    fabric_phy: str = "400GbE",
    nic_cable: str | float = DEFAULT_NIC_CABLE,
    leaf_spine_cable: str | float = DEFAULT_LEAF_SPINE_CABLE,
    spine_core_cable: str | float = DEFAULT_SPINE_CORE_CABLE,
    name: str | None = None,
) -> nx.Graph:
    """k-ary fat-tree (Al-Fares, Loukissas, Vahdat, SIGCOMM 2008), per plane: k pods of k/2 edge
    switches (role ``leaf``) and k/2 aggregation switches (role ``spine``), (k/2)^2 core
    switches; every switch has k ports. Full size: k^3/4 hosts, 5k^2/4 switches, 3k^3/4 links
    (k^3/4 per tier). Non-blocking when host and fabric PHYs run at the same rate.

    ``k`` even >= 2. ``hosts`` (default k^3/4) fills edge switches in NIC order, k/2 per edge
    switch; fewer hosts leave ports empty but keep every switch. ``nics_per_server`` consecutive
    cards form a server (one GPU per card, GPU id = NIC id, server = pod). ``planes`` copies of
    the tree, one port per card per plane. Switch attr ``group`` is the fat-tree pod (-1 on
    cores). Cables: 2 m NIC-edge, 30 m edge-aggregation, 500 m aggregation-core (brief).
    """
    k = int_param(k, "k", 2)
    if k % 2:
        raise TopologyError(f"k={k} must be even")
    full = k**3 // 4
    n_hosts = full if hosts is None else int_param(hosts, "hosts")
    if n_hosts > full:
        raise TopologyError(f"hosts={n_hosts} exceeds the k={k} fat-tree's {full} host ports")
    nps = int_param(nics_per_server, "nics_per_server")
    planes = int_param(planes, "planes")
    mac_rate(host_phy), mac_rate(fabric_phy)  # fail early on an unknown PHY
    nic_m = length_param(nic_cable, "nic_cable")
    ls_m = length_param(leaf_spine_cable, "leaf_spine_cable")
    sc_m = length_param(spine_core_cable, "spine_core_cable")
    params = {
        "k": k,
        "hosts": n_hosts,
        "nics_per_server": nps,
        "planes": planes,
        "host_phy": host_phy,
        "fabric_phy": fabric_phy,
        "nic_cable_m": nic_m,
        "leaf_spine_cable_m": ls_m,
        "spine_core_cable_m": sc_m,
    }
    g = new_graph(name or f"fat-tree-k{k}", "fat-tree", params)
    ports = add_nic_ports(g, _simple_cards(n_hosts, nps), planes)
    attach_fat_tree(g, ports, k, host_phy, fabric_phy, nic_m, ls_m, sc_m)
    set_radix(g)
    return g


def rails_per_server(gpus_per_server: int, gpus_per_nic: int) -> int:
    """NIC cards (rails) per server; ``gpus_per_nic`` must divide ``gpus_per_server``."""
    gps = int_param(gpus_per_server, "gpus_per_server")
    gpn = int_param(gpus_per_nic, "gpus_per_nic")
    if gps % gpn:
        raise TopologyError(
            f"gpus_per_nic={gpn} must divide gpus_per_server={gps} (1 = a NIC per GPU, "
            f"2 = two GPUs share one NIC)"
        )
    return gps // gpn


def resolve_rail(
    servers: int,
    gpus_per_server: int,
    gpus_per_nic: int,
    servers_per_group: int | None,
    spines: int | None,
    oversubscription: float | None,
    nic_phy: str,
    fabric_phy: str,
) -> tuple[int, int, int, float]:
    """Check rail parameters; returns (rails, servers_per_group, spines, oversubscription).

    Default ``servers_per_group``: all servers up to 64, else 64 (a 51.2 Tb/s leaf has 128 x
    400G ports, docs/physics.md "Switches", half of them down). Oversubscription is that of a full
    rail leaf: servers_per_group x rate(nic_phy) / (spines x rate(fabric_phy))."""
    rails = rails_per_server(gpus_per_server, gpus_per_nic)
    spg = (
        min(servers, 64)
        if servers_per_group is None
        else int_param(servers_per_group, "servers_per_group")
    )
    n_spines, ratio = spines_for(
        spg, mac_rate(nic_phy), mac_rate(fabric_phy), spines, oversubscription
    )
    return rails, spg, n_spines, ratio


@TOPOLOGIES.register("rail", "rail-optimised multi-plane two-tier fabric of G-GPU servers")
def rail(
    servers: int = 4,
    gpus_per_server: int = 8,
    *,
    gpus_per_nic: int = 1,
    planes: int = 1,
    servers_per_group: int | None = None,
    spines: int | None = None,
    oversubscription: float | None = None,
    nic_phy: str = "400GbE",
    fabric_phy: str = "400GbE",
    nic_cable: str | float = DEFAULT_NIC_CABLE,
    leaf_spine_cable: str | float = DEFAULT_LEAF_SPINE_CABLE,
    name: str | None = None,
) -> nx.Graph:
    """Rail-optimised fabric: ``servers`` servers of ``gpus_per_server`` GPUs, one NIC card per
    ``gpus_per_nic`` GPUs (1 = NIC per GPU, 2 = two neighbouring GPUs share one NIC), so
    rails = gpus_per_server / gpus_per_nic NIC cards per server. NIC j of every server is on
    rail j: within a group of ``servers_per_group`` servers, rail j is one leaf switch. Each
    NIC card has one port per plane (``planes``, each port at rate(nic_phy)); every plane is a
    separate two-tier fabric whose spines link all rail leaves of that plane (cross-rail and
    cross-group traffic). Give ``spines`` per plane or ``oversubscription`` (default 1) of a full
    rail leaf. Without a scale-up domain each server is its own pod. Cables: 2 m NIC-leaf,
    30 m leaf-spine (brief).
    """
    servers = int_param(servers, "servers")
    planes = int_param(planes, "planes")
    rails, spg, n_spines, ratio = resolve_rail(
        servers,
        gpus_per_server,
        gpus_per_nic,
        servers_per_group,
        spines,
        oversubscription,
        nic_phy,
        fabric_phy,
    )
    nic_m = length_param(nic_cable, "nic_cable")
    ls_m = length_param(leaf_spine_cable, "leaf_spine_cable")
    params = {
        "servers": servers,
        "gpus_per_server": int(gpus_per_server),
        "gpus_per_nic": int(gpus_per_nic),
        "planes": planes,
        "servers_per_group": spg,
        "spines": n_spines,
        "oversubscription": ratio,
        "nic_phy": nic_phy,
        "fabric_phy": fabric_phy,
        "nic_cable_m": nic_m,
        "leaf_spine_cable_m": ls_m,
    }
    g = new_graph(name or f"rail-{servers}x{gpus_per_server}", "rail", params)
    cards = rail_cards(servers, int(gpus_per_server), int(gpus_per_nic), list(range(servers)))
    ports = add_nic_ports(g, cards, planes)
    attach_rail(g, ports, cards, rails, spg, n_spines, nic_phy, fabric_phy, nic_m, ls_m)
    set_radix(g)
    return g


# --------------------------------------------------------------------------------------------
# contract helpers

_NIC_NAME = re.compile(r"nic(\d+)\.p(\d+)$")


def endpoints(g: nx.Graph) -> list[str]:
    """NIC port nodes (the packet engine's endpoints), sorted by (nic, plane)."""
    ports = [(d["nic"], d["plane"], n) for n, d in g.nodes(data=True) if d.get("role") == "nic"]
    ports.sort()
    return [n for _, _, n in ports]


def switches(g: nx.Graph, role: str | None = None) -> list[str]:
    """Switch nodes (leaf, spine, core, scale-up), or only those of ``role``; sorted by name."""
    want = SWITCH_ROLES if role is None else (role,)
    if role is not None and role not in SWITCH_ROLES:
        raise TopologyError(f"role={role!r} is not a switch role; expected one of {SWITCH_ROLES}")
    return sorted(n for n, r in g.nodes(data="role") if r in want)


def gpu_table(g: nx.Graph) -> dict[int, tuple[int, int]]:
    """gpu id -> (server, pod), from GPU nodes if any, else from the NIC ports' GPU ranges."""
    table: dict[int, tuple[int, int]] = {}
    gpu_nodes = [d for _, d in g.nodes(data=True) if d.get("role") == "gpu"]
    if gpu_nodes:
        for d in gpu_nodes:
            table[d["gpu"]] = (d["server"], d["pod"])
        return table
    for _, d in g.nodes(data=True):
        if d.get("role") == "nic" and d["gpu"] >= 0:
            for gid in range(d["gpu"], d["gpu"] + d.get("gpu_count", 1)):
                table[gid] = (d["server"], d["pod"])
    return table


def gpus(g: nx.Graph) -> list[int]:
    """Global GPU ids present in ``g`` (GPU nodes, or GPUs that NIC ports serve), sorted."""
    return sorted(gpu_table(g))


def gpu_nics(g: nx.Graph) -> dict[int, list[str]]:
    """gpu id -> the NIC port nodes that serve it (one per plane; shared when GPUs share a NIC),
    sorted by (nic, plane). GPUs with no NIC map to an empty list."""
    out: dict[int, list[str]] = {gid: [] for gid in gpus(g)}
    for n in endpoints(g):
        d = g.nodes[n]
        if d["gpu"] < 0:
            continue
        for gid in range(d["gpu"], d["gpu"] + d.get("gpu_count", 1)):
            out.setdefault(gid, []).append(n)
    return out


def scaleout_view(g: nx.Graph) -> nx.Graph:
    """Read-only view of the scale-out fabric: NIC ports, scale-out switches and their links."""
    keep = [n for n, r in g.nodes(data="role") if r not in ("gpu", "scaleup")]
    return g.subgraph(keep)


def build_topology(name: str, **params: Any) -> nx.Graph:
    """Build the registered topology or preset ``name`` with keyword ``params``."""
    builder = TOPOLOGIES.get(name)
    try:
        return builder(**params)
    except TypeError as exc:
        # wrong keyword: name it together with what the builder accepts
        accepted = ", ".join(inspect.signature(builder).parameters)
        raise TopologyError(f"topology {name!r}: {exc}; parameters: {accepted}") from None


# --------------------------------------------------------------------------------------------
# validation

_NODE_ATTRS: dict[str, dict[str, type]] = {
    "nic": {"server": int, "gpu": int, "plane": int, "pod": int, "nic": int},
    "gpu": {"gpu": int, "server": int, "pod": int},
    **{r: {"tier": int, "plane": int, "pod": int, "radix": int} for r in SWITCH_ROLES},
}
_EDGE_ATTRS: dict[str, type | tuple[type, ...]] = {
    "rate_bps": (float, int),
    "length_m": (float, int),
    "phy": str,
    "kind": str,
    "tier": str,
}


def validate_graph(g: nx.Graph, *, max_errors: int = 20) -> None:
    """Check ``g`` against the topology contract; raise :class:`TopologyError` listing the
    problems (at most ``max_errors``). Returns None when the graph is valid."""
    errs: list[str] = []

    def err(msg: str) -> None:
        errs.append(msg)

    if not isinstance(g, nx.Graph) or g.is_directed() or g.is_multigraph():
        raise TopologyError(f"expected an undirected networkx.Graph, got {type(g).__name__}")
    for key, typ in (("name", str), ("builder", str), ("params", dict)):
        if not isinstance(g.graph.get(key), typ):
            err(f"graph attr {key!r} missing or not {typ.__name__}")
    planes_seen: set[int] = set()
    for n, d in g.nodes(data=True):
        if not isinstance(n, str):
            err(f"node {n!r}: names must be str")
        role = d.get("role")
        if role not in ROLES:
            err(f"node {n!r}: role {role!r} not one of {ROLES}")
            continue
        for key, typ in _NODE_ATTRS[role].items():
            v = d.get(key)
            if not isinstance(v, typ) or isinstance(v, bool):
                err(f"node {n!r} ({role}): attr {key!r}={v!r} missing or not {typ.__name__}")
        if role == "nic":
            m = _NIC_NAME.match(str(n))
            if not m or (int(m[1]), int(m[2])) != (d.get("nic"), d.get("plane")):
                err(f"NIC port {n!r}: name must be nic{{nic}}.p{{plane}} matching its attrs")
            if isinstance(d.get("plane"), int):
                planes_seen.add(d["plane"])
            if g.degree[n] != 1:
                err(f"NIC port {n!r}: has {g.degree[n]} links, expected exactly 1")
        elif role in SWITCH_ROLES:
            if d.get("tier") != _TIER_OF_ROLE[role]:
                err(f"switch {n!r}: tier {d.get('tier')!r}, expected {_TIER_OF_ROLE[role]}")
            if d.get("radix") != g.degree[n]:
                err(f"switch {n!r}: radix {d.get('radix')!r} != {g.degree[n]} links")
        if len(errs) >= max_errors:
            break
    if planes_seen and planes_seen != set(range(len(planes_seen))):
        err(f"NIC planes {sorted(planes_seen)} are not 0..planes-1")
    roles = g.nodes(data="role")
    for u, v, d in g.edges(data=True):
        if len(errs) >= max_errors:
            break
        if u == v:
            err(f"edge {u!r}-{v!r}: self-loop")
        for key, typ in _EDGE_ATTRS.items():
            val = d.get(key)
            if not isinstance(val, typ) or isinstance(val, bool):
                err(f"edge {u!r}-{v!r}: attr {key!r}={val!r} missing or wrong type")
        rate, length = d.get("rate_bps"), d.get("length_m")
        if isinstance(rate, int | float) and not rate > 0:
            err(f"edge {u!r}-{v!r}: rate_bps={rate!r} must be > 0")
        if isinstance(length, int | float) and not length >= 0:
            err(f"edge {u!r}-{v!r}: length_m={length!r} must be >= 0")
        kind, tier = d.get("kind"), d.get("tier")
        if kind not in KINDS:
            err(f"edge {u!r}-{v!r}: kind {kind!r} not one of {KINDS}")
        if tier not in EDGE_TIERS:
            err(f"edge {u!r}-{v!r}: tier {tier!r} not one of {EDGE_TIERS}")
        ends = {roles[u], roles[v]}
        if kind == "scaleup":
            if d.get("phy") != "scaleup":
                err(f"edge {u!r}-{v!r}: scale-up link phy {d.get('phy')!r}, expected 'scaleup'")
            if ends != {"gpu", "scaleup"} or tier != "gpu-scaleup":
                err(f"edge {u!r}-{v!r}: scale-up links join a gpu and a scaleup switch")
            lat = d.get("latency_s")
            if not isinstance(lat, float | int) or isinstance(lat, bool) or lat < 0:
                err(f"edge {u!r}-{v!r}: scale-up link needs latency_s >= 0, got {lat!r}")
        elif kind == "scaleout":
            if ends & {"gpu", "scaleup"}:
                err(f"edge {u!r}-{v!r}: scale-out link touches the scale-up fabric")
            expect = _SCALEOUT_TIERS.get(frozenset(ends))
            if expect is None or tier != expect:
                err(f"edge {u!r}-{v!r}: roles {sorted(ends)} with tier {tier!r}")
            if isinstance(d.get("phy"), str) and not _phy_known(d["phy"]):
                err(f"edge {u!r}-{v!r}: phy {d['phy']!r} is not a podsim.fabric.phy profile")
            pu, pv = g.nodes[u].get("plane"), g.nodes[v].get("plane")
            if pu != pv:
                err(f"edge {u!r}-{v!r}: joins planes {pu!r} and {pv!r}")
    if errs:
        more = " (stopped early)" if len(errs) >= max_errors else ""
        raise TopologyError(
            f"topology {g.graph.get('name')!r} breaks the graph contract{more}:\n  "
            + "\n  ".join(errs[:max_errors])
        )


_SCALEOUT_TIERS = {
    frozenset({"nic", "leaf"}): "nic-leaf",
    frozenset({"leaf", "spine"}): "leaf-spine",
    frozenset({"spine", "core"}): "spine-core",
}


# --------------------------------------------------------------------------------------------
# size estimates: what a builder would make, in closed form, without building it


@dataclass(frozen=True)
class TopologySize:
    """Node, link and NIC-port counts of a topology, from its parameters alone."""

    nodes: int
    edges: int
    endpoints: int

    @property
    def elements(self) -> int:
        """Nodes plus links: what the graph's memory and build time scale with."""
        return self.nodes + self.edges


#: builder or preset name -> function(**params) -> TopologySize (same arguments as the builder)
SIZERS: dict[str, Any] = {}


def sizer(name: str) -> Any:
    """Register the closed-form size function of builder ``name`` (see :func:`topology_size`).
    It is called with every argument of the builder, defaults filled in
    (:func:`builder_arguments`), so it declares none of its own."""

    def deco(fn: Any) -> Any:
        SIZERS[name] = fn
        return fn

    return deco


def topology_size(name: str, params: dict[str, Any]) -> TopologySize | None:
    """The size :func:`build_topology` would build for ``name`` with ``params``, in closed form
    (microseconds, whatever the size), so a caller can refuse an absurd cluster before building
    it. None when there is no size function for ``name`` or the parameters are not valid (the
    builder then reports them). The counts are exact: tests build small graphs and compare."""
    fn = SIZERS.get(name)
    if fn is None:
        return None
    try:
        return fn(**builder_arguments(name, params))
    except Exception:
        return None


F = TypeVar("F", bound=Callable[..., Any])


def passes_to(builder: str) -> Callable[[F], F]:
    """Mark a preset whose ``**overrides`` go to the registered builder ``builder`` (so that
    :func:`builder_parameters` can name everything it accepts)."""

    def mark(fn: F) -> F:
        fn.passes_to = builder  # type: ignore[attr-defined]
        return fn

    return mark


def builder_parameters(name: str) -> list[str]:
    """Every keyword the registered builder or preset ``name`` accepts: its own parameters and,
    for a preset marked with :func:`passes_to`, those of the builder its overrides go to."""
    out: list[str] = []
    fn: Any = TOPOLOGIES.get(name)
    while fn is not None:
        for p in inspect.signature(fn).parameters.values():
            if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL) and p.name not in out:
                out.append(p.name)
        inner = getattr(fn, "passes_to", None)
        fn = TOPOLOGIES.get(inner) if inner else None
    return out


def builder_arguments(name: str, params: dict[str, Any]) -> dict[str, Any]:
    """``params`` bound to builder ``name``'s signature with its defaults filled in (keyword
    overrides a builder collects in ``**kw`` flattened in): what a size function receives, so
    that defaults live in the builder alone. TypeError for an unknown or missing argument."""
    sig = inspect.signature(TOPOLOGIES.get(name))
    bound = sig.bind(**params)
    bound.apply_defaults()
    args: dict[str, Any] = {}
    for key, value in bound.arguments.items():
        if sig.parameters[key].kind is inspect.Parameter.VAR_KEYWORD:
            args.update(value)
        else:
            args[key] = value
    return args


def two_tier_size(ports: int, leaves: int, spines: int, planes: int, extra_nodes: int = 0,
                  extra_edges: int = 0) -> TopologySize:  # fmt: skip
    """Counts of :func:`attach_two_tier` over ``ports`` NIC ports per plane (plus extras)."""
    return TopologySize(
        nodes=planes * (ports + leaves + spines) + extra_nodes,
        edges=planes * (ports + leaves * spines) + extra_edges,
        endpoints=planes * ports,
    )


def fat_tree_size(ports: int, k: int, planes: int, extra_nodes: int = 0,
                  extra_edges: int = 0) -> TopologySize:  # fmt: skip
    """Counts of :func:`attach_fat_tree`: per plane k*k/2 edge + k*k/2 aggregation + (k/2)^2
    core switches, k*(k/2)^2 links in each of the two upper tiers."""
    h = k // 2
    return TopologySize(
        nodes=planes * (ports + 2 * k * h + h * h) + extra_nodes,
        edges=planes * (ports + 2 * k * h * h) + extra_edges,
        endpoints=planes * ports,
    )


@sizer("star")
def _star_size(hosts: int, *, planes: int, **_: Any) -> TopologySize:
    hosts, planes = int_param(hosts, "hosts"), int_param(planes, "planes")
    return TopologySize(nodes=planes * (hosts + 1), edges=planes * hosts, endpoints=planes * hosts)


@sizer("leaf-spine")
def _leaf_spine_size(
    hosts_per_leaf: int,
    leaves: int,
    *,
    spines: int | None,
    oversubscription: float | None,
    planes: int,
    host_phy: str,
    fabric_phy: str,
    **_: Any,
) -> TopologySize:
    hpl, leaves = int_param(hosts_per_leaf, "hosts_per_leaf"), int_param(leaves, "leaves")
    n_spines, _ratio = spines_for(
        hpl, mac_rate(host_phy), mac_rate(fabric_phy), spines, oversubscription
    )
    return two_tier_size(hpl * leaves, leaves, n_spines, int_param(planes, "planes"))


@sizer("fat-tree")
def _fat_tree_size(k: int, *, hosts: int | None, planes: int, **_: Any) -> TopologySize:
    k = int_param(k, "k", 2)
    n_hosts = k**3 // 4 if hosts is None else int_param(hosts, "hosts")
    return fat_tree_size(n_hosts, k, int_param(planes, "planes"))


def rail_size(servers: int, rails: int, servers_per_group: int, spines: int, planes: int,
              extra_nodes: int = 0, extra_edges: int = 0) -> TopologySize:  # fmt: skip
    """Counts of :func:`attach_rail`: one leaf per rail per group of servers."""
    groups = -(-servers // servers_per_group)
    return two_tier_size(servers * rails, groups * rails, spines, planes, extra_nodes, extra_edges)


@sizer("rail")
def _rail_size(
    servers: int,
    gpus_per_server: int,
    *,
    gpus_per_nic: int,
    planes: int,
    servers_per_group: int | None,
    spines: int | None,
    oversubscription: float | None,
    nic_phy: str,
    fabric_phy: str,
    **_: Any,
) -> TopologySize:
    servers = int_param(servers, "servers")
    rails, spg, n_spines, _ratio = resolve_rail(
        servers, gpus_per_server, gpus_per_nic, servers_per_group, spines, oversubscription,
        nic_phy, fabric_phy,
    )  # fmt: skip
    return rail_size(servers, rails, spg, n_spines, int_param(planes, "planes"))
