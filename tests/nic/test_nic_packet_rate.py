"""The packet-rate pipeline: small messages are bound by the NIC's 400 Mpps, not the wire."""

from __future__ import annotations

import pytest
import simpy
from podsim.fabric.network import Network
from podsim.fabric.packet import MIN_WIRE_BYTES, RETH_BYTES, ROCE_OVERHEAD
from podsim.fabric.topology import build_topology
from podsim.nic.nic import NicConfig, RdmaNetwork

PPS = 400e6  # docs/physics.md: the brief's SmartNIC processes 400 Mpps
N_MSGS = 4000


def message_rate(size: int, op: str, planes: int, pps: float = PPS) -> float:
    """Post N_MSGS one-packet messages at once on one QP; rate at which they leave the NIC."""
    env = simpy.Environment()
    net = Network(env, build_topology("star", hosts=2, planes=planes), seed=1)
    rdma = RdmaNetwork(net, NicConfig(cc="none", selector="spray", pps=pps), seed=1)
    msgs = [rdma.post(0, 1, size, op=op) for _ in range(N_MSGS)]
    rdma.run()
    assert all(m.done for m in msgs)
    return (N_MSGS - 1) / (msgs[-1].start_s - msgs[0].start_s)


def line_pps(size: int, op: str, planes: int) -> float:
    wire = max(size + ROCE_OVERHEAD + (RETH_BYTES if op == "write" else 0), MIN_WIRE_BYTES)
    return planes * 400e9 / (8 * wire)


def test_64b_writes_are_packet_rate_bound_on_a_two_port_nic() -> None:
    """64 B WRITEs: 162 B on the wire (82 B RoCEv2 + 16 B RETH), so two 400G ports could carry
    617 Mpps; the pipeline allows 400 Mpps and that is what the NIC sends."""
    assert line_pps(64, "write", 2) > PPS
    assert message_rate(64, "write", planes=2) == pytest.approx(PPS, rel=1e-3)


def test_minimum_frames_are_packet_rate_bound_on_one_port() -> None:
    """2 B SENDs are minimum 64 B Ethernet frames (84 B with preamble/IFG): 595 Mpps of line
    rate at 400 Gb/s (docs/physics.md), but the NIC processes 400 Mpps."""
    assert line_pps(2, "send", 1) == pytest.approx(595.2e6, rel=1e-3)
    assert message_rate(2, "send", planes=1) == pytest.approx(PPS, rel=1e-3)


def test_rate_is_the_lower_of_packet_rate_and_line_rate() -> None:
    """On one 400G port a 64 B WRITE (162 B of wire) is line-rate bound at 308.6 Mpps; a
    faster pipeline changes nothing, a slower one (200 Mpps) binds."""
    line = line_pps(64, "write", 1)
    assert line < PPS
    assert message_rate(64, "write", planes=1) == pytest.approx(line, rel=1e-3)
    assert message_rate(64, "write", planes=1, pps=200e6) == pytest.approx(200e6, rel=1e-3)
