"""What sits at the nodes of a PCIe tree: switches, the CPU root complex, NVMe SSDs, sockets.

Defaults and where they come from (docs/physics.md, "PCIe 5.0"):

- PCIe switch hop latency: Broadcom PEX89144 (Gen5) about 115 ns [S] (PEX88000 Gen4: 105 ns).
  Switching capacity: switches of this class are non-blocking, so by default the shared
  capacity is the sum of the per-direction rates of the switch's ports (it never binds); set it
  lower to model an oversubscribed switch [E].
- Root complex: peer-to-peer traffic between two devices that crosses the CPU (nvidia-smi PHB)
  is slower than through a switch. There is no sourced figure; the defaults are estimates [E]:
  P2P limit 32 GB/s per root port (the P2P traffic entering the CPU from one root port and
  leaving by another; about half a Gen5 x16 direction, the order of what CPU root complexes
  forward peer-to-peer), no aggregate limit over all ports (``p2p_capacity_bps=None``; set it to
  model a congested I/O fabric) and 250 ns of extra latency (the CPU's I/O fabric, about two
  switch hops). Host-memory traffic (DMA to/from the CPU) is not limited by the P2P caps.
- Inter-socket link (nvidia-smi SYS): 64 GB/s per direction and 150 ns, estimates [E] for a
  UPI/xGMI-class link.
- Gen5 NVMe SSD (Micron 9550 class): 14 GB/s read, 10 GB/s write, about 60 us read latency [S].
- NIC DMA reads (GPUDirect RDMA transmit: the NIC reads the payload from GPU memory with
  Memory Read requests and the GPU answers with Completions; docs/physics.md "PCIe reads"):
  Max_Read_Request_Size 512 B, the PCIe Device Control register's reset value, which Linux
  ``lspci -vv`` shows as ``MaxReadReq 512 bytes`` on an untuned device [S] (tuning guides raise
  it to 4096 B with ``setpci``/``mlxconfig``; allowed 128..4096 B, Linux ``pcie_set_readrq``
  [S]); 256 outstanding reads, the 8-bit (Extended Tag) tag space [S] (PCIe 4.0 10-bit tags
  allow up to 768, e.g. Intel R-Tile [S]; how many a NIC keeps in flight is an estimate [E]);
  completions of the link's MPS (``completion_bytes=None``): the completer returns whole MPS
  chunks of an aligned request [E] (it may split at the Read Completion Boundary, 64/128 B for a
  root complex, 128 B for other devices, Intel AN 855 "Throughput for Reads" [S]: set
  ``completion_bytes`` to model that); 1 us from a request reaching the GPU to its data leaving
  it (GPU memory read latency through the BAR) [E].
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any, TypeVar

from podsim.fabric.params import from_mapping, param

__all__ = [
    "InterSocket",
    "NicDma",
    "PcieSwitch",
    "RootComplex",
    "Ssd",
]

T = TypeVar("T")


def _from_dict(cls: type[T], d: Mapping[str, Any], what: str) -> T:
    """Build a spec dataclass from a YAML mapping, quantities parsed by each field's declared
    kind (:func:`podsim.fabric.params.from_mapping`); a spec object passes through."""
    if isinstance(d, cls):
        return d
    return from_mapping(cls, d, what)  # type: ignore[no-any-return]


def _check_rate(value: float | None, name: str, allow_none: bool = False) -> None:
    if value is None and allow_none:
        return
    if value is None or not value > 0:
        raise ValueError(
            f"{name} must be a rate > 0 bits/s (or a string like '32GB/s'), got {value!r}"
        )


def _check_time(value: float, name: str) -> None:
    if not (value >= 0 and math.isfinite(value)):
        raise ValueError(f"{name} must be a finite duration >= 0 seconds, got {value!r}")


@dataclass(frozen=True)
class PcieSwitch:
    """A PCIe switch: per-hop latency and an optional shared switching capacity (bits/s).

    ``capacity_bps=None`` means non-blocking: the tree sets it to the sum of the per-direction
    rates of the switch's ports. ``on_card`` marks a switch that sits on a NIC card.
    """

    hop_latency_s: float = param(
        115e-9,
        key="hop_latency_s",
        kind="time",
        minimum=0,
        doc="latency of one hop through the switch",
        source="[S] Broadcom PEX89144 (Gen5) about 115 ns; docs/physics.md 'PCIe 5.0'",
    )
    capacity_bps: float | None = param(
        None,
        key="capacity_bps",
        kind="rate",
        minimum=0,
        exclusive=True,
        optional=True,
        doc="switching capacity shared by all its ports; null: non-blocking (the sum of its "
        "ports' per-direction rates)",
        source="[E] switches of this class are non-blocking",
    )
    on_card: bool = param(
        False,
        key=None,
        kind="bool",
        doc="the switch sits on a NIC card (priced as part of the card); set by the "
        "on-card-switch layout",
    )

    def __post_init__(self) -> None:
        _check_time(self.hop_latency_s, "switch hop_latency_s")
        _check_rate(self.capacity_bps, "switch capacity_bps", allow_none=True)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> PcieSwitch:
        return _from_dict(cls, d, "PCIe switch")


@dataclass(frozen=True)
class RootComplex:
    """The CPU root complex of one socket, for device-to-device traffic that crosses it: the
    P2P limit of each root port (ingress), an optional aggregate P2P capacity, and extra
    latency (defaults are estimates [E], see the module doc)."""

    p2p_limit_bps: float = param(
        32e9 * 8,
        key="p2p_limit_bps",
        kind="rate",
        minimum=0,
        exclusive=True,
        doc="peer-to-peer traffic that may enter the CPU from one root port and leave by another",
        source="[E] about half a Gen5 x16 direction (32 GB/s)",
    )
    p2p_capacity_bps: float | None = param(
        None,
        key="p2p_capacity_bps",
        kind="rate",
        minimum=0,
        exclusive=True,
        optional=True,
        doc="aggregate peer-to-peer capacity over all root ports; null: no aggregate limit",
        source="[E] set it to model a congested I/O fabric",
    )
    latency_s: float = param(
        250e-9,
        key="latency_s",
        kind="time",
        minimum=0,
        doc="extra latency of a path that crosses the root complex (the CPU's I/O fabric)",
        source="[E] about two switch hops",
    )

    def __post_init__(self) -> None:
        _check_rate(self.p2p_limit_bps, "root p2p_limit_bps")
        _check_rate(self.p2p_capacity_bps, "root p2p_capacity_bps", allow_none=True)
        _check_time(self.latency_s, "root latency_s")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RootComplex:
        return _from_dict(cls, d, "root complex")


@dataclass(frozen=True)
class InterSocket:
    """The link between two CPU sockets (UPI/xGMI class): per-direction rate, latency [E]."""

    rate_bps: float = param(
        64e9 * 8,
        key="rate_bps",
        kind="rate",
        minimum=0,
        exclusive=True,
        doc="per-direction rate of the link between two sockets",
        source="[E] a UPI/xGMI-class link, 64 GB/s",
    )
    latency_s: float = param(
        150e-9,
        key="latency_s",
        kind="time",
        minimum=0,
        doc="latency of crossing to the other socket",
        source="[E] UPI/xGMI class",
    )

    def __post_init__(self) -> None:
        _check_rate(self.rate_bps, "inter_socket rate_bps")
        _check_time(self.latency_s, "inter_socket latency_s")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> InterSocket:
        return _from_dict(cls, d, "inter-socket link")


@dataclass(frozen=True)
class Ssd:
    """A Gen5 NVMe SSD's own limits (Micron 9550 class, docs/physics.md [S])."""

    read_bps: float = param(
        14e9 * 8,
        key="read_bps",
        kind="rate",
        minimum=0,
        exclusive=True,
        doc="sequential read rate of one SSD",
        source="[S] Micron 9550 class Gen5 NVMe, 14 GB/s; docs/physics.md",
    )
    write_bps: float = param(
        10e9 * 8,
        key="write_bps",
        kind="rate",
        minimum=0,
        exclusive=True,
        doc="sequential write rate of one SSD",
        source="[S] Micron 9550 class Gen5 NVMe, 10 GB/s; docs/physics.md",
    )
    read_latency_s: float = param(
        60e-6,
        key="read_latency_s",
        kind="time",
        minimum=0,
        doc="read latency of one SSD",
        source="[S] Micron 9550 class, about 60 us; docs/physics.md",
    )

    def __post_init__(self) -> None:
        _check_rate(self.read_bps, "ssd read_bps")
        _check_rate(self.write_bps, "ssd write_bps")
        _check_time(self.read_latency_s, "ssd read_latency_s")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Ssd:
        return _from_dict(cls, d, "SSD")


