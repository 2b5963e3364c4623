"""SuperPoD clusters: per-pod scale-up domains joined by a multi-plane scale-out RDMA fabric.

A pod is one scale-up domain (NVLink/UB/UALink-style): every GPU has a scale-up port (node
``gpu{g}``) linked to each of the pod's ``scaleup_switches`` switches (``su{pod}.{i}``), the
GPU's scale-up bandwidth spread evenly over them, as NVLink links are spread over NVSwitch chips.
Pods are cut into servers (trays) of ``gpus_per_server`` GPUs; each server has
``gpus_per_server / gpus_per_nic`` NIC cards on the scale-out fabric (rail-optimised or
fat-tree, one port per plane), built by the attachers of :mod:`podsim.fabric.topology`.

The generic builder ``superpod`` and the named presets register in
:data:`podsim.fabric.topology.TOPOLOGIES` (one registry: a preset is a builder with defaults; its
description starts with ``preset:``). The presets are data, rows of
:data:`podsim.fabric.superpod_presets.SUPERPOD_PRESETS` (each figure with its source, repeated in
docs/physics.md "SuperPoD presets"), registered by the one generic :func:`register_presets`:
every figure is a keyword argument a scenario overrides. [E] marks an estimate with no public
source at hand.
"""

from __future__ import annotations

import inspect
from typing import Any

import networkx as nx
from podsim.fabric.superpod_presets import SUPERPOD_PRESETS, PresetSpec
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
    "build_preset",
    "preset_arguments",
    "register_presets",
    "superpod",
]

SCALEOUT_KINDS = ("rail", "fat-tree")

# [E] GPU-to-GPU one-way latency through one scale-up switch; no figure in docs/physics.md.
DEFAULT_SCALEUP_LATENCY = "500ns"
DEFAULT_SCALEUP_CABLE = "1m"  # [E] copper inside the rack


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


# --------------------------------------------------------------------------------------------
# the presets: rows of podsim.fabric.superpod_presets.SUPERPOD_PRESETS, one generic builder


def preset_arguments(preset: str, params: dict[str, Any]) -> dict[str, Any]:
    """The :func:`superpod` arguments of table preset ``preset`` called with ``params`` (its
    size key, any of its figures, ``name``, any other ``superpod`` parameter): the table's
    figures, overridden by ``params``; ``fabric_phy`` defaults to ``nic_phy``."""
    spec = SUPERPOD_PRESETS[preset]
    params = dict(params)
    size = int_param(params.pop(spec.size_key, spec.size.value), spec.size_key)
    if spec.size_key != "pods" and "pods" in params:
        raise TopologyError(f"preset {preset!r} is sized by {spec.size_key}, not pods")
    name = params.pop("name", None)
    args: dict[str, Any] = {key: fig.value for key, fig in spec.figures.items()}
    args.update(params)
    args.setdefault("fabric_phy", args.get("nic_phy", "400GbE"))
    args["pods"] = size
    args["name"] = name or spec.name_format.format(preset=preset, size=size)
    return args


def build_preset(preset: str, params: dict[str, Any]) -> nx.Graph:
    """Build table preset ``preset`` (:func:`preset_arguments`); the graph records the preset
    as its ``builder``, its size under the preset's size key, and the preset's accelerator."""
    spec = SUPERPOD_PRESETS[preset]
    args = preset_arguments(preset, params)
    g = superpod(**args)
    g.graph["builder"] = preset
    g.graph["params"] = {spec.size_key: args["pods"], **g.graph["params"]}
    g.graph["accelerator"] = spec.accelerator.value
    return g


def _preset_signature(spec: PresetSpec) -> inspect.Signature:
    """Size key (positional or keyword), every figure (keyword, default from the table),
    ``name`` and ``**overrides`` (other :func:`superpod` parameters)."""
    kw = inspect.Parameter.KEYWORD_ONLY
    return inspect.Signature(
        [
            inspect.Parameter(
                spec.size_key, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=spec.size.value
            ),
            *(inspect.Parameter(k, kw, default=f.value) for k, f in spec.figures.items()),
            inspect.Parameter("name", kw, default=None),
            inspect.Parameter("overrides", inspect.Parameter.VAR_KEYWORD),
        ]
    )


def _preset_doc(preset: str, spec: PresetSpec) -> str:
    rows = "\n".join(f"    {k} = {f.value!r}: {f.source}" for k, f in spec.figures.items())
    return (
        f"{spec.about}\n\nFigures (podsim.fabric.superpod_presets, docs/physics.md "
        f"'SuperPoD presets'); each is a keyword argument, a scenario overrides it in "
        f"cluster.params; other superpod parameters pass through:\n"
        f"    {spec.size_key} = {spec.size.value!r}: {spec.size.source}\n{rows}\n"
        f"    accelerator = {spec.accelerator.value!r}: {spec.accelerator.source} "
        f"(cost.accelerator overrides)"
    )


def _preset_builder(preset: str, spec: PresetSpec) -> Any:
    """The registry entry of table row ``preset``: a builder with the row's signature."""
    sig = _preset_signature(spec)

    def build(*args: Any, **kwargs: Any) -> nx.Graph:
        bound = sig.bind(*args, **kwargs)
        params = dict(bound.arguments)
        params.update(params.pop("overrides", {}))
        return build_preset(preset, params)

    build.__signature__ = sig  # type: ignore[attr-defined]
    build.__name__ = build.__qualname__ = "preset_" + preset.replace("-", "_")
    build.__doc__ = _preset_doc(preset, spec)
    return passes_to("superpod")(build)


def _preset_sizer(preset: str) -> Any:
    def size(**args: Any) -> TopologySize:
        return superpod_size(**builder_arguments("superpod", preset_arguments(preset, args)))

    return size


def register_presets(table: dict[str, PresetSpec]) -> None:
    """Register every row of ``table`` in :data:`TOPOLOGIES` (a builder taking the row's
    figures as keyword arguments, marked as passing the rest to ``superpod``) with its
    closed-form size function: the one generic path from preset data to the registry."""
    for preset, spec in table.items():
        TOPOLOGIES.add(preset, _preset_builder(preset, spec), spec.description)
        sizer(preset)(_preset_sizer(preset))


#: the accelerator class of each preset (graph attribute ``accelerator``; the cost model prices
#: the scenarios/cost/catalog.yaml gpu item of that ``accelerator`` name; ``cost.accelerator``
#: overrides), from the table with its source
PRESET_ACCELERATORS: dict[str, str] = {
    name: spec.accelerator.value for name, spec in SUPERPOD_PRESETS.items()
}


register_presets(SUPERPOD_PRESETS)
