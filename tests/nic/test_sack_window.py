"""Bounded SACK bitmaps (UEC 1.0's 64-bit ACK_CC bitmap): the receiver reports only the window at
:func:`sack_base`, and the sender's selective repeat stays exact with that partial view: nothing
unreceived is ever treated as delivered, every byte arrives exactly once, and RACK declares lost
only PSNs an ACK reports missing. The property over any arrival order, loss and width is
tests/nic/test_transport_logic.py::test_random_loss_and_reordering_deliver_every_byte_once."""

from __future__ import annotations

import pytest
from podsim.nic.nic import NicConfig, nic_model
from podsim.nic.transport.reliability import (
    ACK,
    ReceiverReliability,
    SenderReliability,
    sack_base,
)

ONES64 = (1 << 64) - 1


def _held(r: ReceiverReliability, psn: int) -> bool:
    return psn < r.rcv_nxt or bool((r.ooo_bits >> (psn - r.rcv_nxt)) & 1)


def _ack(s: SenderReliability, r: ReceiverReliability, psn: int, now: float) -> int:
    """What the NIC does for an ACK triggered by data PSN ``psn``: build it, feed it back."""
    return s.on_ack(r.rcv_nxt, r.sack_report(psn), now, psn)


def test_sack_base_ends_the_window_at_the_arriving_psn() -> None:
    assert sack_base(0, 10, 64) == 1  # never at or below the cumulative PSN
    assert sack_base(0, 100, 64) == 37  # 37..100: 64 PSNs ending at the arriving one
    assert sack_base(50, 100, 64) == 51
    assert sack_base(5, 3, 64) == 6  # a duplicate below cum


def test_receiver_reports_only_the_window_hand_checked() -> None:
    """PSN 0 missing, 1..150 held (more than 64 out of order): each ACK reports the 64 PSNs
    ending at its trigger; the unbounded receiver reports all 150."""
    r = ReceiverReliability("sr", sack_bits=64)
    u = ReceiverReliability("sr")
    for p in range(1, 151):
        if p != 120:
            assert r.on_data(p, 100, False, False) == ACK
            u.on_data(p, 100, False, False)
        if p == 10:
            assert r.sack_report(10) == 0b111_1111_1110  # PSNs 1..10 (the window 1..64)
    assert r.rcv_nxt == 0 and r.ooo_bits == u.ooo_bits
    assert r.sack_report(10) == ONES64 << 1  # the window starts at cum + 1: PSNs 1..64
    assert r.sack_report(100) == ONES64 << 37  # PSNs 37..100
    assert r.sack_report(150) == (ONES64 << 87) & ~(1 << 120)  # 87..150 without the hole 120
    assert u.sack_report(150) == u.ooo_bits and u.ooo_bits.bit_length() == 151
    assert ReceiverReliability("sr", sack_bits=0).sack_report(5) == 0


def _send_range(s: SenderReliability, n: int, size: int = 100) -> None:
    s.post(n)
    for psn in range(n):
        assert s.pick() == psn
        s.on_send(psn, size, psn * 1e-6)


@pytest.mark.parametrize("bits", [64, None])
def test_unreported_psns_are_neither_sacked_nor_lost(bits) -> None:
    """101 PSNs sent 1 us apart; PSN 0 lost, 1..100 arrive but only the ACK of PSN 100 reaches
    the sender. With 64 bits it SACKs 37..100 only: 1..36 are unknown, neither SACKed (they
    may be missing) nor lost (they may have arrived), and only PSN 0, the cumulative PSN, is
    resent. The unbounded bitmap SACKs 1..100 at once. Either way every byte is acknowledged
    once after PSN 0's retransmission."""
    s = SenderReliability("sr", reo_factor=1.0, reo_min_s=5e-6, sack_bits=bits)
    r = ReceiverReliability("sr", sack_bits=bits)
    _send_range(s, 101)
    for p in range(1, 101):
        r.on_data(p, 100, False, False)
    newly = _ack(s, r, 100, 101e-6)
    sacked = [p for p in range(101) if s.is_acked(p)]
    if bits == 64:
        assert sacked == list(range(37, 101)) and newly == 6400
        assert s.inflight_bytes == 3600  # 1..36 still in flight as far as the sender knows
    else:
        assert sacked == list(range(1, 101)) and newly == 10000 and s.inflight_bytes == 0
    assert s.n_lost == 1 and s.pick() == 0
    s.on_send(0, 100, 102e-6)
    assert s.pick() == -1 and s.retransmits == 1  # nothing else resent
    r.on_data(0, 100, True, False)
    assert _ack(s, r, 0, 103e-6) == (3700 if bits == 64 else 100)
    assert s.done() and s.acked_bytes == r.delivered_bytes == 10100 and s.inflight_bytes == 0


