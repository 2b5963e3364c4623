"""Segmentation of RDMA messages into MTU packets and their wire size.

Model (docs/physics.md, "400GbE over 112G PAM4" and the team brief's packet-overhead contract):

* A message of ``size`` bytes is carried by ``ceil(size / mtu)`` packets (at least one: a
  zero-byte SEND/WRITE still sends one packet, as in InfiniBand/RoCE); every packet but the last
  carries exactly ``mtu`` payload bytes.
* Every RoCEv2 packet costs :data:`ROCE_OVERHEAD` = 82 B on the wire beyond its payload: 20 B
  preamble+IFG, 18 B Ethernet+FCS, 20 B IPv4, 8 B UDP, 12 B BTH, 4 B ICRC. [S]
* The first packet of an RDMA WRITE carries a RETH (virtual address, rkey, length): +16 B. [S]
  SEND carries no extended header.
* The path MTU is one of the InfiniBand/RoCE MTUs; 1024, 2048 and 4096 are the usual ones on
  Ethernet fabrics (:data:`MTUS`).

Only arithmetic lives here; packets are built lazily by the queue pair so that a 1 MiB message
does not allocate 256 objects up front.
"""

from __future__ import annotations

from podsim.fabric.packet import RETH_BYTES, ROCE_OVERHEAD

__all__ = [
    "MTUS",
    "OPCODES",
    "OP_SEND",
    "OP_WRITE",
    "RETH_BYTES",
    "ROCE_OVERHEAD",
    "check_mtu",
    "check_opcode",
    "message_wire_bytes",
    "packet_count",
    "packet_payload",
    "packet_wire_bytes",
]

#: Path MTUs a RoCE QP may negotiate (IBTA); Ethernet fabrics use 1024, 2048 or 4096.
MTUS = (256, 512, 1024, 2048, 4096)

#: Opcodes as small ints (hot path); names are accepted at the API edge.
OP_WRITE = 0
OP_SEND = 1
OPCODES = {"write": OP_WRITE, "send": OP_SEND}


def check_mtu(mtu: int) -> int:
    """``mtu`` as an int if it is a RoCE path MTU, else a ValueError naming the choices."""
    if isinstance(mtu, bool) or not isinstance(mtu, int) or mtu not in MTUS:
        raise ValueError(f"mtu {mtu!r} is not a RoCE path MTU; expected one of {MTUS}")
    return int(mtu)


def check_opcode(op: str | int) -> int:
    """The int opcode for ``"write"``/``"send"`` (or an int opcode that already is one)."""
    if isinstance(op, str):
        try:
            return OPCODES[op.lower()]
        except KeyError:
            raise ValueError(
                f"opcode {op!r} is not supported; expected one of {sorted(OPCODES)}"
            ) from None
    if op in (OP_WRITE, OP_SEND) and not isinstance(op, bool):
        return int(op)
    raise ValueError(f"opcode {op!r} is not supported; expected one of {sorted(OPCODES)}")


def packet_count(size: int, mtu: int) -> int:
    """Packets needed for a ``size``-byte message at path MTU ``mtu`` (>= 1)."""
    if size < 0:
        raise ValueError(f"message size {size!r} is negative; expected bytes >= 0")
    return max(1, -(-size // mtu))


def packet_payload(index: int, npkts: int, size: int, mtu: int) -> int:
    """Payload bytes of packet ``index`` (0-based) of an ``npkts``-packet message."""
    if index < npkts - 1:
        return mtu
    return size - mtu * (npkts - 1)


def packet_wire_bytes(payload: int, first: bool, opcode: int) -> int:
    """Bytes on the wire (incl. preamble/IFG) of one packet carrying ``payload`` bytes."""
    return payload + ROCE_OVERHEAD + (RETH_BYTES if first and opcode == OP_WRITE else 0)


def message_wire_bytes(size: int, mtu: int, opcode: int = OP_WRITE) -> int:
    """Closed form: total wire bytes of a message (payload + per-packet overhead + RETH)."""
    n = packet_count(size, mtu)
    return size + n * ROCE_OVERHEAD + (RETH_BYTES if opcode == OP_WRITE else 0)
