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

Common parameters: ``gpus`` per node, ``nics`` per node (default one per GPU) or
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

import inspect
import math
from collections.abc import Callable, Mapping
from typing import Any

import networkx as nx
from podsim.fabric.registry import Registry
from podsim.nic.pcie.devices import InterSocket, NicDma, PcieSwitch, RootComplex, Ssd
from podsim.nic.pcie.link import PcieLink
from podsim.nic.pcie.tree import PcieTree

__all__ = [
    "NODE_LAYOUTS",
    "build_layout",
    "external_switch",
    "on_card_switch",
    "root_complex",
]

NODE_LAYOUTS: Registry[Callable[..., PcieTree]] = Registry("node layout")


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


class _Builder:
    """Shared plumbing: specs from mappings, roots per socket, links."""

    def __init__(
        self,
        name: str,
        params: dict[str, Any],
        sockets: int,
        link: Mapping[str, Any] | None,
        switch: Mapping[str, Any] | None,
        root: Mapping[str, Any] | None,
        inter_socket: Mapping[str, Any] | None,
        ssd: Mapping[str, Any] | None,
        nic_dma: Mapping[str, Any] | None = None,
    ) -> None:
        self.sockets = _count(sockets, "sockets", 1)
        link = dict(link or {})
        if "lanes" in link:
            raise ValueError(
                "set link widths with gpu_lanes/nic_lanes/ssd_lanes/uplink_lanes, not link.lanes"
            )
        self.link_kw = PcieLink.from_dict(link).to_dict()
        self.switch = PcieSwitch.from_dict(switch or {})
        self.root = RootComplex.from_dict(root or {})
        self.inter_socket = InterSocket.from_dict(inter_socket or {})
        self.ssd = Ssd.from_dict(ssd or {})
        self.nic_dma = NicDma.from_dict(nic_dma or {})
        self.g = nx.Graph(name=name, builder=name, params=params)
        for s in range(self.sockets):
            self.g.add_node(f"root{s}", role="root", socket=s, index=s, spec=self.root)
            if s:
                self.g.add_edge(f"root{s - 1}", f"root{s}", inter_socket=self.inter_socket)

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


@NODE_LAYOUTS.register(
    "external-switch", "GPUs and NICs under separate PCIe switch boards (HGX-style), x16 uplinks"
)
def external_switch(
    gpus: int = 8,
    nics: int | None = None,
    *,
    gpus_per_nic: int | None = None,
    ssds: int = 0,
    switches: int | None = None,
    sockets: int = 1,
    gpu_lanes: int = 16,
    nic_lanes: int = 16,
    ssd_lanes: int = 4,
    uplink_lanes: int = 16,
    link: Mapping[str, Any] | None = None,
    switch: Mapping[str, Any] | None = None,
    root: Mapping[str, Any] | None = None,
    inter_socket: Mapping[str, Any] | None = None,
    ssd: Mapping[str, Any] | None = None,
    nic_dma: Mapping[str, Any] | None = None,
) -> PcieTree:
    """GPUs, NICs and SSDs under ``switches`` external PCIe switches, each with an x16 uplink.

    A GPU and the NICs that serve it always share a switch (path class PIX). By default there
    is one switch per two GPUs, as on the HGX H100 baseboard [E], but never more switches than
    (GPU, NIC) groups. SSDs spread evenly over the switches, switches over the sockets.
    """
    params = dict(locals())
    n_nics, serves = _gpu_nic_map(gpus, nics, gpus_per_nic)
    _count(ssds, "ssds")
    groups = min(gpus, n_nics)  # unit that must stay under one switch: a GPU with its NIC(s)
    if switches is None:
        n_sw = max(1, min(groups, math.ceil(gpus / 2)))
    else:
        n_sw = _count(switches, "switches", 1)
    if n_sw > groups:
        raise ValueError(
            f"switches={n_sw} exceeds the {groups} GPU/NIC groups; a GPU and its NIC share a switch"
        )
    b = _Builder("external-switch", params, sockets, link, switch, root, inter_socket, ssd, nic_dma)
    gpus_per_group, nics_per_group = gpus // groups, n_nics // groups

    def sw_of(role: str, i: int) -> int:
        grp = i // (gpus_per_group if role == "gpu" else nics_per_group)
        return grp * n_sw // groups

    for s in range(n_sw):
        b.device(f"sw{s}", "switch", s, b.socket_of(s, n_sw), spec=b.switch)
        b.pcie(f"root{b.socket_of(s, n_sw)}", f"sw{s}", uplink_lanes, "uplink_lanes")

    def socket(role: str, i: int) -> int:
        return b.socket_of(sw_of(role, i), n_sw)

    b.add_gpus_nics(gpus, serves, socket)
    for i in range(gpus):
        b.pcie(f"sw{sw_of('gpu', i)}", f"gpu{i}", gpu_lanes, "gpu_lanes")
    for n in range(n_nics):
        b.pcie(f"sw{sw_of('nic', n)}", f"nic{n}", nic_lanes, "nic_lanes")
    b.add_ssds_on_switches(ssds, n_sw, ssd_lanes)
    return b.tree()