def test_rack_finds_holes_inside_windows_and_the_cumulative_psn() -> None:
    """PSNs 0 and 50 of 130 lost, every other ACK arrives: the windows of PSNs 51..113 cover
    PSN 50 and every ACK names PSN 0 as its cumulative PSN, so RACK resends both and nothing
    else; then delivery completes."""
    s = SenderReliability("sr", reo_factor=1.0, reo_min_s=5e-6, sack_bits=64)
    r = ReceiverReliability("sr", sack_bits=64)
    _send_range(s, 130)
    for p in range(1, 130):
        if p != 50:
            r.on_data(p, 100, False, False)
            _ack(s, r, p, 130e-6 + p * 1e-9)
    assert s.n_lost == 2 and [s.pick()] == [0]
    for k, p in enumerate((0, 50)):
        assert s.pick() == p
        s.on_send(p, 100, 140e-6 + k * 1e-6)
    assert s.pick() == -1 and s.retransmits == 2
    for p in (0, 50):
        r.on_data(p, 100, True, False)
        _ack(s, r, p, 150e-6)
    assert s.done() and s.acked_bytes == r.delivered_bytes == 13000


def test_a_hole_outside_every_window_is_found_once_it_is_the_cumulative_psn() -> None:
    """PSNs 0 and 50 lost; only ACKs of PSNs 120..129 arrive (windows 57.. up): PSN 50 is
    outside all of them, so only PSN 0 is declared lost. Once PSN 0's retransmission arrives
    the cumulative PSN is 50 and the next ACK's RACK check resends it."""
    s = SenderReliability("sr", reo_factor=1.0, reo_min_s=5e-6, sack_bits=64)
    r = ReceiverReliability("sr", sack_bits=64)
    _send_range(s, 130)
    for p in range(1, 130):
        if p != 50:
            r.on_data(p, 100, False, False)
            if p >= 120:
                _ack(s, r, p, 130e-6)
    assert s.n_lost == 1 and s.pick() == 0
    s.on_send(0, 100, 140e-6)
    r.on_data(0, 100, True, False)
    _ack(s, r, 0, 150e-6)
    assert s.snd_una == 50 and s.n_lost == 1 and s.pick() == 50
    s.on_send(50, 100, 151e-6)
    r.on_data(50, 100, True, False)
    _ack(s, r, 50, 160e-6)
    assert s.done() and s.retransmits == 2 and s.acked_bytes == r.delivered_bytes == 13000


def test_presets_and_config_validation() -> None:
    assert nic_model("uec").sack_bits == 64
    assert nic_model("smartnic-400g").sack_bits == 64
    assert nic_model("roce").sack_bits is None  # go-back-N: no SACK
    assert nic_model("cx7-ib").sack_bits == 0  # IB's AETH carries no SACK
    assert NicConfig.from_mapping({"sack_bits": None}).sack_bits is None
    for bad in (-1, 2.5, True):
        with pytest.raises(ValueError, match="sack_bits"):
            NicConfig(sack_bits=bad)
    with pytest.raises(ValueError, match="SACK bitmap width"):
        SenderReliability("sr", sack_bits=-3)


