"""SuperPoD clusters: per-pod scale-up domains joined by a multi-plane scale-out RDMA fabric.

A pod is one scale-up domain (NVLink/UB/UALink-style): every GPU has a scale-up port (node
``gpu{g}``) linked to each of the pod's ``scaleup_switches`` switches (``su{pod}.{i}``), the
GPU's scale-up bandwidth spread evenly over them, as NVLink links are spread over NVSwitch chips.
Pods are cut into servers (trays) of ``gpus_per_server`` GPUs; each server has
``gpus_per_server / gpus_per_nic`` NIC cards on the scale-out fabric (rail-optimised or
fat-tree, one port per plane), built by the attachers of :mod:`podsim.fabric.topology`.

The generic builder ``superpod`` and the named presets register in
:data:`podsim.fabric.topology.TOPOLOGIES` (one registry: a preset is a builder with defaults; its
description starts with ``preset:``). Figures marked [S]/[D] come from
docs/physics.md; [E] are estimates with no public source at hand, to be overridden
by a scenario.
"""

from __future__ import annotations

from typing import Any

import networkx as nx
from podsim.fabric.topology import (
    DEFAULT_LEAF_SPINE_CABLE,
    DEFAULT_NIC_CABLE,
    DEFAULT_SPINE_CORE_CABLE,
    TOPOLOGIES,
    TopologyError,
    TopologySize,
    add_nic_ports,
    attach_fat_tree,
    attach_rail,
    builder_arguments,
    fat_tree_size,
    int_param,
    length_param,
    mac_rate,
    new_graph,
    passes_to,
    rail_cards,
    rail_size,
    rails_per_server,
    resolve_rail,
    set_radix,
    sizer,
    switch_attrs,
)
from podsim.fabric.units import parse_rate, parse_time

__all__ = [
    "PRESET_ACCELERATORS",
    "SCALEOUT_KINDS",
    "h800_deepep",
    "superpod",
    "superpod_128",
    "superpod_384",
]

SCALEOUT_KINDS = ("rail", "fat-tree")

# [E] GPU-to-GPU one-way latency through one scale-up switch; no figure in docs/physics.md.
DEFAULT_SCALEUP_LATENCY = "500ns"
DEFAULT_SCALEUP_CABLE = "1m"  # [E] copper inside the rack


#: The accelerator class of each preset (graph attribute ``accelerator``; the cost model prices
#: it, scenarios/cost/catalog.yaml item with that ``accelerator`` name; ``cost.accelerator``
#: overrides): the DeepEP paper's H800 nodes [S, docs/physics.md]; CloudMatrix384 is built from
#: Ascend 910C NPUs [public description]; the generic 128-accelerator pod names no vendor, so
#: it is priced as an H100-class GPU [E].
PRESET_ACCELERATORS: dict[str, str] = {
    "h800-deepep": "h800",
    "superpod-128": "h100",
    "superpod-384": "ascend-910c",
}


def _preset(g: nx.Graph, builder: str, preset: dict[str, Any]) -> nx.Graph:
    """Record that ``g`` came from preset ``builder`` called with ``preset`` arguments, and
    the preset's accelerator class (:data:`PRESET_ACCELERATORS`)."""
    g.graph["builder"] = builder
    g.graph["params"] = {**preset, **g.graph["params"]}
    if builder in PRESET_ACCELERATORS:
        g.graph["accelerator"] = PRESET_ACCELERATORS[builder]
    return g


def _rate(value: str | float, key: str) -> float:
    try:
        rate = parse_rate(value)
    except ValueError as exc:
        raise TopologyError(f"{key}: {exc}") from None
    if not rate > 0:
        raise TopologyError(f"{key}={value!r} must be > 0")
    return rate


def _time(value: str | float, key: str) -> float:
    try:
        return parse_time(value)
    except ValueError as exc:
        raise TopologyError(f"{key}: {exc}") from None


def smallest_fat_tree_k(hosts: int) -> int:
    """Smallest even k whose fat-tree has at least ``hosts`` host ports (k^3/4 >= hosts)."""
    k = 2
    while k**3 // 4 < hosts:
        k += 2
    return k


