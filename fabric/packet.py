# cython: language_level=3, annotation_typing=False
"""Packets: the small objects that move through ports and switches.

One :class:`Packet` is one frame on the wire (or, with a ``cell`` above the MTU, one burst of
frames: then ``overhead`` should be the per-frame overhead times the frames in the burst). Sizes
are bytes, times seconds.

Wire size (docs/physics.md, "400GbE over 112G PAM4"): RoCEv2 adds 82 B per packet on the wire
(20 B preamble+IFG, 18 B Ethernet+FCS, 20 B IPv4, 8 B UDP, 12 B BTH, 4 B ICRC); RETH adds 16 B
on the first packet of an RDMA WRITE. An Ethernet frame is at least 64 B, so no packet occupies
less than 64 + 20 = 84 B of wire time.

InfiniBand (IBTA Architecture Specification vol. 1, ch. 5 "Data packet format", 7.7 "Local route
header", 7.8 "CRCs", 9.2 "Base transport header", 9.3.3 "RETH") carries LRH 8 + BTH 12 + ICRC 4
+ VCRC 2 = 26 B per packet (RETH +16 B on a WRITE's first packet likewise) and has no Ethernet
preamble, inter-frame gap, FCS or minimum frame: its least packet is those 26 B.
:func:`link_framing` gives each link layer's pair (overhead, least wire bytes).

A packet in flight is also a SimPy event (see :mod:`fabric.kernel`): the transmitting port sets
``callbacks`` to the receiver and pushes the packet onto the event heap. Transports must not
touch ``callbacks`` or ``link``.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "ACK",
    "CNP",
    "CONTROL_KINDS",
    "DATA",
    "IB_MIN_WIRE_BYTES",
    "IB_OVERHEAD",
    "KIND_NAMES",
    "LINK_FRAMING",
    "MAX_DATA_WIRE_BYTES",
    "MIN_WIRE_BYTES",
    "NACK",
    "PAUSE",
    "PAUSE_FRAME_WIRE_BYTES",
    "PROBE",
    "RESUME",
    "RETH_BYTES",
    "ROCE_OVERHEAD",
    "Packet",
    "link_framing",
]

#: RoCEv2 per-packet wire overhead in bytes (docs/physics.md [S]).
ROCE_OVERHEAD = 82
#: RDMA Extended Transport Header, first packet of a WRITE (docs/physics.md [S]).
RETH_BYTES = 16
#: Minimum Ethernet frame (64 B) plus preamble+IFG (20 B): the least wire time of any frame.
MIN_WIRE_BYTES = 84
#: InfiniBand per-packet overhead: LRH 8 + BTH 12 + ICRC 4 + VCRC 2 B [S: IBTA vol. 1 ch. 5, 7.7,
#: 7.8, 9.2]. No preamble, IFG or FCS (the link layer's VCRC replaces the FCS).
IB_OVERHEAD = 8 + 12 + 4 + 2
#: InfiniBand has no minimum packet size beyond its headers [S: IBTA vol. 1 ch. 5].
IB_MIN_WIRE_BYTES = IB_OVERHEAD
#: Per link layer (``cluster.nic.link_layer``): (bytes of wire beyond each packet's payload,
#: least wire bytes of any packet).
LINK_FRAMING = {
    "ethernet": (ROCE_OVERHEAD, MIN_WIRE_BYTES),
    "infiniband": (IB_OVERHEAD, IB_MIN_WIRE_BYTES),
}
#: A PFC (802.1Qbb) pause frame is a minimum-size MAC control frame.
PAUSE_FRAME_WIRE_BYTES = 84
#: The largest DATA frame podsim builds: a 4096 B payload (the largest RoCE / InfiniBand path
#: MTU, IBTA) with the 82 B overhead and a RETH. A credit-controlled link stops when fewer
#: credits than this remain (:meth:`podsim.fabric.port.Port.enable_credits`).
MAX_DATA_WIRE_BYTES = 4096 + ROCE_OVERHEAD + RETH_BYTES

# Kinds: DATA is 0 so the hot path can test ``if pkt.kind`` for "control". Control kinds travel
# in the port's strict-priority queue, are never ECN-marked, never paused by PFC and never
# stamped with INT. PAUSE/RESUME are link-local MAC frames created by switches.
DATA = 0
ACK = 1
NACK = 2
CNP = 3
PROBE = 4
PAUSE = 5
RESUME = 6
KIND_NAMES = ("data", "ack", "nack", "cnp", "probe", "pause", "resume")
CONTROL_KINDS = (ACK, NACK, CNP, PROBE)


class Packet:
    """One packet. Plain attributes, no methods on the hot path.

    Fields (all public; the transport owns the ones it sets):

    ``size``      payload bytes (what the message accounting counts);
    ``wire``      bytes of wire time: max(size + overhead, 84); serialisation = 8*wire/rate;
    ``kind``      DATA, ACK, NACK, CNP, PROBE (PAUSE/RESUME are the switches' own);
    ``flow``      flow/QP id (int), hashed with ``ev`` for ECMP;
    ``src, dst``  endpoint ids (``Network.endpoint_id(name)``); switches route on ``dst``;
    ``psn``       packet sequence number;
    ``ev``        entropy value (UEC EV / UDP source port): fixed per flow = one path,
                  varied per packet = spraying;
    ``ecn``       congestion-experienced mark (set by switches on DATA packets);
    ``tc``        traffic class (index into the network's :class:`~podsim.fabric.classes.
                  TrafficClasses`; 0 by default; PFC frames carry the class they pause);
    ``ts``        send timestamp (set by the sender); ``ts_echo`` a timestamp echoed back;
    ``int_rec``   None, or a list to which every switch egress appends
                  ``(qlen_bytes, tx_bytes, time_s, rate_bps)`` (HPCC INT; ask by passing []);
    ``meta``      free slot for the transport (message, QP, SACK info, ...).

    ``link`` (the port that last transmitted it) and ``callbacks`` belong to the fabric.
    """

    __slots__ = (
        "callbacks",
        "dst",
        "ecn",
        "ev",
        "flow",
        "int_rec",
        "kind",
        "link",
        "meta",
        "psn",
        "size",
        "src",
        "tc",
        "ts",
        "ts_echo",
        "wire",
    )
    _ok = True  # SimPy event protocol: a delivered packet never "fails"

    def __init__(
        self,
        size: int,
        src: int,
        dst: int,
        flow: int = 0,
        psn: int = 0,
        ev: int = 0,
        kind: int = DATA,
        overhead: int = ROCE_OVERHEAD,
        ts: float = 0.0,
        meta: Any = None,
        int_rec: list | None = None,
    ) -> None:
        self.size = size
        w = size + overhead
        self.wire = w if w > MIN_WIRE_BYTES else MIN_WIRE_BYTES
        self.src = src
        self.dst = dst
        self.flow = flow
        self.psn = psn
        self.ev = ev
        self.kind = kind
        self.ecn = False
        self.tc = 0
        self.ts = ts
        self.ts_echo = 0.0
        self.meta = meta
        self.int_rec = int_rec
        self.link = None
        self.callbacks = None

    def __repr__(self) -> str:
        kind = KIND_NAMES[self.kind] if 0 <= self.kind < len(KIND_NAMES) else self.kind
        return (
            f"Packet({kind} {self.src}->{self.dst} flow={self.flow} psn={self.psn} "
            f"size={self.size} wire={self.wire} ev={self.ev} ecn={self.ecn})"
        )


def link_framing(link_layer: str) -> tuple[int, int]:
    """``(overhead, least wire bytes)`` per packet of a link layer (``ethernet`` = RoCEv2,
    ``infiniband``); see :data:`LINK_FRAMING`."""
    try:
        return LINK_FRAMING[link_layer]
    except KeyError:
        raise ValueError(
            f"link_layer={link_layer!r}: expected one of {sorted(LINK_FRAMING)}"
        ) from None
