"""Packets: wire size, slots, kinds."""

from __future__ import annotations

import pytest
from podsim.fabric.packet import (
    ACK,
    DATA,
    KIND_NAMES,
    MIN_WIRE_BYTES,
    PAUSE,
    ROCE_OVERHEAD,
    Packet,
)


def test_roce_overhead_is_the_sum_of_its_headers():
    # docs/physics.md: 20 preamble+IFG, 18 Eth+FCS, 20 IPv4, 8 UDP, 12 BTH, 4 ICRC
    assert ROCE_OVERHEAD == 20 + 18 + 20 + 8 + 12 + 4


@pytest.mark.parametrize("size", [1, 100, 1024, 4096, 65536])
def test_wire_is_payload_plus_overhead(size):
    p = Packet(size, 0, 1)
    assert p.wire == max(size + 82, 84)
    assert p.size == size


def test_minimum_frame_padding():
    # a 64 B minimum Ethernet frame + 20 B preamble/IFG: an empty ACK still takes 84 B of wire
    assert Packet(0, 0, 1, kind=ACK).wire == MIN_WIRE_BYTES == 84
    assert Packet(2, 0, 1).wire == 84
    assert Packet(3, 0, 1).wire == 85


def test_custom_overhead_for_cells():
    # a 64 KiB cell standing for 16 x 4 KiB packets carries 16 x 82 B of overhead
    p = Packet(65536, 0, 1, overhead=16 * ROCE_OVERHEAD)
    assert p.wire == 65536 + 16 * 82


def test_slots_no_dict_and_defaults():
    p = Packet(10, 3, 4, flow=7, psn=9, ev=11, ts=1.5, meta="m")
    assert not hasattr(p, "__dict__")
    with pytest.raises(AttributeError):
        p.colour = "red"  # type: ignore[attr-defined]
    assert (p.src, p.dst, p.flow, p.psn, p.ev, p.ts, p.meta) == (3, 4, 7, 9, 11, 1.5, "m")
    assert p.kind == DATA and p.ecn is False and p.int_rec is None and p.link is None


def test_kinds_and_repr():
    assert KIND_NAMES[DATA] == "data" and KIND_NAMES[PAUSE] == "pause"
    assert DATA == 0  # the hot path relies on "if pkt.kind" meaning "control"
    assert "ack" in repr(Packet(0, 1, 2, kind=ACK))