@NODE_LAYOUTS.register(
    "on-card-switch", "the NIC card carries the PCIe switch; GPUs and SSDs attach to it, host x32"
)
def on_card_switch(
    gpus: int = 8,
    nics: int | None = None,
    *,
    gpus_per_nic: int | None = None,
    ssds: int = 0,
    sockets: int = 1,
    gpu_lanes: int = 16,
    nic_lanes: int = 16,
    ssd_lanes: int = 4,
    uplink_lanes: int = 32,
    link: Mapping[str, Any] | None = None,
    switch: Mapping[str, Any] | None = None,
    root: Mapping[str, Any] | None = None,
    inter_socket: Mapping[str, Any] | None = None,
    ssd: Mapping[str, Any] | None = None,
    nic_dma: Mapping[str, Any] | None = None,
) -> PcieTree:
    """One switch on every NIC card (the brief's SmartNIC): the card's NIC ASIC (internal
    ``nic_lanes`` port), the GPUs it serves and its share of the SSDs hang off the card switch;
    the card's host side is Gen5 x32 (``uplink_lanes``, docs/physics.md [S]). Needs whole GPUs per
    NIC (``gpus`` a multiple of ``nics``)."""
    params = dict(locals())
    n_nics, serves = _gpu_nic_map(gpus, nics, gpus_per_nic)
    if n_nics > gpus:
        raise ValueError(
            f"on-card-switch attaches each GPU to one NIC card; nics ({n_nics}) > gpus ({gpus}) "
            "is not supported (use external-switch for several NICs per GPU)"
        )
    _count(ssds, "ssds")
    sw_spec = {"on_card": True, **dict(switch or {})}
    b = _Builder("on-card-switch", params, sockets, link, sw_spec, root, inter_socket, ssd, nic_dma)
    for n in range(n_nics):
        sock = b.socket_of(n, n_nics)
        b.device(f"sw{n}", "switch", n, sock, spec=b.switch)
        b.pcie(f"root{sock}", f"sw{n}", uplink_lanes, "uplink_lanes")
    per = gpus // n_nics
    b.add_gpus_nics(
        gpus, serves, lambda role, i: b.socket_of(i // per if role == "gpu" else i, n_nics)
    )
    for n in range(n_nics):
        b.pcie(f"sw{n}", f"nic{n}", nic_lanes, "nic_lanes")
    for i in range(gpus):
        b.pcie(f"sw{i // per}", f"gpu{i}", gpu_lanes, "gpu_lanes")
    b.add_ssds_on_switches(ssds, n_nics, ssd_lanes)
    return b.tree()


@NODE_LAYOUTS.register(
    "root-complex", "no PCIe switch: GPU-NIC traffic crosses the CPU root complex"
)
def root_complex(
    gpus: int = 8,
    nics: int | None = None,
    *,
    gpus_per_nic: int | None = None,
    ssds: int = 0,
    sockets: int = 1,
    gpu_lanes: int = 16,
    nic_lanes: int = 16,
    ssd_lanes: int = 4,
    link: Mapping[str, Any] | None = None,
    root: Mapping[str, Any] | None = None,
    inter_socket: Mapping[str, Any] | None = None,
    ssd: Mapping[str, Any] | None = None,
    nic_dma: Mapping[str, Any] | None = None,
) -> PcieTree:
    """Every GPU, NIC and SSD on its own CPU root port; devices spread evenly over sockets in
    index order, so a GPU and its NIC share a socket when the counts divide evenly."""
    params = dict(locals())
    n_nics, serves = _gpu_nic_map(gpus, nics, gpus_per_nic)
    _count(ssds, "ssds")
    b = _Builder("root-complex", params, sockets, link, None, root, inter_socket, ssd, nic_dma)
    counts = {"gpu": gpus, "nic": n_nics}
    b.add_gpus_nics(gpus, serves, lambda role, i: b.socket_of(i, counts[role]))
    for i in range(gpus):
        b.pcie(f"root{b.socket_of(i, gpus)}", f"gpu{i}", gpu_lanes, "gpu_lanes")
    for n in range(n_nics):
        b.pcie(f"root{b.socket_of(n, n_nics)}", f"nic{n}", nic_lanes, "nic_lanes")
    b.add_ssds(
        ssds, ssd_lanes, lambda i: b.socket_of(i, ssds), lambda i: f"root{b.socket_of(i, ssds)}"
    )
    return b.tree()


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
        accepted = list(inspect.signature(builder).parameters)
        unknown = sorted(set(params) - set(accepted))
        if unknown:
            raise ValueError(
                f"unknown parameter(s) {unknown} for node layout {spec['preset']!r}; "
                f"accepted: {accepted}"
            )
        return builder(**params)
    return PcieTree.from_dict(spec)
