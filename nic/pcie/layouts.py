"""Node layouts: the PCIe tree of one server as named presets (``NODE_LAYOUTS``) or YAML.

Three presets (issue 5), each a builder returning a :class:`~podsim.nic.pcie.tree.PcieTree`:

- ``external-switch``: GPUs and NICs under separate PCIe switch boards, the HGX H100 pattern of
  two GPUs and their NICs per Gen5 switch [E]; each switch has a Gen5 x16 uplink to the CPU.
- ``on-card-switch``: the NIC card carries the PCIe switch (the brief's T-Head Panmai 920,
  docs/physics.md [S]); the GPUs a NIC serves and the node's NVMe SSDs attach to the NIC card's
  switch, the host attaches upstream over Gen5 x32 [S]. The NIC ASIC sits on the card switch
  over an internal x16 port (enough for 400G: 57.6 GB/s vs 50 GB/s) [E].
- ``root-complex``: no switch; every device on a CPU root port, so GPU-NIC traffic crosses the
  CPU (nvidia-smi PHB, or SYS across sockets): the slow path.

Each preset is a :class:`NodeLayout`: the dataclass that declares its parameters with
:func:`podsim.fabric.params.param` (:class:`LayoutParams` and the preset's own class; the
scenario's ``cluster.layout_params`` section and ``podsim docs`` are generated from it) and the
function that builds the tree. Common parameters: ``gpus`` per node, ``nics`` per node
(default one per GPU) or
``gpus_per_nic``, ``ssds``, ``sockets``, link widths (``gpu_lanes``, ``nic_lanes``,
``ssd_lanes``, ``uplink_lanes``), ``link`` (overrides for every PCIe link: ``gen``, ``mps``,
``header_bytes``, ``completion_header_bytes``, ``ecrc``, ``dllp_overhead``, ``latency_s``), and
device specs ``switch``, ``root``, ``inter_socket``, ``ssd`` and ``nic_dma`` (every NIC's DMA
reads: ``max_read_request_bytes``, ``read_tags``, ``completion_bytes``, ``read_latency_s``)
(mappings of :mod:`nic.pcie.devices` fields; strings such as ``"115ns"``, ``"32GB/s"`` or
``"4KiB"`` are parsed). With ``nics > gpus`` each GPU has ``nics/gpus`` NICs
(the 1:2 case). Devices are named ``gpu{i}``, ``nic{i}``, ``ssd{i}``, ``sw{i}``, ``root{s}``.

:func:`build_layout` accepts a preset name, ``{"preset": name, **params}`` or an explicit tree
(``{"devices": ..., "links": ...}``, see :meth:`PcieTree.from_dict`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

import networkx as nx
from podsim.fabric.params import param, section
from podsim.fabric.registry import Registry
from podsim.nic.pcie.devices import InterSocket, NicDma, PcieSwitch, RootComplex, Ssd
from podsim.nic.pcie.link import LANE_WIDTHS, PcieLink
from podsim.nic.pcie.tree import PcieTree

__all__ = [
    "NODE_LAYOUTS",
    "ExternalSwitchParams",
    "LayoutParams",
    "NodeLayout",
    "OnCardSwitchParams",
    "RootComplexParams",
    "SwitchLayoutParams",
    "build_layout",
    "external_switch",
    "on_card_switch",
    "root_complex",
]

NODE_LAYOUTS: Registry[NodeLayout] = Registry("node layout")


def _count(value: Any, name: str, minimum: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return value


def _gpu_nic_map(
    gpus: int, nics: int | None, gpus_per_nic: int | None
) -> tuple[int, list[list[int]]]:
    """NIC count and, per NIC, the GPU indices it serves."""
    _count(gpus, "gpus", 1)
    if gpus_per_nic is not None:
        _count(gpus_per_nic, "gpus_per_nic", 1)
        if gpus % gpus_per_nic:
            raise ValueError(f"gpus ({gpus}) must be a multiple of gpus_per_nic ({gpus_per_nic})")
        derived = gpus // gpus_per_nic
        if nics is not None and nics != derived:
            raise ValueError(
                f"nics={nics} contradicts gpus={gpus} / gpus_per_nic={gpus_per_nic} = {derived}; "
                "give one of nics or gpus_per_nic"
            )
        nics = derived
    nics = gpus if nics is None else _count(nics, "nics", 1)
    if gpus >= nics:
        if gpus % nics:
            raise ValueError(f"gpus ({gpus}) must be a multiple of nics ({nics}), or nics of gpus")
        k = gpus // nics
        return nics, [list(range(n * k, (n + 1) * k)) for n in range(nics)]
    if nics % gpus:
        raise ValueError(f"nics ({nics}) must be a multiple of gpus ({gpus}), or gpus of nics")
    k = nics // gpus
    return nics, [[n // k] for n in range(nics)]


def _lanes(value: Any, name: str) -> None:
    if isinstance(value, bool) or value not in LANE_WIDTHS:
        raise ValueError(f"{name}: PCIe lanes {value!r} invalid; expected one of {LANE_WIDTHS}")


def _spec(value: Any, cls: Any) -> Any:
    """A device spec from a mapping of its keys (the spec's ``from_dict``), or the spec."""
    return value if isinstance(value, cls) else cls.from_dict(value)


_DEVICES = "podsim.nic.pcie.devices"
_COUNT_SOURCE = "the topology sets it in a scenario (give it only to check)"


@dataclass(frozen=True)
class LayoutParams:
    """The parameters every node layout takes (each layout's own class adds its own).

    Device specs (``link``, ``root``, ``inter_socket``, ``ssd``, ``nic_dma``, a switch layout's
    ``switch``) may be given as mappings of their keys (``{"read_tags": 64}``, quantities as
    strings such as ``"115ns"``); they are stored as the device configs of
    :mod:`podsim.nic.pcie.devices` / :mod:`podsim.nic.pcie.link`."""

    gpus: int = param(
        8,
        key="gpus",
        kind="count",
        minimum=1,
        doc="GPUs per server",
        source="[S] 8 per HGX/DGX-class server; " + _COUNT_SOURCE,
    )
    nics: int | None = param(
        None,
        key="nics",
        kind="count",
        minimum=1,
        optional=True,
        doc="NIC cards per server (null: one per GPU, or gpus / gpus_per_nic); more NICs than "
        "GPUs gives each GPU nics/gpus NICs",
        source=_COUNT_SOURCE,
    )
    gpus_per_nic: int | None = param(
        None,
        key="gpus_per_nic",
        kind="count",
        minimum=1,
        optional=True,
        doc="GPUs each NIC card serves (instead of nics)",
        source=_COUNT_SOURCE,
    )
    ssds: int = param(
        0,
        key="ssds",
        kind="count",
        minimum=0,
        doc="NVMe SSDs per server (GPUDirect Storage reads, workload.storage), spread evenly "
        "over the switches (or root ports)",
        source="the scenario",
    )
    sockets: int = param(
        1,
        key="sockets",
        kind="count",
        minimum=1,
        doc="CPU sockets per server; devices spread over them in index order",
        source="the scenario",
    )
    gpu_lanes: int = param(
        16, key="gpu_lanes", kind="count",
        doc="width of each GPU's PCIe link (1, 2, 4, 8, 16 or 32 lanes)",
        source="[S] GPUs have Gen5 x16 host interfaces (H100/H800)",
    )  # fmt: skip
    nic_lanes: int = param(
        16, key="nic_lanes", kind="count", doc="width of each NIC ASIC's PCIe link (1..32 lanes)",
        source="[S] 400G NICs are Gen5 x16 (ConnectX-7); on the on-card switch an internal "
        "port [E]",
    )  # fmt: skip
    ssd_lanes: int = param(
        4, key="ssd_lanes", kind="count", doc="width of each SSD's PCIe link (1..32 lanes)",
        source="[S] Gen5 NVMe SSDs are x4 (Micron 9550)",
    )  # fmt: skip
    link: PcieLink = section(
        PcieLink,
        "link",
        "overrides for every PCIe link of the node (widths: the *_lanes keys)",
        "podsim.nic.pcie.link",
    )
    root: RootComplex = section(
        RootComplex,
        "root",
        "the CPU root complex of each socket (peer-to-peer across it)",
        _DEVICES,
    )
    inter_socket: InterSocket = section(
        InterSocket,
        "inter_socket",
        "the link between two CPU sockets",
        _DEVICES,
    )
    ssd: Ssd = section(Ssd, "ssd", "every NVMe SSD", _DEVICES)
    nic_dma: NicDma = section(
        NicDma,
        "nic_dma",
        "every NIC's DMA reads of GPU memory (GPUDirect RDMA transmit as PCIe Memory Read "
        "requests and completions)",
        _DEVICES + "; docs/physics.md 'PCIe reads'",
    )

    def __post_init__(self) -> None:
        _count(self.gpus, "gpus", 1)
        if self.nics is not None:
            _count(self.nics, "nics", 1)
        if self.gpus_per_nic is not None:
            _count(self.gpus_per_nic, "gpus_per_nic", 1)
        _count(self.ssds, "ssds")
        _count(self.sockets, "sockets", 1)
        for f in fields(self):
            if f.name.endswith("_lanes"):
                _lanes(getattr(self, f.name), f.name)
        if isinstance(self.link, Mapping) and "lanes" in self.link:
            raise ValueError(
                "set link widths with gpu_lanes/nic_lanes/ssd_lanes/uplink_lanes, not link.lanes"
            )
        for f in fields(self):
            meta = f.metadata["param"]
            if meta["section"] is not None:
                object.__setattr__(self, f.name, _spec(getattr(self, f.name), meta["section"]))


@dataclass(frozen=True)
class SwitchLayoutParams(LayoutParams):
    """The parameters of a layout with PCIe switches (beyond :class:`LayoutParams`)."""

    switch: PcieSwitch = section(PcieSwitch, "switch", "every PCIe switch of the layout", _DEVICES)


@dataclass(frozen=True)
class ExternalSwitchParams(SwitchLayoutParams):
    """Parameters of ``external-switch`` (beyond :class:`SwitchLayoutParams`)."""

    switches: int | None = param(
        None,
        key="switches",
        kind="count",
        minimum=1,
        optional=True,
        doc="PCIe switch boards per server; null: one per two GPUs, never more than the "
        "(GPU, NIC) groups",
        source="[E] the HGX H100 baseboard pattern of two GPUs and their NICs per switch",
    )
    uplink_lanes: int = param(
        16, key="uplink_lanes", kind="count", doc="width of each switch's uplink to the CPU",
        source="[E] a Gen5 x16 uplink per switch (HGX-style)",
    )  # fmt: skip


@dataclass(frozen=True)
class OnCardSwitchParams(SwitchLayoutParams):
    """Parameters of ``on-card-switch`` (beyond :class:`SwitchLayoutParams`)."""

    uplink_lanes: int = param(
        32, key="uplink_lanes", kind="count",
        doc="width of each NIC card's host side (its switch's uplink to the CPU)",
        source="[S] the design's SmartNIC: Gen5 x32 host interface (docs/physics.md)",
    )  # fmt: skip


@dataclass(frozen=True)
class RootComplexParams(LayoutParams):
    """Parameters of ``root-complex``: the common ones (:class:`LayoutParams`)."""


class NodeLayout:
    """A registered node layout: the dataclass that declares its parameters (the scenario's
    ``cluster.layout_params`` section is generated from it, podsim.scenarios.input.schema) and
    the function that builds the tree from them. Calling it builds the tree from keyword
    parameters (mappings or device configs for the specs; ``gpus`` and ``nics`` may be given
    positionally)."""

    def __init__(self, params: type[LayoutParams], build: Callable[[Any], PcieTree]) -> None:
        self.params = params
        self.build = build
        self.__doc__ = build.__doc__

    @property
    def parameters(self) -> list[str]:
        """The keyword parameters, in declaration order."""
        return [f.name for f in fields(self.params)]

    def __call__(self, *args: Any, **kw: Any) -> PcieTree:
        if len(args) > 2:
            raise TypeError(f"a node layout takes at most gpus and nics positionally, got {args}")
        kw.update(zip(("gpus", "nics"), args, strict=False))
        unknown = [k for k in kw if k not in self.parameters]
        if unknown:
            raise TypeError(f"unexpected keyword argument {unknown[0]!r}")
        return self.build(self.params(**kw))


class _Builder:
    """Shared plumbing: roots per socket, devices, links."""

    def __init__(self, name: str, p: LayoutParams, switch: PcieSwitch | None = None) -> None:
        self.p = p
        self.sockets = p.sockets
        self.link_kw = p.link.to_dict()
        self.switch = switch
        self.nic_dma = p.nic_dma
        self.ssd = p.ssd
        self.g = nx.Graph(name=name, builder=name, params=p)
        for s in range(self.sockets):
            self.g.add_node(f"root{s}", role="root", socket=s, index=s, spec=p.root)
            if s:
                self.g.add_edge(f"root{s - 1}", f"root{s}", inter_socket=p.inter_socket)

    def socket_of(self, i: int, n: int) -> int:
        return i * self.sockets // n

    def pcie(self, a: str, b: str, lanes: int, what: str) -> None:
        try:
            spec = PcieLink(**{**self.link_kw, "lanes": lanes})
        except ValueError as exc:
            raise ValueError(f"{what}: {exc}") from None
        self.g.add_edge(a, b, link=spec)

    def device(self, name: str, role: str, index: int, socket: int, **attrs: Any) -> None:
        self.g.add_node(name, role=role, index=index, socket=socket, **attrs)

    def add_gpus_nics(
        self, gpus: int, serves: list[list[int]], sockets_of: Callable[[str, int], int]
    ) -> None:
        for i in range(gpus):
            self.device(f"gpu{i}", "gpu", i, sockets_of("gpu", i))
        for n, gs in enumerate(serves):
            self.device(
                f"nic{n}",
                "nic",
                n,
                sockets_of("nic", n),
                serves=[f"gpu{i}" for i in gs],
                spec=self.nic_dma,
            )

    def add_ssds(
        self,
        ssds: int,
        lanes: int,
        socket_of: Callable[[int], int],
        parent_of: Callable[[int], str],
    ) -> None:
        """SSD ``i`` on socket ``socket_of(i)``, linked with ``lanes`` to ``parent_of(i)``."""
        for i in range(ssds):
            self.device(f"ssd{i}", "ssd", i, socket_of(i), spec=self.ssd)
        for i in range(ssds):
            self.pcie(parent_of(i), f"ssd{i}", lanes, "ssd_lanes")

    def add_ssds_on_switches(self, ssds: int, n_sw: int, lanes: int) -> None:
        """SSDs spread evenly over switches ``sw0..sw{n_sw-1}``, each on its switch's socket."""
        self.add_ssds(
            ssds,
            lanes,
            lambda i: self.socket_of(i * n_sw // ssds, n_sw),
            lambda i: f"sw{i * n_sw // ssds}",
        )

    def tree(self) -> PcieTree:
        return PcieTree(self.g)


def _external_switch(p: ExternalSwitchParams) -> PcieTree:
    """GPUs, NICs and SSDs under ``switches`` external PCIe switches, each with an x16 uplink.

    A GPU and the NICs that serve it always share a switch (path class PIX). By default there
    is one switch per two GPUs, as on the HGX H100 baseboard [E], but never more switches than
    (GPU, NIC) groups. SSDs spread evenly over the switches, switches over the sockets.
    """
    gpus = p.gpus
    n_nics, serves = _gpu_nic_map(gpus, p.nics, p.gpus_per_nic)
    groups = min(gpus, n_nics)  # unit that must stay under one switch: a GPU with its NIC(s)
    n_sw = max(1, min(groups, math.ceil(gpus / 2))) if p.switches is None else p.switches
    if n_sw > groups:
        raise ValueError(
            f"switches={n_sw} exceeds the {groups} GPU/NIC groups; a GPU and its NIC share a switch"
        )
    b = _Builder("external-switch", p, p.switch)
    gpus_per_group, nics_per_group = gpus // groups, n_nics // groups

    def sw_of(role: str, i: int) -> int:
        grp = i // (gpus_per_group if role == "gpu" else nics_per_group)
        return grp * n_sw // groups

    for s in range(n_sw):
        b.device(f"sw{s}", "switch", s, b.socket_of(s, n_sw), spec=p.switch)
        b.pcie(f"root{b.socket_of(s, n_sw)}", f"sw{s}", p.uplink_lanes, "uplink_lanes")

    def socket(role: str, i: int) -> int:
        return b.socket_of(sw_of(role, i), n_sw)

    b.add_gpus_nics(gpus, serves, socket)
    for i in range(gpus):
        b.pcie(f"sw{sw_of('gpu', i)}", f"gpu{i}", p.gpu_lanes, "gpu_lanes")
    for n in range(n_nics):
        b.pcie(f"sw{sw_of('nic', n)}", f"nic{n}", p.nic_lanes, "nic_lanes")
    b.add_ssds_on_switches(p.ssds, n_sw, p.ssd_lanes)
    return b.tree()


def _on_card_switch(p: OnCardSwitchParams) -> PcieTree:
    """One switch on every NIC card (the brief's SmartNIC): the card's NIC ASIC (internal
    ``nic_lanes`` port), the GPUs it serves and its share of the SSDs hang off the card switch;
    the card's host side is Gen5 x32 (``uplink_lanes``, docs/physics.md [S]). Needs whole GPUs per
    NIC (``gpus`` a multiple of ``nics``)."""
    gpus = p.gpus
    n_nics, serves = _gpu_nic_map(gpus, p.nics, p.gpus_per_nic)
    if n_nics > gpus:
        raise ValueError(
            f"on-card-switch attaches each GPU to one NIC card; nics ({n_nics}) > gpus ({gpus}) "
            "is not supported (use external-switch for several NICs per GPU)"
        )
    switch = replace(p.switch, on_card=True)
    b = _Builder("on-card-switch", p, switch)
    for n in range(n_nics):
        sock = b.socket_of(n, n_nics)
        b.device(f"sw{n}", "switch", n, sock, spec=switch)
        b.pcie(f"root{sock}", f"sw{n}", p.uplink_lanes, "uplink_lanes")
    per = gpus // n_nics
    b.add_gpus_nics(
        gpus, serves, lambda role, i: b.socket_of(i // per if role == "gpu" else i, n_nics)
    )
    for n in range(n_nics):
        b.pcie(f"sw{n}", f"nic{n}", p.nic_lanes, "nic_lanes")
    for i in range(gpus):
        b.pcie(f"sw{i // per}", f"gpu{i}", p.gpu_lanes, "gpu_lanes")
    b.add_ssds_on_switches(p.ssds, n_nics, p.ssd_lanes)
    return b.tree()


def _root_complex(p: RootComplexParams) -> PcieTree:
    """Every GPU, NIC and SSD on its own CPU root port; devices spread evenly over sockets in
    index order, so a GPU and its NIC share a socket when the counts divide evenly."""
    gpus = p.gpus
    n_nics, serves = _gpu_nic_map(gpus, p.nics, p.gpus_per_nic)
    b = _Builder("root-complex", p)
    counts = {"gpu": gpus, "nic": n_nics}
    b.add_gpus_nics(gpus, serves, lambda role, i: b.socket_of(i, counts[role]))
    for i in range(gpus):
        b.pcie(f"root{b.socket_of(i, gpus)}", f"gpu{i}", p.gpu_lanes, "gpu_lanes")
    for n in range(n_nics):
        b.pcie(f"root{b.socket_of(n, n_nics)}", f"nic{n}", p.nic_lanes, "nic_lanes")
    ssds = p.ssds
    b.add_ssds(
        ssds, p.ssd_lanes, lambda i: b.socket_of(i, ssds), lambda i: f"root{b.socket_of(i, ssds)}"
    )
    return b.tree()


external_switch = NODE_LAYOUTS.register(
    "external-switch", "GPUs and NICs under separate PCIe switch boards (HGX-style), x16 uplinks"
)(NodeLayout(ExternalSwitchParams, _external_switch))
on_card_switch = NODE_LAYOUTS.register(
    "on-card-switch", "the NIC card carries the PCIe switch; GPUs and SSDs attach to it, host x32"
)(NodeLayout(OnCardSwitchParams, _on_card_switch))
root_complex = NODE_LAYOUTS.register(
    "root-complex", "no PCIe switch: GPU-NIC traffic crosses the CPU root complex"
)(NodeLayout(RootComplexParams, _root_complex))


def build_layout(spec: str | Mapping[str, Any] | PcieTree) -> PcieTree:
    """A :class:`PcieTree` from a preset name, ``{"preset": name, **params}``, or an explicit
    ``{"devices": ..., "links": ...}`` mapping (YAML). A tree passes through."""
    if isinstance(spec, PcieTree):
        return spec
    if isinstance(spec, str):
        return NODE_LAYOUTS.get(spec)()
    if not isinstance(spec, Mapping):
        raise ValueError(
            f"a node layout is a preset name, {{preset: name, ...params}} or {{devices, links}}; "
            f"got {type(spec).__name__}"
        )
    if "preset" in spec:
        params = dict(spec)
        builder = NODE_LAYOUTS.get(params.pop("preset"))
        accepted = builder.parameters
        unknown = sorted(set(params) - set(accepted))
        if unknown:
            raise ValueError(
                f"unknown parameter(s) {unknown} for node layout {spec['preset']!r}; "
                f"accepted: {accepted}"
            )
        return builder(**params)
    return PcieTree.from_dict(spec)
