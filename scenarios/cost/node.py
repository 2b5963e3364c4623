"""What one server holds that the cluster graph does not show: PCIe switches and SSDs.

The topology graph has NIC ports, GPUs and switches, but the PCIe tree inside a server is the node
layout's business (``nic-pcie.NODE_LAYOUTS``, issue 5). The cost model needs only counts:

- ``pcie_boards``: external PCIe switch boards, each carrying one switch chip
  (layout ``external-switch``);
- ``pcie_on_nic``: PCIe switch chips that sit on NIC cards (layout ``on-card-switch``; their cost
  is in the SmartNIC's price, they appear in the BOM at $0 for the record);
- ``ssds``: NVMe SSDs.

When the node layout registry is available the counts are read from the layout's device graph
(nodes with ``kind`` ``"switch"``/``"pcie_switch"`` and ``"ssd"``; a switch whose ``on_nic`` /
``on_card`` attr is true, or whose name says ``nic``, counts as on-card). Otherwise, or when the
layout has no device graph, these assumptions stand in:

- ``external-switch``: one switch board per two GPUs (the HGX H100 baseboard pairs two GPUs and
  their NICs under one Gen5 switch [E]);
- ``on-card-switch``: one switch chip on every NIC card, no boards;
- ``root-complex`` or no layout: no PCIe switches.

Explicit ``cost.pcie_boards_per_server`` / ``cost.ssds_per_server`` always win.
"""

from __future__ import annotations

import importlib
import math
from dataclasses import dataclass
from typing import Any

__all__ = ["NodeHardware", "node_hardware"]


@dataclass(frozen=True)
class NodeHardware:
    """Per-server counts the BOM cannot read from the topology graph."""

    layout: str | None
    pcie_boards: int
    pcie_on_nic: int
    ssds: int
    source: str  # "layout graph", "assumption" or "cost spec"


def _layout_registry() -> Any | None:
    try:
        mod = importlib.import_module("nic-pcie")
    except ModuleNotFoundError as exc:
        if exc.name in ("nic-pcie", "nic"):
            return None
        raise
    return getattr(mod, "NODE_LAYOUTS", None)


def _device_graph(layout: str, gpus: int, nics: int) -> Any | None:
    """The layout's device graph, built for this server size when the layout can be."""
    reg = _layout_registry()
    if reg is None or layout not in reg:
        return None
    obj = reg.get(layout)
    for call in (
        lambda: obj(gpus=gpus, nics=nics),
        lambda: obj(gpus_per_node=gpus, nics_per_node=nics),
        lambda: obj(),
    ):
        try:
            built = call() if callable(obj) else obj
        except TypeError:
            continue
        graph = getattr(built, "graph", built)
        if hasattr(graph, "nodes"):
            return graph
        return None
    return None


def _count_from_graph(graph: Any) -> tuple[int, int, int]:
    boards = on_nic = ssds = 0
    for name, d in graph.nodes(data=True):
        kind = str(d.get("kind", d.get("role", ""))).lower()
        if kind in ("switch", "pcie_switch", "pcie-switch", "pcieswitch"):
            if d.get("on_nic") or d.get("on_card") or "nic" in str(name).lower():
                on_nic += 1
            else:
                boards += 1
        elif kind in ("ssd", "nvme"):
            ssds += 1
    return boards, on_nic, ssds


def node_hardware(
    layout: str | None,
    gpus: int,
    nics: int,
    *,
    pcie_boards: int | None = None,
    ssds: int | None = None,
) -> NodeHardware:
    """PCIe switch and SSD counts of one server with ``gpus`` GPUs and ``nics`` NIC cards."""
    source = "assumption"
    boards, on_nic, n_ssd = 0, 0, 0
    graph = _device_graph(layout, gpus, nics) if layout else None
    if graph is not None:
        boards, on_nic, n_ssd = _count_from_graph(graph)
        source = "layout graph"
    elif layout == "external-switch":
        boards = math.ceil(max(gpus, nics, 1) / 2)
    elif layout == "on-card-switch":
        on_nic = nics
    if pcie_boards is not None:
        boards, source = pcie_boards, "cost spec"
    if ssds is not None:
        n_ssd = ssds
    return NodeHardware(layout, boards, on_nic, n_ssd, source)
