"""One PCIe link: lanes x transfer rate, line coding, TLP and DLLP overheads, per direction.

Sources (docs/physics.md, "PCIe 5.0"):

- Gen5 runs 32 GT/s per lane with 128b/130b coding, so one direction of x16 carries
  16 x 32e9 x 128/130 / 8 = 63.0 GB/s raw, x32 126 GB/s, x4 15.75 GB/s [D]. Gen3/Gen4 use the
  same coding at 8 / 16 GT/s.
- Every TLP carries ``mps`` payload bytes plus about 20 B (3-DW header, with framing, sequence
  number and LCRC) or 24 B (4-DW header: 64-bit addresses, the case for GPU BARs), +4 B with
  ECRC [S]. Write efficiency is MPS/(MPS+24): MPS 256 -> 91.4 % (57.6 GB/s on x16) [S/D].
- DLLPs (ACK/NAK, flow-control updates; 8 B each [S]) mostly travel *against* the data, so a
  one-way DMA stream loses little to them in its own direction. They enter as a configurable
  fraction of the per-direction rate, default 0 (which reproduces docs/physics.md's 57.6 GB/s and
  its "13-15 % headroom over a 400GbE NIC"); raise it for bidirectional loads [E].

The effective rate is the payload a direction can carry: raw x (1 - dllp) x MPS/(MPS+overhead).

DMA reads (docs/physics.md "PCIe reads"): the requester sends Memory Read request TLPs (no
payload, a 4-DW header for 64-bit addresses: ``header_bytes`` on the wire [S]) of up to
Max_Read_Request_Size bytes, and the completer answers with Completion-with-Data TLPs (3-DW
header: ``completion_header_bytes`` = 20 B with framing, sequence number and LCRC, Intel AN 855
"Throughput for Reads": 512 B read as two 256 B completions -> 512/(512 + 2 x 20) = 92 % [S]).
A link direction's capacity stays in write-payload bits/s (:attr:`PcieLink.effective_bps`), so
a posted write loads it with coefficient 1 and a read with :meth:`PcieLink.completion_load`
(data direction) and :meth:`PcieLink.request_load` (the opposite direction), each the read's
wire bytes per payload byte over a full-MPS write's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from podsim.fabric.params import from_mapping, param
from podsim.fabric.units import fmt_rate

__all__ = [
    "ENCODING",
    "GT_PER_S",
    "LANE_WIDTHS",
    "PcieLink",
]

#: Transfer rate per lane (transfers/s) of the generations modelled. Gen6 (PAM4, FLIT mode with
#: a different overhead structure) is not modelled.
GT_PER_S: dict[int, float] = {3: 8e9, 4: 16e9, 5: 32e9}
#: 128b/130b line coding (Gen3 and later).
ENCODING = 128 / 130
#: Link widths the PCIe spec defines.
LANE_WIDTHS = (1, 2, 4, 8, 16, 32)


@dataclass(frozen=True)
class PcieLink:
    """A PCIe link's parameters; every rate property is per direction, in bits/s.

    ``header_bytes`` is the per-TLP overhead *including* framing, sequence number and LCRC
    (20 for a 3-DW header, 24 for a 4-DW header; docs/physics.md), ``ecrc`` adds 4 B per TLP.
    ``latency_s`` is an optional per-link delay (PHY and controller; 0 by default [E], the hop
    latencies that matter sit in switches and the root complex).
    """

    lanes: int = param(
        16,
        key=None,
        kind="count",
        doc="link width; set by the node layout per link (its gpu_lanes, nic_lanes, ...)",
    )
    gen: int = param(
        5,
        key="gen",
        kind="int",
        doc="PCIe generation: 3, 4 or 5 (8, 16, 32 GT/s per lane, 128b/130b)",
        source="[S] PCIe Base Specification; Gen5: the SmartNIC's host side (docs/physics.md)",
    )
    mps: int = param(
        256,
        key="mps",
        kind="size",
        doc="Max Payload Size of a TLP (128..4096 B, a power of two)",
        source="[E] a common negotiated value; docs/physics.md 'PCIe 5.0' (256 and 512 B)",
    )
    header_bytes: int = param(
        24,
        key="header_bytes",
        kind="size",
        doc="wire overhead of a request TLP with framing, sequence number and LCRC (20: 3-DW "
        "header, 24: 4-DW for 64-bit addresses)",
        source="[S] 4-DW header for GPU BARs; docs/physics.md 'PCIe 5.0'",
    )
    completion_header_bytes: int = param(
        20,
        key="completion_header_bytes",
        kind="size",
        doc="wire overhead of a Completion-with-Data TLP (3-DW header with framing, sequence "
        "number and LCRC)",
        source="[S] Intel AN 855 'Throughput for Reads'",
    )
    ecrc: bool = param(
        False,
        key="ecrc",
        kind="bool",
        doc="end-to-end CRC on every TLP (+4 B)",
        source="[S] optional in the PCIe spec, usually off",
    )
    dllp_overhead: float = param(
        0.0,
        key="dllp_overhead",
        kind="fraction",
        doc="share of a direction's rate taken by DLLPs (ACK/NAK, flow-control updates)",
        source="[E] DLLPs mostly travel against a one-way DMA stream; raise it for "
        "bidirectional loads",
    )
    latency_s: float = param(
        0.0,
        key="latency_s",
        kind="time",
        minimum=0,
        doc="per-link delay (PHY and controller)",
        source="[E] the hop latencies that matter sit in switches and the root complex",
    )

    def __post_init__(self) -> None:
        if self.gen not in GT_PER_S:
            raise ValueError(
                f"PCIe gen {self.gen!r} is not modelled; expected one of {sorted(GT_PER_S)}"
            )
        if self.lanes not in LANE_WIDTHS:
            raise ValueError(f"PCIe lanes {self.lanes!r} invalid; expected one of {LANE_WIDTHS}")
        if self.mps not in (128, 256, 512, 1024, 2048, 4096):
            raise ValueError(
                f"PCIe mps {self.mps!r} invalid; expected a Max Payload Size of 128..4096 B "
                "(a power of two)"
            )
        if not 0 <= self.header_bytes <= 64:
            raise ValueError(
                f"PCIe header_bytes {self.header_bytes!r} invalid; expected 20 (3-DW) or 24 (4-DW)"
            )
        if not 0 <= self.completion_header_bytes <= 64:
            raise ValueError(
                f"PCIe completion_header_bytes {self.completion_header_bytes!r} invalid; "
                "expected 20 (a 3-DW completion header with framing, sequence number and LCRC)"
            )
        if not 0.0 <= self.dllp_overhead < 1.0:
            raise ValueError(
                f"PCIe dllp_overhead {self.dllp_overhead!r} invalid; expected a fraction in [0, 1)"
            )
        if not self.latency_s >= 0:
            raise ValueError(f"PCIe latency_s {self.latency_s!r} invalid; expected >= 0 seconds")

    @property
    def raw_bps(self) -> float:
        """Bits/s per direction after 128b/130b coding, before TLP and DLLP overheads."""
        return self.lanes * GT_PER_S[self.gen] * ENCODING

    @property
    def tlp_overhead_bytes(self) -> int:
        return self.header_bytes + (4 if self.ecrc else 0)

    @property
    def tlp_efficiency(self) -> float:
        """Payload share of the TLP stream: MPS / (MPS + header [+ ECRC])."""
        return self.mps / (self.mps + self.tlp_overhead_bytes)

    @property
    def effective_bps(self) -> float:
        """Payload bits/s one direction carries with full-size TLPs."""
        return self.raw_bps * (1.0 - self.dllp_overhead) * self.tlp_efficiency

    @property
    def _ecrc_bytes(self) -> int:
        return 4 if self.ecrc else 0

    def completion_load(self, completion_bytes: int) -> float:
        """Capacity a read's payload uses in its data direction, per payload bit (write = 1):
        completions of ``completion_bytes`` payload plus a 3-DW header each."""
        if completion_bytes <= 0:
            raise ValueError(f"completion_bytes must be > 0, got {completion_bytes!r}")
        over = self.completion_header_bytes + self._ecrc_bytes
        return (completion_bytes + over) / completion_bytes * self.tlp_efficiency

    def request_load(self, read_request_bytes: int) -> float:
        """Capacity a read's requests use in the *opposite* direction, per payload bit:
        one header-only Memory Read TLP (``header_bytes``) per ``read_request_bytes``."""
        if read_request_bytes <= 0:
            raise ValueError(f"read_request_bytes must be > 0, got {read_request_bytes!r}")
        return self.tlp_overhead_bytes / read_request_bytes * self.tlp_efficiency

    def read_bps(self, completion_bytes: int) -> float:
        """Payload bits/s one direction carries as read completions of ``completion_bytes``."""
        return self.effective_bps / self.completion_load(completion_bytes)

    def describe(self) -> str:
        return (
            f"Gen{self.gen} x{self.lanes} (MPS {self.mps}, {self.tlp_overhead_bytes} B/TLP): "
            f"{fmt_rate(self.effective_bps)} per direction"
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> PcieLink:
        """From a YAML-style mapping; ``mps`` may be ``"256B"``, ``latency_s`` ``"5ns"``."""
        for key in ("lanes", "gen"):
            v = d.get(key) if isinstance(d, Mapping) else None
            if v is not None and (isinstance(v, bool) or not isinstance(v, int)):
                raise ValueError(f"PCIe {key} must be an integer, got {v!r}")
        return from_mapping(cls, d, "PCIe link")  # type: ignore[no-any-return]