#: Max_Read_Request_Size values the PCIe Device Control register encodes (Linux
#: ``pcie_set_readrq``: 128, 256, 512, 1024, 2048, 4096 B [S]).
READ_REQUEST_SIZES = (128, 256, 512, 1024, 2048, 4096)


@dataclass(frozen=True)
class NicDma:
    """How a NIC reads GPU (or host) memory over PCIe: the requester side of a DMA read.

    ``max_read_request_bytes`` (MRRS): bytes one Memory Read request asks for; ``read_tags``:
    requests the NIC keeps outstanding at once; ``completion_bytes``: payload of each
    Completion-with-Data the completer returns (None: the path's Max Payload Size; it never
    exceeds the MPS nor the MRRS); ``read_latency_s``: the completer's time from a request's
    arrival to its data leaving (memory read latency). Defaults and sources: module doc.
    """

    max_read_request_bytes: int = param(
        512,
        key="max_read_request_bytes",
        kind="size",
        doc="Max_Read_Request_Size: bytes one Memory Read request asks for (128, 256, 512, 1024, "
        "2048 or 4096)",
        source="[S] the PCIe Device Control register's reset value (lspci 'MaxReadReq 512 "
        "bytes'); Linux pcie_set_readrq allows 128..4096",
    )
    read_tags: int = param(
        256,
        key="read_tags",
        kind="count",
        minimum=1,
        doc="read requests the NIC keeps outstanding at once (1..1024)",
        source="[S] the 8-bit Extended Tag space; how many a NIC uses [E]",
    )
    completion_bytes: int | None = param(
        None,
        key="completion_bytes",
        kind="size",
        optional=True,
        doc="payload of each Completion-with-Data the GPU returns; null: the link's MPS (64 "
        "or 128 B models a completer that splits at its Read Completion Boundary)",
        source="[E] whole MPS chunks of an aligned request; RCB 64/128 B: Intel AN 855",
    )
    read_latency_s: float = param(
        1e-6,
        key="read_latency_s",
        kind="time",
        minimum=0,
        exclusive=True,
        doc="time from a read request reaching the GPU to its data leaving it (GPU memory "
        "read latency through the BAR)",
        source="[E]",
    )

    def __post_init__(self) -> None:
        if self.max_read_request_bytes not in READ_REQUEST_SIZES:
            raise ValueError(
                f"nic_dma max_read_request_bytes {self.max_read_request_bytes!r} invalid; "
                f"expected one of {READ_REQUEST_SIZES} (the PCIe MRRS encodings)"
            )
        tags = self.read_tags
        if isinstance(tags, bool) or not isinstance(tags, int) or not 1 <= tags <= 1024:
            raise ValueError(
                f"nic_dma read_tags {tags!r} invalid; expected an integer 1..1024 "
                "(5-bit tags: 32, 8-bit: 256, 10-bit: up to 1024)"
            )
        cpl = self.completion_bytes
        if cpl is not None and (isinstance(cpl, bool) or cpl not in (64, *READ_REQUEST_SIZES)):
            raise ValueError(
                f"nic_dma completion_bytes {cpl!r} invalid; expected null (the MPS) or one of "
                f"{(64, *READ_REQUEST_SIZES)} (a multiple of the Read Completion Boundary)"
            )
        _check_time(self.read_latency_s, "nic_dma read_latency_s")
        if not self.read_latency_s > 0:
            raise ValueError(
                f"nic_dma read_latency_s must be > 0 seconds, got {self.read_latency_s!r}"
            )

    @property
    def tag_window_bits(self) -> float:
        """Bits the NIC can have requested and not yet received: tags x MRRS x 8."""
        return 8.0 * self.read_tags * self.max_read_request_bytes

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> NicDma:
        return _from_dict(cls, d, "nic_dma")