def _spray_run(sack_bits, monkeypatch=None, seen=None):
    """16 hosts on a 2:1 leaf-spine, host i sends 256 KiB to host i+4 with packet spraying."""
    import simpy
    from podsim.fabric.network import Network
    from podsim.fabric.topology import build_topology
    from podsim.nic.nic import RdmaNetwork

    if monkeypatch is not None:
        orig = SenderReliability.on_ack

        def on_ack(self, cum, bits, now, psn=-1):
            w = self.sack_bits
            if w is not None:
                window = ((1 << w) - 1) << (sack_base(cum, psn, w) - cum)
                seen.append((bits & ~window == 0, bits.bit_length() > w + 1))
            return orig(self, cum, bits, now, psn)

        monkeypatch.setattr(SenderReliability, "on_ack", on_ack)
    env = simpy.Environment()
    g = build_topology("leaf-spine", hosts_per_leaf=4, leaves=4, oversubscription=2)
    net = Network(env, g, seed=3)
    cfg = NicConfig(cc="dcqcn", selector="spray", reliability="sr", sack_bits=sack_bits)
    rdma = RdmaNetwork(net, cfg, seed=3)
    for i in range(16):
        rdma.post(i, (i + 4) % 16, 256 << 10)
    rdma.run()
    return rdma.message_table(), rdma.qp_table()


@pytest.mark.pure_python  # patches SenderReliability.on_ack
def test_packet_fabric_acks_stay_in_their_window_and_deliver_everything(monkeypatch) -> None:
    """On the packet fabric with spraying, a 4-bit bitmap: every ACK's bitmap lies inside its
    window, some reach beyond 5 PSNs above the cumulative one (reordering wider than the
    window happens), every message completes with all its bytes, and a rerun is identical."""
    seen: list[tuple[bool, bool]] = []
    msgs, qps = _spray_run(4, monkeypatch, seen)
    assert seen and all(inside for inside, _ in seen)
    assert any(far for _, far in seen)
    assert msgs.done_s.notna().all() and len(msgs) == 16
    assert qps.acked_bytes.sum() == qps.rx_delivered_bytes.sum() == 16 * (256 << 10)
    monkeypatch.undo()
    msgs2, qps2 = _spray_run(4)
    assert msgs.equals(msgs2) and qps.equals(qps2)


def test_a_retransmission_exposes_the_next_cumulative_hole_with_nothing_sacked() -> None:
    """PSNs 0..5, 0 and 5 lost, only the ACK of PSN 4 arrives: PSN 0 is resent. Its arrival
    moves the cumulative PSN to 5 with nothing SACKed above it; PSN 0's retransmission, sent
    after PSN 5 and delivered, shows PSN 5 lost at once (RACK on the cumulative PSN) rather than
    after a tail probe or timeout."""
    s = SenderReliability("sr", reo_factor=1.0, reo_min_s=1e-6, sack_bits=64)
    r = ReceiverReliability("sr", sack_bits=64)
    _send_range(s, 6)
    for p in (1, 2, 3, 4):
        r.on_data(p, 100, False, False)
    _ack(s, r, 4, 20e-6)
    assert s.n_lost == 1 and s.pick() == 0
    s.on_send(0, 100, 21e-6)
    r.on_data(0, 100, True, False)
    _ack(s, r, 0, 23e-6)
    assert s.snd_una == 5 and s.n_lost == 1 and s.pick() == 5


def test_a_hole_reported_missing_is_lost_once_rack_time_passes_outside_the_window() -> None:
    """200 PSNs sent 50 ns apart, PSNs 10 and 20 lost, every other ACK arrives; RACK's window
    is 5 us (100 PSNs here), more than 64 PSNs: PSN 20 has left the 64-bit window before a
    packet sent 5 us after it arrives. The windows of PSNs 21..84 reported it missing, so it is
    declared lost then (PSN 10 as the cumulative PSN), not only after PSN 10's repair; no
    other PSN is resent."""
    s = SenderReliability("sr", reo_factor=1.0, reo_min_s=5e-6, sack_bits=64)
    r = ReceiverReliability("sr", sack_bits=64)
    s.post(200)
    for p in range(200):
        s.on_send(s.pick(), 100, p * 50e-9)
    for p in range(200):
        if p not in (10, 20):
            r.on_data(p, 100, False, False)
            _ack(s, r, p, 20e-6)
    assert s.n_lost == 2 and s.pick() == 10
    s.on_send(10, 100, 21e-6)
    assert s.pick() == 20
    s.on_send(20, 100, 21e-6)
    assert s.pick() == -1
    for p in (10, 20):
        r.on_data(p, 100, True, False)
        _ack(s, r, p, 22e-6)
    assert s.done() and s.retransmits == 2 and s.acked_bytes == r.delivered_bytes == 20000
