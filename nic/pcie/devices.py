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
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any, TypeVar

from podsim.fabric.units import parse_rate, parse_time

__all__ = [
    "InterSocket",
    "PcieSwitch",
    "RootComplex",
    "Ssd",
]

T = TypeVar("T")


def _from_dict(cls: type[T], d: Mapping[str, Any], what: str) -> T:
    """Build a spec dataclass from a YAML mapping; ``*_bps`` keys parse rates, ``*_s`` times."""
    known = {f.name for f in fields(cls)}  # type: ignore[arg-type]
    if not isinstance(d, Mapping):
        raise ValueError(
            f"the {what} must be a mapping of its fields ({', '.join(sorted(known))}); got {d!r}"
        )
    unknown = set(d) - known
    if unknown:
        raise ValueError(
            f"unknown {what} key(s) {sorted(unknown)}; expected some of {sorted(known)}"
        )
    kw: dict[str, Any] = {}
    for k, v in d.items():
        if v is None:
            kw[k] = None
        elif k.endswith("_bps"):
            kw[k] = parse_rate(v)
        elif k.endswith("_s"):
            kw[k] = parse_time(v)
        else:
            kw[k] = v
    return cls(**kw)


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

    hop_latency_s: float = 115e-9
    capacity_bps: float | None = None
    on_card: bool = False

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

    p2p_limit_bps: float = 32e9 * 8
    p2p_capacity_bps: float | None = None
    latency_s: float = 250e-9

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

    rate_bps: float = 64e9 * 8
    latency_s: float = 150e-9

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

    read_bps: float = 14e9 * 8
    write_bps: float = 10e9 * 8
    read_latency_s: float = 60e-6

    def __post_init__(self) -> None:
        _check_rate(self.read_bps, "ssd read_bps")
        _check_rate(self.write_bps, "ssd write_bps")
        _check_time(self.read_latency_s, "ssd read_latency_s")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Ssd:
        return _from_dict(cls, d, "SSD")
