"""The SuperPoD presets as data: one row per named cluster, every figure with its source.

Each :class:`PresetSpec` names the arguments of the generic ``superpod`` builder
(:func:`podsim.fabric.superpod.superpod`) that make that cluster: scale-up domain size
(``gpus_per_pod``), scale-up bandwidth per accelerator and direction (``scaleup_rate``), its
latency (``scaleup_latency``), the scale-up switch planes (``scaleup_switches``), accelerators
per server (``gpus_per_server``), the scale-out NIC cards (one per ``gpus_per_nic``
accelerators, ``planes`` ports of ``nic_phy`` each), the scale-out kind (``scaleout``) and the
accelerator class the cost model prices (graph attribute ``accelerator``). One generic function
(:func:`podsim.fabric.superpod.register_presets`) turns every row into a
:data:`podsim.fabric.topology.TOPOLOGIES` entry whose keyword arguments are exactly these
figures, so a scenario overrides any of them (``cluster.params``), and any other ``superpod``
parameter passes through.

Source marks (docs/physics.md, "SuperPoD presets", repeats this table): [S] stated by the
cited source, [D] derived here from sourced figures, [announced] a vendor's announcement of a
product not yet measured, [E] an estimate with no public source at hand (a parameter to
override). Scale-up bandwidths are per accelerator and per direction (vendors quote the sum of
both directions for NVLink: 1.8 TB/s = 900 GB/s each way).

The scale-out NIC of the SuperPoD presets is, unless a figure below says otherwise, the
SmartNIC of the design: 400 Gb/s (one 400GbE port or two 200GbE planes), PCIe Gen5 x32 host
side, an on-card PCIe switch (docs/physics.md, "PCIe 5.0", T-Head Panmai 920); ``reference``
keeps the vendor's own scale-out figures where they differ, so a scenario can set them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["SUPERPOD_PRESETS", "Figure", "PresetSpec", "figure_mark"]

#: source marks a figure's ``source`` starts with
MARKS = ("[S]", "[D]", "[announced]", "[E]")


@dataclass(frozen=True)
class Figure:
    """One preset figure: its value (as the ``superpod`` builder takes it: an int, a rate
    such as ``"900GB/s"``, a time such as ``"500ns"``, a PHY or kind name) and its source,
    starting with one of :data:`MARKS`."""

    value: Any
    source: str


def figure_mark(fig: Figure) -> str:
    """The source mark ([S], [D], [announced] or [E]) that ``fig.source`` starts with."""
    for mark in MARKS:
        if fig.source.startswith(mark):
            return mark
    raise ValueError(f"figure source {fig.source!r} starts with none of {MARKS}")


@dataclass(frozen=True)
class PresetSpec:
    """A named SuperPoD cluster: ``size`` copies (``size_key``: pods, or nodes where a pod is
    one server) of the scale-up domain the ``figures`` describe, joined by their scale-out.

    ``figures`` maps ``superpod`` keyword arguments to :class:`Figure`; ``fabric_phy`` defaults
    to ``nic_phy`` when not given. ``reference`` holds vendor figures the default does not build
    (for the record and for scenarios that want them). ``name_format`` names the built graph
    (``{preset}``, ``{size}``)."""

    summary: str
    accelerator: Figure
    size: Figure
    figures: dict[str, Figure]
    about: str
    size_key: str = "pods"
    name_format: str = "{preset}-{size}p"
    reference: dict[str, Figure] = field(default_factory=dict)

    @property
    def description(self) -> str:
        """The registry description (``podsim list``): ``preset: <summary>``."""
        return f"preset: {self.summary}"


_SMARTNIC = "[S] the design's SmartNIC, docs/physics.md 'PCIe 5.0' (T-Head Panmai 920): 400 Gb/s"
#: one-way GPU-to-GPU latency through the scale-up switch. No vendor publishes a hardware
#: figure; the public measurements bound it from above, so 500 ns stays an estimate [E]
_LAT_E = (
    "[E] GPU-to-GPU one-way through the scale-up switch; no public figure (the NVLink and UB "
    "measurements below bound it by 1-2 us)"
)
_LAT_NVLINK = (
    "[E] no public hardware figure: CUDA's p2pBandwidthLatencyTest measures 1.8-2.6 us for an "
    "NVLink P2P write (NVIDIA/cuda-samples issue 230), kernel launch and polling included, so "
    "an upper bound"
)
_LAT_UB = (
    "[E] within the < 1 us inter-node UB latency reported for CloudMatrix384 (arXiv "
    "2506.12708, secondary summary); no per-hop figure"
)
_RAIL_E = "[E] rail-optimised 1:1, one port per plane per NIC card"

#: preset name -> its figures. Adding a row adds a preset (registered by
#: podsim.fabric.superpod.register_presets); each figure's source is cited next to it.
SUPERPOD_PRESETS: dict[str, PresetSpec] = {
    "h800-deepep": PresetSpec(
        summary="8x H800 nodes, 400G NIC per GPU, NVLink 160 GB/s, rail-optimised",
        accelerator=Figure("h800", "[S] DeepEP paper's H800 nodes (docs/physics.md, MoE)"),
        size_key="nodes",
        name_format="{preset}-{size}n",
        size=Figure(4, "[E] 4 nodes = EP32; 2/4/8 give the paper's EP16/32/64"),
        figures={
            "gpus_per_pod": Figure(8, "[S] NVLink inside the 8-GPU node (DeepEP, docs/physics.md)"),
            "gpus_per_server": Figure(8, "[S] 8 H800 per node (DeepEP, docs/physics.md)"),
            "scaleup_rate": Figure("160GB/s", "[S] NVLink 160 GB/s per GPU (docs/physics.md)"),
            "scaleup_latency": Figure("500ns", _LAT_NVLINK),
            "scaleup_switches": Figure(1, "[E] the HGX board's NVSwitch chips as one switch"),
            "gpus_per_nic": Figure(1, "[S] one 400 Gb/s IB NIC per GPU (DeepEP, docs/physics.md)"),
            "planes": Figure(1, "[S] one port per NIC"),
            "nic_phy": Figure("400GbE", "[S] 400 Gb/s per GPU; IB modelled as 400GbE RoCE [E]"),
            "fabric_phy": Figure("400GbE", "[E] switch ports at the NIC's rate"),
            "scaleout": Figure("rail", "[S] rail-optimised: GPU i of every node on rail i"),
        },
        about="The DeepEP paper setup (docs/physics.md, 'DeepSeek-V3 internode dispatch'): "
        "each 8-GPU node is its own NVLink pod; nodes=2/4/8 gives EP16/32/64.",
    ),
    "superpod-128": PresetSpec(
        summary="128-accelerator pods, on-card-switch 400G SmartNIC per GPU pair",
        accelerator=Figure("h100", "[E] names no vendor: priced as an H100-class GPU"),
        size=Figure(2, "[E] two pods joined by the scale-out"),
        figures={
            "gpus_per_pod": Figure(128, "[E] a 128-accelerator scale-up domain"),
            "gpus_per_server": Figure(8, "[E] 16 trays of 8"),
            "scaleup_rate": Figure("400GB/s", "[E] no public figure in docs/physics.md"),
            "scaleup_latency": Figure("500ns", _LAT_E),
            "scaleup_switches": Figure(8, "[E] 8 scale-up switch planes"),
            "gpus_per_nic": Figure(
                2, "[D] the SmartNIC's Gen5 x32 host side serves two x16 accelerators"
            ),
            "planes": Figure(2, "[E] the 400G port split into two 200GbE planes"),
            "nic_phy": Figure("200GbE", f"{_SMARTNIC} as 2 x 200GbE [E]"),
            "scaleout": Figure("rail", _RAIL_E),
        },
        about="A 128-accelerator SuperPoD with the SmartNIC of the design (on-card PCIe "
        "switch), one card per two accelerators; planes=1, nic_phy=400GbE gives one plane.",
    ),
    "superpod-384": PresetSpec(
        summary="384-accelerator pods (48 servers x 8), 400G NIC per accelerator",
        accelerator=Figure("ascend-910c", "[S] CloudMatrix384 is built of Ascend 910C"),
        size=Figure(2, "[E] two pods joined by the scale-out"),
        figures={
            "gpus_per_pod": Figure(384, "[S] CloudMatrix384 (arXiv 2506.12708)"),
            "gpus_per_server": Figure(8, "[S] 48 nodes of 8 NPUs (arXiv 2506.12708)"),
            "scaleup_rate": Figure("392GB/s", "[S] UB per NPU, one way (arXiv 2506.12708)"),
            "scaleup_latency": Figure("500ns", _LAT_UB),
            "scaleup_switches": Figure(7, "[S] seven L1 UB switches per node (arXiv 2506.12708)"),
            "gpus_per_nic": Figure(1, "[S] 400 Gb/s RDMA per NPU (arXiv 2506.12708)"),
            "planes": Figure(1, "[E] one port per NIC"),
            "nic_phy": Figure("400GbE", "[S] 400 Gb/s RDMA per NPU (arXiv 2506.12708)"),
            "scaleout": Figure("rail", _RAIL_E),
        },
        about="A generic 384-accelerator pod shaped like CloudMatrix384 (see atlas-a3 for "
        "the named system).",
    ),
    "nvl72": PresetSpec(
        summary="GB200 NVL72-class racks: 72 GPUs on one NVLink domain (900 GB/s each way), "
        "400G SmartNIC per GPU, rails out",
        accelerator=Figure("gb200", "[S] GB200 NVL72: 36 GB200 superchips, 72 Blackwell GPUs"),
        size=Figure(2, "[E] two racks joined by the scale-out"),
        figures={
            "gpus_per_pod": Figure(
                72, "[S] 72 GPUs in one NVLink domain (NVIDIA GB200 NVL72 product page)"
            ),
            "gpus_per_server": Figure(
                4,
                "[S] 18 compute trays x 4 GPUs (docs.nvidia.com multi-node-nvlink-systems "
                "tuning guide, 'GB200 72x1 configuration')",
            ),
            "scaleup_rate": Figure(
                "900GB/s",
                "[S] NVLink 5: 1.8 TB/s bidirectional per GPU (NVIDIA GB200 NVL72 product "
                "page), 900 GB/s each way [D]",
            ),
            "scaleup_latency": Figure("500ns", _LAT_NVLINK),
            "scaleup_switches": Figure(
                18,
                "[D] 9 NVLink switch trays (docs.nvidia.com tuning guide) x 2 NVSwitch chips; "
                "each GPU's 18 NVLink 5 links one per chip, 50 GB/s each way",
            ),
            "gpus_per_nic": Figure(
                1,
                "[S] one scale-out NIC per GPU: 4 ConnectX per compute tray (GB200: CX-7 "
                "400G, docs.nvidia.com tuning guide; GB300: 4 ConnectX-8, docs.nvidia.com "
                "NVL72 enterprise RA)",
            ),
            "planes": Figure(1, "[E] one port per NIC"),
            "nic_phy": Figure("400GbE", f"{_SMARTNIC}, GB200's CX-7 rate per GPU"),
            "scaleout": Figure("rail", _RAIL_E),
        },
        reference={
            "nic_phy": Figure(
                "800GbE",
                "[S] GB300 NVL72: ConnectX-8 SuperNIC, 800 Gb/s per GPU (docs.nvidia.com "
                "NVL72 enterprise reference architecture)",
            ),
        },
        about="GB200 NVL72-class racks: 18 trays of 4 GPUs on one NVLink 5 domain of 18 "
        "NVSwitch planes; the SmartNIC of the design replaces the tray's ConnectX (a GB300 "
        "rack: nic_phy=800GbE).",
    ),
    "m890": PresetSpec(
        summary="Alibaba Panjiu AL128 (M890)-class: 128 accelerators per scale-up domain, "
        "400G SmartNIC per accelerator [E figures]",
        accelerator=Figure(
            "t-head-ppu",
            "[E] T-Head PPU class (catalog gpu-t-head-ppu: sourced specs, price estimated from "
            "the H20 it is reported to match); the M890's own accelerator is not published",
        ),
        size=Figure(2, "[E] two pods joined by the scale-out"),
        figures={
            "gpus_per_pod": Figure(
                128,
                "[S] 128 AI chips per supernode (Alibaba Cloud blog 'In-depth analysis of "
                "Panjiu AL128 supernode AI servers', Apsara Conference 2025)",
            ),
            "gpus_per_server": Figure(
                4, "[E] 4-GPU boards, as in Alibaba's 64-GPU ALink system (secondary)"
            ),
            "scaleup_rate": Figure(
                "875GB/s",
                "[E] 'up to 14-28 Tb/s per GPU' single-tier ALink (secondary summary of the "
                "Alibaba blog); the low end read as both directions: 7 Tb/s each way",
            ),
            "scaleup_latency": Figure("500ns", _LAT_E),
            "scaleup_switches": Figure(
                16, "[E] two ALink switch nodes of 8 switch trays (secondary)"
            ),
            "gpus_per_nic": Figure(
                1, "[S] '400-800 Gb/s per GPU' scale-out (Alibaba blog, secondary summary)"
            ),
            "planes": Figure(1, "[E] one port per NIC"),
            "nic_phy": Figure("400GbE", f"{_SMARTNIC}, the low end of 400-800 Gb/s per GPU"),
            "scaleout": Figure("rail", _RAIL_E),
        },
        reference={
            "nic_phy": Figure("800GbE", "[S] the high end of 400-800 Gb/s per GPU (Alibaba)"),
        },
        about="An Alibaba Panjiu AL128 / M890-class supernode: one single-tier ALink "
        "(UALink-style) scale-up domain of 128 accelerators; most figures are estimates.",
    ),
    "atlas-a3": PresetSpec(
        summary="Huawei Atlas 900 A3 / CloudMatrix384: 384 Ascend 910C on UB (392 GB/s each "
        "way), 400G RDMA per NPU",
        accelerator=Figure("ascend-910c", "[S] 384 Ascend 910C NPUs (arXiv 2506.12708)"),
        size=Figure(2, "[E] two SuperPoDs joined by the RDMA plane"),
        figures={
            "gpus_per_pod": Figure(
                384, "[S] 384 NPUs on one UB domain (CloudMatrix384, arXiv 2506.12708)"
            ),
            "gpus_per_server": Figure(8, "[S] 48 compute nodes of 8 NPUs (arXiv 2506.12708)"),
            "scaleup_rate": Figure(
                "392GB/s",
                "[S] UB: over 392 GB/s unidirectional per NPU, 14 x 400 Gb/s (arXiv 2506.12708)",
            ),
            "scaleup_latency": Figure("500ns", _LAT_UB),
            "scaleup_switches": Figure(
                7,
                "[S] seven L1 UB switch chips per node (arXiv 2506.12708); each plane's L1+L2 "
                "tiers modelled as one non-blocking switch [D]",
            ),
            "gpus_per_nic": Figure(
                1, "[S] up to 400 Gb/s unidirectional RDMA per NPU (arXiv 2506.12708)"
            ),
            "planes": Figure(1, "[E] one port per NIC"),
            "nic_phy": Figure(
                "400GbE", "[S] 400 Gb/s RoCE per NPU (arXiv 2506.12708), the SmartNIC's rate"
            ),
            "scaleout": Figure("rail", _RAIL_E),
        },
        about="Huawei CloudMatrix384 (Atlas 900 A3 SuperPoD) per the CloudMatrix384 paper "
        "(Zuo et al., arXiv 2506.12708): the UB plane is the scale-up, the RDMA plane the "
        "scale-out.",
    ),
    "atlas-950": PresetSpec(
        summary="Huawei Atlas 950 SuperPoD: 8,192 Ascend 950 NPUs on UnifiedBus 2.0 "
        "(1 TB/s each way) [announced], 400G SmartNIC per NPU [E]",
        accelerator=Figure(
            "ascend-950dt",
            "[announced] Ascend 950DT (catalog gpu-ascend-950dt: announced specs, price and "
            "power estimated as the 910C's)",
        ),
        size=Figure(1, "[announced] one SuperPoD; a SuperCluster joins 64 of them"),
        figures={
            "gpus_per_pod": Figure(
                8192,
                "[announced] 8,192 Ascend 950DT per SuperPoD (Eric Xu keynote 'Groundbreaking "
                "SuperPoD Interconnect', Huawei Connect 2025, 2025-09-18)",
            ),
            "gpus_per_server": Figure(
                8, "[E] 128 compute cabinets of 64 NPUs [announced], cut into servers of 8"
            ),
            "scaleup_rate": Figure(
                "1TB/s",
                "[announced] Ascend 950 interconnect 2 TB/s, 2.5x the 910C's 784 GB/s (= 2 x "
                "392 GB/s, arXiv 2506.12708), so both directions: 1 TB/s each way [D]; 16.3 "
                "PB/s per 8,192 NPUs agrees",
            ),
            "scaleup_latency": Figure(
                "1us", "[E] an optical multi-cabinet UB domain; no verified public figure"
            ),
            "scaleup_switches": Figure(8, "[E] UB-mesh topology not published; 8 planes"),
            "gpus_per_nic": Figure(1, "[E] scale-out (UBoE or RoCE [announced]) per NPU"),
            "planes": Figure(1, "[E] one port per NIC"),
            "nic_phy": Figure("400GbE", f"{_SMARTNIC} [E]: no announced scale-out rate"),
            "scaleout": Figure("rail", _RAIL_E),
        },
        about="Huawei's announced Atlas 950 SuperPoD (Huawei Connect 2025): 8,192 NPUs in "
        "one UnifiedBus 2.0 domain, modelled as switch planes (the UB-mesh is not published).",
    ),
}
