"""What one server holds that the cluster graph does not show: PCIe switches and SSDs.

The topology graph has NIC ports, GPUs and switches, but the PCIe tree inside a server is the node
layout's business (``podsim.nic.pcie.NODE_LAYOUTS``, issue 5). The cost model needs only counts:

- ``pcie_boards``: external PCIe switch boards, each carrying one switch chip
  (layout ``external-switch``);
- ``pcie_on_nic``: PCIe switch chips that sit on NIC cards (layout ``on-card-switch``; their cost
  is in the SmartNIC's price, they appear in the BOM at $0 for the record);
- ``ssds``: NVMe SSDs.

The counts are read from the layout's device graph (``nic.pcie.NODE_LAYOUTS`` builder called with
the server's GPU and NIC-card counts): nodes of role ``switch`` (on the card when their
:class:`podsim.nic.pcie.devices.PcieSwitch` spec says ``on_card``) and ``ssd``. When the layout is
unknown or rejects the server's counts these assumptions, the same as the layouts' own defaults,
stand in:

- ``external-switch``: one switch board per two GPUs (the HGX H100 baseboard pairs two GPUs and
  their NICs under one Gen5 switch [E]);
- ``on-card-switch``: one switch chip on every NIC card, no boards;
- ``root-complex`` or no layout: no PCIe switches.

Explicit ``cost.pcie_boards_per_server`` / ``cost.ssds_per_server`` always win.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import lru_cache
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


def _device_graph(layout: str, gpus: int, nics: int, params: str = "{}") -> Any | None:
    """The layout's device graph built for this server (``gpus`` GPUs, ``nics`` NIC cards, the
    scenario's ``cluster.layout_params``, sized as the simulated trees are:
    :func:`podsim.nic.pcie.cluster.ClusterPcie.build`), or None when the layout registry does
    not know ``layout`` or the layout rejects the sizes."""
    from podsim.nic.pcie import NODE_LAYOUTS

    if layout not in NODE_LAYOUTS:
        return None
    builder = NODE_LAYOUTS.get(layout)
    kw = json.loads(params)
    kw.setdefault("gpus", max(gpus, 1))
    if "nics" not in kw and "gpus_per_nic" not in kw:
        kw["nics"] = nics or None
    try:
        tree = builder(**kw)
    except (TypeError, ValueError):
        return None
    return tree.graph


def _count_from_graph(graph: Any) -> tuple[int, int, int]:
    boards = on_nic = ssds = 0
    for _, d in graph.nodes(data=True):
        role = str(d.get("role", d.get("kind", ""))).lower()
        if role == "switch":
            spec = d.get("spec")
            if d.get("on_card") or getattr(spec, "on_card", False):
                on_nic += 1
            else:
                boards += 1
        elif role == "ssd":
            ssds += 1
    return boards, on_nic, ssds


@lru_cache(maxsize=256)
def _layout_counts(
    layout: str, gpus: int, nics: int, params: str = "{}"
) -> tuple[int, int, int] | None:
    graph = _device_graph(layout, gpus, nics, params)
    return None if graph is None else _count_from_graph(graph)


def node_hardware(
    layout: str | None,
    gpus: int,
    nics: int,
    *,
    pcie_boards: int | None = None,
    ssds: int | None = None,
    params: str = "{}",
) -> NodeHardware:
    """PCIe switch and SSD counts of one server with ``gpus`` GPUs and ``nics`` NIC cards
    (``params``: the layout's parameters as JSON, ``cluster.layout_params``)."""
    source = "assumption"
    boards, on_nic, n_ssd = 0, 0, 0
    counted = _layout_counts(layout, gpus, nics, params) if layout else None
    if counted is not None:
        boards, on_nic, n_ssd = counted
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
