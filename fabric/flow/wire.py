"""What a message costs on the wire: packets, wire bytes and goodput.

RoCEv2 framing (docs/physics.md, "400GbE over 112G PAM4" [S]): a message of ``B`` payload bytes is
cut into ``ceil(B / MTU)`` packets; each packet occupies ``payload + 82`` bytes of wire time (20 B
preamble+IFG, 18 B Ethernet+FCS, 20 B IPv4, 8 B UDP, 12 B BTH, 4 B ICRC), and never less than
a minimum frame (64 B + 20 B preamble/IFG = 84 B). An RDMA WRITE adds 16 B of RETH on its first
packet (``first_extra``). Goodput at MAC rate ``R`` is then ``B / wire(B) x R``: 4096 B packets
give 98.0 % (392 Gb/s at 400G), 1024 B give 92.6 % (docs/physics.md [D]).

These are the same rules the packet engine applies per packet (:mod:`podsim.fabric.packet`), so the
fluid and packet models agree byte for byte on what crosses a link.
"""

from __future__ import annotations

import numpy as np
from podsim.fabric.packet import MIN_WIRE_BYTES, ROCE_OVERHEAD

__all__ = ["goodput_fraction", "packets", "wire_bytes"]


def packets(nbytes: np.ndarray | int, mtu: int) -> np.ndarray:
    """Packets of each message: ``ceil(bytes / mtu)`` (a zero-byte message still sends one)."""
    if mtu <= 0:
        raise ValueError(f"mtu={mtu!r} must be > 0 bytes")
    b = np.asarray(nbytes, dtype=np.int64)
    return np.maximum(1, -(-b // mtu))


def wire_bytes(
    nbytes: np.ndarray | int,
    mtu: int,
    overhead: int = ROCE_OVERHEAD,
    first_extra: int = 0,
    min_wire: int = MIN_WIRE_BYTES,
) -> np.ndarray:
    """Wire bytes of each message: payload + ``overhead`` per packet, each packet at least
    ``min_wire`` (the link layer's least frame, :func:`podsim.fabric.packet.link_framing`), plus
    ``first_extra`` once (RETH on an RDMA WRITE's first packet)."""
    b = np.asarray(nbytes, dtype=np.int64)
    n = packets(b, mtu)
    last = b - (n - 1) * mtu
    full = (n - 1) * max(mtu + overhead, min_wire)
    return full + np.maximum(last + overhead, min_wire) + first_extra


def goodput_fraction(
    nbytes: np.ndarray | int,
    mtu: int,
    overhead: int = ROCE_OVERHEAD,
    first_extra: int = 0,
    min_wire: int = MIN_WIRE_BYTES,
) -> np.ndarray:
    """Payload bytes per wire byte of each message (``B / wire(B)``; 1 for an empty one)."""
    b = np.asarray(nbytes, dtype=np.int64)
    w = wire_bytes(b, mtu, overhead, first_extra, min_wire)
    return np.where(b > 0, b / w, 1.0)