def _add_scaleup(
    g: nx.Graph,
    pods: int,
    gpus_per_pod: int,
    gpus_per_server: int,
    gpus_per_nic: int,
    rails: int,
    switches_per_pod: int,
    link_rate: float,
    link_latency: float,
    cable_m: float,
) -> None:
    total = pods * gpus_per_pod
    g.add_nodes_from(
        (
            f"gpu{gid}",
            {
                "role": "gpu",
                "gpu": gid,
                "server": gid // gpus_per_server,
                "pod": gid // gpus_per_pod,
                "local": gid % gpus_per_server,
                "nic": (gid // gpus_per_server) * rails + (gid % gpus_per_server) // gpus_per_nic,
            },
        )
        for gid in range(total)
    )
    g.add_nodes_from(
        (f"su{p}.{i}", switch_attrs("scaleup", -1, -1, p))
        for p in range(pods)
        for i in range(switches_per_pod)
    )
    edge = {
        "rate_bps": link_rate,
        "length_m": cable_m,
        "phy": "scaleup",
        "kind": "scaleup",
        "tier": "gpu-scaleup",
        "latency_s": link_latency,
    }
    g.add_edges_from(
        (f"gpu{gid}", f"su{gid // gpus_per_pod}.{i}", edge)
        for gid in range(total)
        for i in range(switches_per_pod)
    )


@TOPOLOGIES.register("superpod", "pods of scale-up domains joined by a multi-plane scale-out")
def superpod(
    pods: int = 2,
    gpus_per_pod: int = 64,
    gpus_per_server: int = 8,
    *,
    gpus_per_nic: int = 1,
    planes: int = 1,
    scaleup_rate: str | float = "160GB/s",
    scaleup_latency: str | float = DEFAULT_SCALEUP_LATENCY,
    scaleup_switches: int = 1,
    scaleup_cable: str | float = DEFAULT_SCALEUP_CABLE,
    scaleout: str = "rail",
    servers_per_group: int | None = None,
    spines: int | None = None,
    oversubscription: float | None = None,
    k: int | None = None,
    nic_phy: str = "400GbE",
    fabric_phy: str = "400GbE",
    nic_cable: str | float = DEFAULT_NIC_CABLE,
    leaf_spine_cable: str | float = DEFAULT_LEAF_SPINE_CABLE,
    spine_core_cable: str | float = DEFAULT_SPINE_CORE_CABLE,
    name: str | None = None,
) -> nx.Graph:
    """``pods`` scale-up domains of ``gpus_per_pod`` GPUs (8, 64, 128, 384, ...: any multiple of
    ``gpus_per_server``) joined by a scale-out fabric.

    Scale-up: ``scaleup_rate`` is one GPU's scale-up bandwidth per direction (default 160 GB/s,
    the NVLink figure DeepSeek-V3 quotes, docs/physics.md [S]); it is spread evenly over the pod's
    ``scaleup_switches`` switches (each GPU-switch link runs at scaleup_rate/scaleup_switches).
    ``scaleup_latency`` is the GPU-to-GPU one-way latency through the scale-up fabric [E]; each
    of the two links on that path carries half of it as ``latency_s``.

    Scale-out: one NIC card per ``gpus_per_nic`` GPUs (1 or 2, a NIC per GPU or per GPU pair),
    one port per plane (``planes``) at rate(``nic_phy``). ``scaleout="rail"``: rail-optimised
    two-tier fabric (``servers_per_group``, ``spines`` or ``oversubscription`` as in the ``rail``
    builder; default ``servers_per_group``: whole pods, as many as fit in 64 servers, so rail
    groups never cut a pod); ``scaleout="fat-tree"``: a k-ary fat-tree per plane (``k``
    default: the smallest even k that holds every NIC). Servers are numbered globally (server
    s is in pod s // (gpus_per_pod/gpus_per_server)). Cables: 2 m NIC-leaf, 30 m leaf-spine, 500 m
    spine-core (brief); scale-up 1 m [E].
    """
    pods = int_param(pods, "pods")
    gpp = int_param(gpus_per_pod, "gpus_per_pod")
    gps = int_param(gpus_per_server, "gpus_per_server")
    gpn = int_param(gpus_per_nic, "gpus_per_nic")
    planes = int_param(planes, "planes")
    n_su = int_param(scaleup_switches, "scaleup_switches")
    if gpp % gps:
        raise TopologyError(
            f"gpus_per_pod={gpp} must be a multiple of gpus_per_server={gps} (pods hold whole "
            f"servers)"
        )
    if scaleout not in SCALEOUT_KINDS:
        raise TopologyError(f"scaleout={scaleout!r}; expected one of {SCALEOUT_KINDS}")
    su_rate = _rate(scaleup_rate, "scaleup_rate")
    su_lat = _time(scaleup_latency, "scaleup_latency")
    su_m = length_param(scaleup_cable, "scaleup_cable")
    nic_m = length_param(nic_cable, "nic_cable")
    ls_m = length_param(leaf_spine_cable, "leaf_spine_cable")
    sc_m = length_param(spine_core_cable, "spine_core_cable")
    servers = pods * gpp // gps
    params: dict[str, Any] = dict(
        pods=pods,
        gpus_per_pod=gpp,
        gpus_per_server=gps,
        gpus_per_nic=gpn,
        planes=planes,
        scaleup_rate_bps=su_rate,
        scaleup_latency_s=su_lat,
        scaleup_switches=n_su,
        scaleup_cable_m=su_m,
        scaleout=scaleout,
        nic_phy=nic_phy,
        fabric_phy=fabric_phy,
        nic_cable_m=nic_m,
        leaf_spine_cable_m=ls_m,
    )
    if scaleout == "rail":
        if k is not None:
            raise TopologyError("k applies to scaleout='fat-tree', not 'rail'")
        if servers_per_group is None:
            # whole pods per rail group, as many as fit 64 servers (half of a 128-port leaf)
            spp = gpp // gps
            servers_per_group = max(spp, min(servers, 64) // spp * spp)
        rails, spg, n_spines, ratio = resolve_rail(
            servers, gps, gpn, servers_per_group, spines, oversubscription, nic_phy, fabric_phy
        )
        params.update(servers_per_group=spg, spines=n_spines, oversubscription=ratio)
    else:
        for key, val in (
            ("servers_per_group", servers_per_group),
            ("spines", spines),
            ("oversubscription", oversubscription),
        ):
            if val is not None:
                raise TopologyError(f"{key} applies to scaleout='rail'; a fat-tree is 1:1")
        rails = rails_per_server(gps, gpn)
        mac_rate(nic_phy), mac_rate(fabric_phy)  # fail early on an unknown PHY
        n_cards = servers * rails
        k_ft = smallest_fat_tree_k(n_cards) if k is None else int_param(k, "k", 2)
        if k_ft % 2:
            raise TopologyError(f"k={k_ft} must be even")
        params.update(k=k_ft, spine_core_cable_m=sc_m)
    g = new_graph(name or f"superpod-{pods}x{gpp}", "superpod", params)
    cards = rail_cards(servers, gps, gpn, [s * gps // gpp for s in range(servers)])
    _add_scaleup(g, pods, gpp, gps, gpn, rails, n_su, su_rate / n_su, su_lat / 2, su_m)
    ports = add_nic_ports(g, cards, planes)
    if scaleout == "rail":
        attach_rail(g, ports, cards, rails, spg, n_spines, nic_phy, fabric_phy, nic_m, ls_m)
    else:
        attach_fat_tree(g, ports, k_ft, nic_phy, fabric_phy, nic_m, ls_m, sc_m)
    set_radix(g)
    return g


@TOPOLOGIES.register(
    "h800-deepep", "preset: 8x H800 nodes, 400G NIC per GPU, NVLink 160 GB/s, rail-optimised"
)
@passes_to("superpod")
def h800_deepep(
    nodes: int = 4,
    *,
    scaleup_rate: str | float = "160GB/s",
    scaleup_latency: str | float = DEFAULT_SCALEUP_LATENCY,
    scaleout: str = "rail",
    name: str | None = None,
    **overrides: Any,
) -> nx.Graph:
    """The DeepEP paper setup (docs/physics.md, "DeepSeek-V3 internode dispatch"): nodes of 8 H800
    GPUs, each node one NVLink scale-up domain (pod = node) at 160 GB/s per GPU [S], one 400G NIC
    per GPU [S] (the paper uses 400 Gb/s InfiniBand; modelled here as 400GbE RoCE), rail-optimised
    single-plane 1:1 scale-out, so GPU i of every node shares rail i. ``nodes`` = 2/4/8 gives
    EP16/32/64. The HGX board's four NVSwitch chips are one logical scale-up switch here
    (``scaleup_switches`` overrides); NVLink latency is an estimate [E]. Other ``superpod``
    parameters pass through ``overrides``.
    """
    args = _h800_deepep_args(nodes, scaleup_rate=scaleup_rate, scaleup_latency=scaleup_latency,
                             scaleout=scaleout, name=name, **overrides)  # fmt: skip
    return _preset(superpod(**args), "h800-deepep", {"nodes": args["pods"]})


def _h800_deepep_args(nodes: int, *, scaleup_rate: Any, scaleup_latency: Any, scaleout: str,
                      name: str | None, **overrides: Any) -> dict[str, Any]:  # fmt: skip
    """The :func:`superpod` arguments of :func:`h800_deepep` (its builder and its size)."""
    nodes = int_param(nodes, "nodes")
    kw: dict[str, Any] = {
        "gpus_per_nic": 1,
        "planes": 1,
        "scaleup_switches": 1,
        "nic_phy": "400GbE",
        "fabric_phy": "400GbE",
    }
    kw.update(overrides)
    return dict(pods=nodes, gpus_per_pod=8, gpus_per_server=8, scaleup_rate=scaleup_rate,
                scaleup_latency=scaleup_latency, scaleout=scaleout,
                name=name or f"h800-deepep-{nodes}n", **kw)  # fmt: skip


def _pod_preset(
    preset: str,
    pods: int,
    gpus_per_pod: int,
    name: str | None,
    overrides: dict[str, Any],
    *,
    nic_phy: str,
    **kw: Any,
) -> nx.Graph:
    """``superpod`` of ``pods`` pods of ``gpus_per_pod`` accelerators in 8-accelerator servers,
    recorded as preset ``preset``. The fabric PHY defaults to the NIC's and the scale-up latency
    to :data:`DEFAULT_SCALEUP_LATENCY`; ``overrides`` may replace either or pass any other
    ``superpod`` parameter."""
    args = _pod_preset_args(preset, pods, gpus_per_pod, name, overrides, nic_phy=nic_phy, **kw)
    return _preset(superpod(**args), preset, {"pods": args["pods"]})


def _pod_preset_args(
    preset: str,
    pods: int,
    gpus_per_pod: int,
    name: str | None,
    overrides: dict[str, Any],
    *,
    nic_phy: str,
    **kw: Any,
) -> dict[str, Any]:
    """The :func:`superpod` arguments of a pod preset (its builder and its size)."""
    pods = int_param(pods, "pods")
    extra: dict[str, Any] = {"fabric_phy": nic_phy, "scaleup_latency": DEFAULT_SCALEUP_LATENCY}
    extra.update(overrides)
    return dict(pods=pods, gpus_per_pod=gpus_per_pod, gpus_per_server=8, nic_phy=nic_phy,
                name=name or f"{preset}-{pods}p", **kw, **extra)  # fmt: skip


@TOPOLOGIES.register(
    "superpod-128", "preset: 128-accelerator pods, on-card-switch 400G SmartNIC per GPU pair"
)
@passes_to("superpod")
def superpod_128(
    pods: int = 2,
    *,
    gpus_per_nic: int = 2,
    planes: int = 2,
    nic_phy: str = "200GbE",
    scaleup_rate: str | float = "400GB/s",
    scaleup_switches: int = 8,
    scaleout: str = "rail",
    name: str | None = None,
    **overrides: Any,
) -> nx.Graph:
    """A 128-accelerator SuperPoD in the brief's mould: each pod is one scale-up domain of 128
    accelerators in 16 trays of 8 [E]; the scale-out NIC is the brief's 400G PAM4 SmartNIC with
    an on-card PCIe switch (docs/physics.md, T-Head Panmai 920 [S]). Its host side is Gen5 x32, so
    by default two x16 accelerators share one NIC (``gpus_per_nic=2``; 1 gives a NIC per GPU) [E].
    The 400G port is split into two 200GbE planes (``planes=2``, ``nic_phy="200GbE"``) [E];
    ``planes=1, nic_phy="400GbE"`` gives one plane. Scale-up bandwidth 400 GB/s per accelerator
    over 8 switches and its latency are estimates [E] (no public figure in docs/physics.md).
    Rail-optimised 1:1 scale-out by default. Other ``superpod`` parameters pass through
    ``overrides``.
    """
    return _pod_preset(
        "superpod-128",
        pods,
        128,
        name,
        overrides,
        gpus_per_nic=gpus_per_nic,
        planes=planes,
        nic_phy=nic_phy,
        scaleup_rate=scaleup_rate,
        scaleup_switches=scaleup_switches,
        scaleout=scaleout,
    )


@TOPOLOGIES.register(
    "superpod-384", "preset: 384-accelerator pods (48 servers x 8), 400G NIC per accelerator"
)
@passes_to("superpod")
def superpod_384(
    pods: int = 2,
    *,
    gpus_per_nic: int = 1,
    planes: int = 1,
    nic_phy: str = "400GbE",
    scaleup_rate: str | float = "392GB/s",
    scaleup_switches: int = 7,
    scaleout: str = "rail",
    name: str | None = None,
    **overrides: Any,
) -> nx.Graph:
    """A 384-accelerator pod modelled on public descriptions of Huawei's CloudMatrix384 (48
    servers of 8 NPUs in one unified-bus scale-up domain): 392 GB/s scale-up per accelerator
    over 7 switch planes [E, public description, not in docs/physics.md], one 400G scale-out NIC per
    accelerator (docs/physics.md 400GbE), rail-optimised 1:1 scale-out joining ``pods`` pods.
    Scale-up latency is an estimate [E]. Other ``superpod`` parameters pass through ``overrides``.
    """
    return _pod_preset(
        "superpod-384",
        pods,
        384,
        name,
        overrides,
        gpus_per_nic=gpus_per_nic,
        planes=planes,
        nic_phy=nic_phy,
        scaleup_rate=scaleup_rate,
        scaleup_switches=scaleup_switches,
        scaleout=scaleout,
    )


# --------------------------------------------------------------------------------------------
# closed-form sizes (podsim.fabric.topology.topology_size): the arguments of the builders above


@sizer("superpod")
def superpod_size(
    pods: int,
    gpus_per_pod: int,
    gpus_per_server: int,
    *,
    gpus_per_nic: int,
    planes: int,
    scaleup_switches: int,
    scaleout: str,
    servers_per_group: int | None,
    spines: int | None,
    oversubscription: float | None,
    k: int | None,
    nic_phy: str,
    fabric_phy: str,
    **_: Any,
) -> TopologySize:
    """What :func:`superpod` builds: ``pods*gpus_per_pod`` GPU nodes, each linked to the pod's
    ``scaleup_switches`` switches, plus the rail or fat-tree scale-out of its NIC cards."""
    pods = int_param(pods, "pods")
    gpp = int_param(gpus_per_pod, "gpus_per_pod")
    gps = int_param(gpus_per_server, "gpus_per_server")
    planes = int_param(planes, "planes")
    n_su = int_param(scaleup_switches, "scaleup_switches")
    if gpp % gps or scaleout not in SCALEOUT_KINDS:
        raise TopologyError("not a superpod")  # the builder says why
    gpus = pods * gpp
    servers = gpus // gps
    su_nodes, su_edges = gpus + pods * n_su, gpus * n_su
    if scaleout == "rail":
        if servers_per_group is None:
            spp = gpp // gps
            servers_per_group = max(spp, min(servers, 64) // spp * spp)
        rails, spg, n_spines, _ratio = resolve_rail(
            servers, gps, gpus_per_nic, servers_per_group, spines, oversubscription, nic_phy,
            fabric_phy,
        )  # fmt: skip
        return rail_size(servers, rails, spg, n_spines, planes, su_nodes, su_edges)
    cards = servers * rails_per_server(gps, gpus_per_nic)
    k_ft = smallest_fat_tree_k(cards) if k is None else int_param(k, "k", 2)
    return fat_tree_size(cards, k_ft, planes, su_nodes, su_edges)


@sizer("h800-deepep")
def _h800_deepep_size(**args: Any) -> TopologySize:
    return superpod_size(**builder_arguments("superpod", _h800_deepep_args(**args)))


def _pod_preset_size(preset: str, gpus_per_pod: int) -> Any:
    def size(pods: int, *, name: Any, nic_phy: str, **rest: Any) -> TopologySize:
        # named parameters and overrides alike become superpod arguments, as in the builder
        args = _pod_preset_args(preset, pods, gpus_per_pod, name, rest, nic_phy=nic_phy)
        return superpod_size(**builder_arguments("superpod", args))

    return size


sizer("superpod-128")(_pod_preset_size("superpod-128", 128))
sizer("superpod-384")(_pod_preset_size("superpod-384", 384))
