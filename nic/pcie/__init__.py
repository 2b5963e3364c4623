"""PCIe inside a node: links, switches, root complexes, node layouts and GPUDirect streams.

- :mod:`nic.pcie.link`: one PCIe link's per-direction effective rate (Gen3-5, 128b/130b, TLP and
  DLLP overheads).
- :mod:`podsim.nic.pcie.devices`: switch, root complex, inter-socket link and NVMe SSD specs.
- :mod:`podsim.nic.pcie.tree`: :class:`PcieTree`, a node's device graph with paths, latencies,
  nvidia-smi path classes and capacity resources.
- :mod:`podsim.nic.pcie.layouts`: the ``NODE_LAYOUTS`` presets and :func:`build_layout` (YAML).
- :mod:`podsim.nic.pcie.streams`: GPUDirect RDMA/Storage and host streams sharing the tree max-min
  fairly (:func:`solve_streams`).
"""

from __future__ import annotations

from podsim.nic.pcie.devices import InterSocket, PcieSwitch, RootComplex, Ssd
from podsim.nic.pcie.layouts import (
    NODE_LAYOUTS,
    build_layout,
    external_switch,
    on_card_switch,
    root_complex,
)
from podsim.nic.pcie.link import PcieLink
from podsim.nic.pcie.streams import (
    Stream,
    StreamRates,
    gpudirect_streams,
    nic_dma_caps,
    solve_streams,
)
from podsim.nic.pcie.tree import PATH_CLASSES, PciePath, PcieTree

__all__ = [
    "NODE_LAYOUTS",
    "PATH_CLASSES",
    "InterSocket",
    "PcieLink",
    "PciePath",
    "PcieSwitch",
    "PcieTree",
    "RootComplex",
    "Ssd",
    "Stream",
    "StreamRates",
    "build_layout",
    "external_switch",
    "gpudirect_streams",
    "nic_dma_caps",
    "on_card_switch",
    "root_complex",
    "solve_streams",
]
