"""InfiniBand RC loss recovery on the packet fabric (``cx7-ib``): the responder's PSN sequence
error NAK (IBTA vol. 1 ch. 9.7) and the requester's go-back-N, with and without reordering."""

from __future__ import annotations

import simpy
from podsim.fabric.network import Network
from podsim.fabric.topology import build_topology
from podsim.nic.nic import RdmaNetwork, nic_model

SIZE = 64 * 4096  # 64 packets of a 4 KiB MTU
LOST_PSN = 10


def _run(drop: bool, **overrides):
    """Host 0 (leaf0) sends one 64-packet message to host 4 (leaf1) on a 2 x 4 leaf-spine;
    with ``drop`` the first copy of PSN 10 dies on the last link."""
    env = simpy.Environment()
    net = Network(env, build_topology("leaf-spine", hosts_per_leaf=4, leaves=2), seed=1)
    rdma = RdmaNetwork(net, nic_model("cx7-ib", **overrides), seed=1)
    msg = rdma.post(0, 4, SIZE)
    port = net.downlink(rdma.nic(4).endpoints[0])
    inner = port.receiver
    seen: list[tuple[int, float]] = []  # (PSN, arrival time) of every data packet

    def receive(pkt) -> None:
        if not pkt.kind:
            seen.append((pkt.psn, env.now))
            if drop and pkt.psn == LOST_PSN and sum(p == LOST_PSN for p, _ in seen) == 1:
                return
        inner(pkt)

    port.set_receiver(receive)
    rdma.run()
    return rdma, msg, seen


def test_a_single_loss_recovers_by_one_nak_within_about_one_round_trip() -> None:
    """One PSN lost on an in-order path (one ECMP path, no adaptive routing): the next packet
    is a sequence error, the responder NAKs it once (not again for the 50-odd packets that
    follow), and the requester goes back to PSN 10 at once. The resend reaches the responder
    within one round trip of the first packet after the hole (the NAK loop) plus the time to
    send what was already queued: far below the 100 us RTO, no timeout, no tail probe. Every
    byte is delivered once and acknowledged."""
    _, base_msg, _ = _run(drop=False)
    _, msg, seen = _run(drop=True)
    qp = msg.qp
    assert qp.reorders is False
    rtt = qp.fcc.base_rtt_s
    assert qp.rx.nacks == 1 and qp.nacks_rcvd == 1  # exactly one NAK for the sequence error
    assert qp.snd.timeouts == 0 and qp.tlp_probes == 0
    first_after = next(t for p, t in seen if p == LOST_PSN + 1)
    resent = [t for p, t in seen if p == LOST_PSN][1]
    assert resent - first_after < 1.5 * rtt, (resent - first_after, rtt)
    # go-back-N: what was sent behind the hole is sent again (duplicates at the responder,
    # which had placed the originals), and nothing else
    assert 1 <= qp.snd.retransmits <= 64 - LOST_PSN
    again = sum(1 for p, _ in seen if p > LOST_PSN) - (63 - LOST_PSN)
    assert again > 0 and qp.rx.dup_pkts == again
    assert qp.rx.delivered_bytes == SIZE and qp.snd.acked_bytes == SIZE
    extra = msg.done_s - base_msg.done_s
    assert 0 < extra < 3 * rtt, (extra, rtt)
    assert base_msg.qp.rx.nacks == 0 and base_msg.qp.snd.retransmits == 0


def test_without_the_nak_the_same_loss_waits_for_the_timeout() -> None:
    """Control: with sequence_nak off (IB's ACK has no SACK) nothing reports the hole: the
    tail probe resends the last PSN, whose ACK says nothing new, and the RTO recovers it, so
    the message completes at least half an RTO later than with the NAK."""
    _, with_nak, _ = _run(drop=True)
    rdma, msg, _ = _run(drop=True, seq_nak=False)
    assert msg.qp.rx.nacks == 0 and msg.qp.snd.timeouts == 1
    assert msg.done_s - with_nak.done_s > rdma.config.rto_min_s / 2


def _ar_permutation(monkeypatch=None):
    """16 hosts on a non-blocking k=4 fat-tree with InfiniBand credit flow control (lossless)
    and switch adaptive routing; host i sends 256 KiB to host (i + 5) mod 16 (most cross the
    core): AR sends each QP's packets over several paths, so they arrive out of order."""
    from podsim.fabric.switch import SwitchConfig
    from podsim.fabric.topology import fat_tree

    env = simpy.Environment()
    cfg = SwitchConfig(adaptive=True, credit_buffer_bytes=256 << 10)
    net = Network(env, fat_tree(k=4), cfg, seed=3)
    rdma = RdmaNetwork(net, nic_model("cx7-ib"), seed=3)
    if monkeypatch is not None:  # as if every QP took its packets to stay in order
        monkeypatch.setattr(rdma, "_switch_ar", False)
    for i in range(16):
        rdma.post(i, (i + 5) % 16, SIZE)
    rdma.run()
    return net, rdma


def test_adaptive_routing_reordering_never_triggers_go_back_n(monkeypatch) -> None:
    """Lossless fabric, switch AR: packets arrive out of order and the responders do NAK the
    sequence errors they see (they cannot tell reordering from loss), but each QP knows its
    packets may be reordered and goes back only for a PSN overdue by RACK's window: no packet
    is sent twice and every byte arrives once. The control, the same run with QPs that take
    every NAK as a loss (in-order paths), does resend packets: the wait is what prevents it."""
    net, rdma = _ar_permutation()
    q = rdma.qp_table()
    assert net.dropped_packets() == 0
    assert all(qp.reorders for qp in rdma._qp_list)
    assert int(q.nacks_sent.sum()) > 0  # reordering happened and was NAKed
    assert (q.nacks_rcvd == q.nacks_sent).all()
    assert int(q.retx_pkts.sum()) == 0 and int(q.timeouts.sum()) == 0
    assert (q.rx_delivered_bytes == SIZE).all() and (q.acked_bytes == SIZE).all()
    _net, strict = _ar_permutation(monkeypatch)
    assert int(strict.qp_table().retx_pkts.sum()) > 0
