"""Pure-logic tests of the transport: segmentation, PSN/SACK state machines, reorder buffer,
path selectors and the packet-rate pipeline (no fabric needed)."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from podsim.fabric.packet import RETH_BYTES, ROCE_OVERHEAD
from podsim.nic.transport.pipeline import PacketPipeline, QpContextCache
from podsim.nic.transport.reliability import (
    ACK,
    NACK,
    NONE,
    SEQ_NAK,
    ReceiverReliability,
    ReorderBuffer,
    SenderReliability,
    check_mode,
)
from podsim.nic.transport.segmentation import (
    OP_SEND,
    OP_WRITE,
    check_mtu,
    check_opcode,
    message_wire_bytes,
    packet_count,
    packet_payload,
    packet_wire_bytes,
)
from podsim.nic.transport.selectors import PATH_SELECTORS, make_selector, randbelow

# ---------------------------------------------------------------------------- segmentation


@pytest.mark.parametrize("mtu", [1024, 2048, 4096])
@pytest.mark.parametrize("size", [0, 1, 64, 1023, 1024, 1025, 4096, 1 << 20, 1_000_003])
def test_segmentation_sums_to_message(size: int, mtu: int) -> None:
    n = packet_count(size, mtu)
    assert n == max(1, -(-size // mtu))
    payloads = [packet_payload(i, n, size, mtu) for i in range(n)]
    assert sum(payloads) == size
    assert all(0 <= p <= mtu for p in payloads)
    assert all(p == mtu for p in payloads[:-1])
    for op in (OP_WRITE, OP_SEND):
        wire = sum(packet_wire_bytes(p, i == 0, op) for i, p in enumerate(payloads))
        reth = RETH_BYTES if op == OP_WRITE else 0
        assert wire == size + n * ROCE_OVERHEAD + reth == message_wire_bytes(size, mtu, op)


def test_segmentation_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="mtu 1500"):
        check_mtu(1500)
    with pytest.raises(ValueError, match="opcode 'read'"):
        check_opcode("read")
    assert check_opcode("WRITE") == OP_WRITE
    with pytest.raises(ValueError, match="negative"):
        packet_count(-1, 1024)
    with pytest.raises(ValueError, match="'gbn' or 'sr'"):
        check_mode("tcp")


# ---------------------------------------------------------------------------- reliability


def _deliver(order, sender, receiver, payload=100, now=0.0, ack_loss=()):
    """Feed ``order`` (PSNs) to the receiver and every resulting ACK/NACK back to the sender."""
    for k, psn in enumerate(order):
        v = receiver.on_data(psn, payload, last=False, ecn=False)
        if k in ack_loss:
            continue
        if v == ACK:
            sender.on_ack(receiver.rcv_nxt, receiver.ooo_bits, now)
        elif v in (NACK, SEQ_NAK):
            sender.on_nack(receiver.nack_psn, now, seq=v == SEQ_NAK)


def _send_all(sender, now=0.0, size=100):
    sent = []
    while True:
        psn = sender.pick()
        if psn < 0:
            break
        sender.on_send(psn, size, now)
        sent.append(psn)
    return sent


def test_in_order_delivery_acks_everything() -> None:
    s, r = SenderReliability("sr"), ReceiverReliability("sr")
    s.post(10)
    assert _send_all(s) == list(range(10))
    assert s.inflight_bytes == 1000
    _deliver(range(10), s, r)
    assert s.done() and s.inflight_bytes == 0 and s.acked_bytes == 1000
    assert r.delivered_bytes == 1000 and r.dup_pkts == 0 and s.retransmits == 0


def test_ack_coalescing_every_n_and_on_last() -> None:
    r = ReceiverReliability("sr", ack_every=4)
    verdicts = [r.on_data(p, 10, last=(p == 9), ecn=False) for p in range(10)]
    assert [i for i, v in enumerate(verdicts) if v == ACK] == [3, 7, 9]
    r2 = ReceiverReliability("sr", ack_every=4)
    assert r2.on_data(0, 10, last=False, ecn=True) == ACK  # ECN forces an ACK


def _verdicts(r: ReceiverReliability, arrivals: list[tuple[int, bool]]) -> list[int]:
    return [r.on_data(p, 10, last=last, ecn=False) for p, last in arrivals]


def test_gap_fill_acks_at_once_only_with_ack_gap_fill() -> None:
    # PSN 0 goes missing behind 1, 2; it arrives third and fills the gap
    order = [(1, False), (2, False), (0, False), (3, False)]
    tcp = _verdicts(ReceiverReliability("sr", ack_every=4), order)
    assert tcp == [NONE, NONE, ACK, NONE]  # RFC 5681: the gap-filling segment is ACKed now
    uec = _verdicts(ReceiverReliability("sr", ack_every=4, ack_gap_fill=False), order)
    assert uec == [NONE, NONE, NONE, ACK]  # htsim UecSink: it only counts to the coalescing


def test_ack_request_across_a_gap_is_answered_again_when_the_gap_closes() -> None:
    # the last packet (an ACK request) overtakes PSNs 1 and 2: ACKed at once, and once more when
    # the gap closes, else the sender would wait for its timer (uec.cpp _ack_request)
    r = ReceiverReliability("sr", ack_every=8, ack_gap_fill=False)
    got = _verdicts(r, [(0, False), (3, True), (1, False), (2, False)])
    assert got == [NONE, ACK, NONE, ACK] and r.rcv_nxt == 4 and not r.ack_req
    # an ACK request that fills part of a gap: now, and again when the rest closes
    r = ReceiverReliability("sr", ack_every=8, ack_gap_fill=False)
    assert _verdicts(r, [(1, False), (3, False), (0, True), (2, False)]) == [NONE, NONE, ACK, ACK]
    # without a request, closing the gap is no reason to ACK
    r = ReceiverReliability("sr", ack_every=8, ack_gap_fill=False)
    assert _verdicts(r, [(1, False), (2, False), (0, False)]) == [NONE, NONE, NONE]


def test_gbn_receiver_drops_out_of_order_and_naks_once() -> None:
    r = ReceiverReliability("gbn")
    assert r.on_data(0, 10, False, False) == ACK
    assert r.on_data(2, 10, False, False) == SEQ_NAK and r.nack_psn == 1
    assert r.on_data(3, 10, False, False) == NONE  # one NAK per sequence-error episode
    assert r.ooo_drops == 2 and r.delivered_bytes == 10
    assert r.on_data(1, 10, False, False) == ACK and r.rcv_nxt == 2
    assert r.on_data(3, 10, False, False) == SEQ_NAK  # a new episode


def test_gbn_sender_rewinds_on_nack() -> None:
    s, r = SenderReliability("gbn"), ReceiverReliability("gbn")
    s.post(6)
    _send_all(s)
    _deliver([0, 2, 3, 4, 5], s, r)  # PSN 1 lost
    assert s.snd_una == 1 and s.snd_nxt == 1
    assert s.inflight_bytes == 0  # the rest were dropped by the receiver
    assert _send_all(s) == [1, 2, 3, 4, 5]
    assert s.retransmits == 5
    _deliver([1, 2, 3, 4, 5], s, r)
    assert s.done() and r.delivered_bytes == 600 and s.acked_bytes == 600


def test_sr_receiver_buffers_and_releases() -> None:
    rob = ReorderBuffer(10_000)
    r = ReceiverReliability("sr", rob=rob)
    for p in (1, 2, 4):
        assert r.on_data(p, 100, False, False) == ACK
    assert r.ooo_bits == 0b10110 and rob.used == 300 and r.ooo_pkts == 3
    assert r.on_data(0, 100, False, False) == ACK
    assert r.rcv_nxt == 3 and r.ooo_bits == 0b10 and rob.used == 100
    assert r.on_data(4, 100, False, False) == ACK and r.dup_pkts == 1 and r.dup_pending
    assert r.on_data(3, 100, False, False) == ACK and r.rcv_nxt == 5 and rob.used == 0
    assert r.delivered_bytes == 500 and rob.max_used == 300


def test_sr_reorder_buffer_full_naks_the_packet() -> None:
    rob = ReorderBuffer(150)
    r = ReceiverReliability("sr", rob=rob)
    assert r.on_data(1, 100, False, False) == ACK
    assert r.on_data(2, 100, False, False) == NACK and r.nack_psn == 2
    assert rob.drops == 1 and r.delivered_bytes == 100


def test_sequence_nak_receiver_places_and_naks_once_per_sequence_error() -> None:
    """InfiniBand RC with out-of-order placement (selective repeat + ``seq_nak``): an
    out-of-order packet is held (not dropped) and the first of a sequence error is answered
    with one PSN sequence error NAK for the expected PSN; none again until that PSN arrives
    (IBTA vol. 1 ch. 9.7); then a new gap is a new sequence error. Bytes count once."""
    r = ReceiverReliability("sr", sack_bits=0, seq_nak=True)
    assert r.on_data(0, 10, False, False) == ACK
    assert r.on_data(2, 10, False, False) == SEQ_NAK and r.nack_psn == 1
    assert r.on_data(3, 10, False, False) == ACK  # placed; the same sequence error
    assert r.on_data(5, 10, False, False) == ACK  # a second hole, still the same error
    assert r.ooo_drops == 0 and r.ooo_pkts == 3 and r.delivered_bytes == 40
    assert r.on_data(1, 10, False, False) == ACK and r.rcv_nxt == 4  # the expected PSN
    assert r.on_data(6, 10, False, False) == SEQ_NAK and r.nack_psn == 4  # a new error
    assert r.on_data(3, 10, False, False) == ACK and r.dup_pkts == 1  # duplicate: no NAK
    assert r.on_data(4, 10, False, False) == ACK and r.rcv_nxt == 7
    assert r.delivered_bytes == 70 and r.ooo_bits == 0
    # without seq_nak the same arrivals never NAK (the selective-repeat NIC presets)
    plain = ReceiverReliability("sr", sack_bits=0)
    assert [plain.on_data(p, 10, False, False) for p in (0, 2, 3)] == [ACK, ACK, ACK]


def test_sequence_nak_sender_goes_back_n_from_the_nakd_psn() -> None:
    """A selective-repeat sender told of a PSN sequence error at PSN 2 acknowledges 0-1 and
    resends 2, 3, 4, 5 in order (go-back-N, IBTA vol. 1 ch. 9.7); a reorder-buffer NACK
    (no ``seq``) resends its one PSN only; a stale NAK changes nothing."""
    s = SenderReliability("sr", sack_bits=0)
    s.post(6)
    _send_all(s)
    s.on_nack(2, 1e-6, seq=True)
    assert s.snd_una == 2 and s.acked_bytes == 200 and s.inflight_bytes == 0
    assert _send_all(s) == [2, 3, 4, 5] and s.retransmits == 4
    s.on_nack(1, 2e-6, seq=True)  # stale: below snd_una
    assert s.pick() == -1
    s2 = SenderReliability("sr", sack_bits=0)
    s2.post(6)
    _send_all(s2)
    s2.on_nack(4, 1e-6)  # the receiver's buffer was full for PSN 4
    assert _send_all(s2) == [4] and s2.snd_una == 0


def test_nak_lost_at_is_racks_deadline() -> None:
    """RFC 8985 6.2: lost once now >= xmit_ts + rtt + reo_wnd (latest transmission)."""
    s = SenderReliability("sr", reo_factor=0.5, reo_min_s=1e-6, sack_bits=0)
    s.post(3)
    for psn, t in ((0, 0.0), (1, 1e-6), (2, 2e-6)):
        s.on_send(psn, 100, t)
    s.srtt = 10e-6
    assert s.nak_lost_at(1, 10e-6) == pytest.approx(1e-6 + 10e-6 + 5e-6)
    s.on_nack(1, 3e-6, seq=True)
    s.on_send(1, 100, 20e-6)  # the resend moves the deadline
    assert s.nak_lost_at(1, 10e-6) == pytest.approx(20e-6 + 15e-6)


def test_sr_sender_retransmits_only_holes() -> None:
    s, r = SenderReliability("sr", reo_factor=0.25, reo_min_s=1e-6), ReceiverReliability("sr")
    s.post(8)
    for psn in range(8):  # sent 1 us apart
        assert s.pick() == psn
        s.on_send(psn, 100, psn * 1e-6)
    # PSN 2 lost; later ones arrive. Packets sent >= 1 us after PSN 2 are delivered -> lost.
    _deliver([0, 1, 3, 4, 5, 6, 7], s, r, now=10e-6)
    assert s.n_lost == 1 and s.pick() == 2
    assert s.inflight_bytes == 0
    s.on_send(2, 100, 11e-6)
    assert s.pick() == -1 and s.retransmits == 1
    _deliver([2], s, r, now=12e-6)
    assert s.done() and s.acked_bytes == 800 and r.delivered_bytes == 800


def test_sr_reordering_within_window_is_not_loss() -> None:
    s, r = SenderReliability("sr", reo_factor=1.0, reo_min_s=5e-6), ReceiverReliability("sr")
    s.post(4)
    for psn in range(4):
        s.on_send(s.pick(), 100, psn * 1e-6)
    _deliver([1, 2, 3, 0], s, r, now=4e-6)  # PSN 0 late by 3 us < 5 us window
    assert s.retransmits == 0 and s.done()


def test_sr_timeout_resends_only_unsacked() -> None:
    s, r = SenderReliability("sr"), ReceiverReliability("sr")
    s.post(5)
    _send_all(s)
    _deliver([1, 3], s, r)
    assert s.on_timeout(1.0)
    assert _send_all(s) == [0, 2, 4]
    assert s.timeouts == 1 and s.retransmits == 3
    _deliver([0, 2, 4], s, r)
    assert s.done() and s.inflight_bytes == 0
    assert not s.on_timeout(2.0)


def test_duplicate_report_widens_reorder_window() -> None:
    s = SenderReliability("sr", reo_factor=0.25, reo_min_s=0.0)
    s.srtt = 8e-6
    w0 = s.reorder_window()
    s.on_duplicate_report()
    assert s.reorder_window() == pytest.approx(2 * w0)


@settings(max_examples=250, deadline=None)
@given(
    mode=st.sampled_from(["gbn", "sr", "sr+nak"]),
    bits=st.sampled_from([0, 1, 3, 8, 64, None]),
    n=st.integers(1, 200),
    seed=st.integers(0, 10**6),
    loss=st.floats(0.0, 0.4),
    ack_loss=st.floats(0.0, 0.6),
)
def test_random_loss_and_reordering_deliver_every_byte_once(
    mode, bits, n, seed, loss, ack_loss
) -> None:
    """Any arrival order (bursts shuffled whole, so reordering spans up to all ``n`` PSNs),
    data loss, ACK loss and any SACK bitmap width (``bits``, None: unbounded): after every ACK
    no PSN the receiver does not hold is acknowledged (cumulatively or SACKed), the sender's
    acknowledged bytes are exactly those PSNs', and in the end every PSN is delivered exactly
    once and the sender's accounting closes (no byte lost or counted twice). ``sr+nak``:
    selective repeat whose receiver also NAKs each sequence error (InfiniBand RC with
    out-of-order placement), the sender going back N on every such NAK."""
    rng = random.Random(seed)
    seq_nak = mode == "sr+nak"
    mode = "sr" if seq_nak else mode
    s = SenderReliability(mode, reo_factor=0.5, reo_min_s=0.0, sack_bits=bits)
    r = ReceiverReliability(
        mode, rob=ReorderBuffer(rng.choice([300, 10**9])), sack_bits=bits, seq_nak=seq_nak
    )
    s.post(n)
    now = 0.0
    sizes = {p: 1 + (p * 37) % 100 for p in range(n)}
    una, stalled = 0, 0
    for _round in range(2000):
        burst = []
        while True:
            psn = s.pick()
            if psn < 0:
                break
            now += 1e-6
            s.on_send(psn, sizes[psn], now)
            burst.append(psn)
        rng.shuffle(burst)
        for psn in burst:
            if rng.random() < loss:
                continue
            v = r.on_data(psn, sizes[psn], last=False, ecn=False)
            if rng.random() < ack_loss:
                continue  # the ACK/NACK is lost
            if v == ACK:
                s.on_ack(r.rcv_nxt, r.sack_report(psn), now, psn)
                acked = [p for p in range(n) if s.is_acked(p)]
                held = r.rcv_nxt + r.ooo_bits.bit_length()
                assert all(
                    p < held and (p < r.rcv_nxt or r.ooo_bits >> (p - r.rcv_nxt) & 1) for p in acked
                )
                assert s.acked_bytes == sum(sizes[p] for p in acked)
            elif v in (NACK, SEQ_NAK):
                s.on_nack(r.nack_psn, now, seq=v == SEQ_NAK)
        assert s.inflight_bytes >= 0 and s.n_lost >= 0
        if s.done():
            break
        if s.snd_una > una:
            una, stalled = s.snd_una, 0
        else:
            stalled += 1
        if not s.has_data() or stalled > 5:  # the RTO: no cumulative progress for a while
            now += 1e-3
            s.on_timeout(now)
            stalled = 0
    assert s.done()
    assert r.rcv_nxt == n and r.ooo_bits == 0
    assert r.delivered_bytes == sum(sizes.values()) == s.acked_bytes
    assert s.inflight_bytes == 0 and r.rob.used == 0


# ---------------------------------------------------------------------------- selectors


@pytest.mark.parametrize("n", [1, 2, 3, 7, 64, 100, 1000, 65535, 65536])
def test_randbelow_draws_what_randrange_draws(n: int) -> None:
    # the REPS and adaptive selectors' per-packet draw must keep the seeded stream unchanged
    for seed in (0, 1, 12345):
        a, b = random.Random(seed), random.Random(seed)
        fast = [randbelow(a.getrandbits, n) for _ in range(500)]
        assert fast == [b.randrange(n) for _ in range(500)]
        assert a.random() == b.random()  # and leave the generator in the same state
        assert all(0 <= x < n for x in fast)


def test_registry_lists_all_selectors() -> None:
    assert set(PATH_SELECTORS.names()) >= {"ecmp", "spray", "bitmap", "reps", "adaptive"}
    with pytest.raises(ValueError, match="Did you mean 'spray'"):
        PATH_SELECTORS.get("spary")
    with pytest.raises(ValueError, match="no parameter"):
        make_selector("spray", 8, random.Random(1), params={"ring_size": 3})


def test_ecmp_one_ev_then_rehash_on_timeout() -> None:
    sel = make_selector("ecmp", 64, random.Random(3))
    evs = {sel.next_ev(t) for t in range(100)}
    assert len(evs) == 1
    (ev,) = evs
    sel.on_timeout(ev, 1.0)
    assert sel.next_ev(2.0) != ev


def test_spray_is_round_robin_over_all_evs() -> None:
    sel = make_selector("spray", 16, random.Random(0))
    evs = [sel.next_ev(0.0) for _ in range(64)]
    assert sorted(set(evs)) == list(range(16))
    assert all(evs.count(e) == 4 for e in range(16))


def test_spray_across_planes() -> None:
    sel = make_selector("spray", 8, random.Random(0), planes=2)
    planes = [sel.plane_of(sel.next_ev(0.0)) for _ in range(8)]
    assert planes.count(0) == planes.count(1) == 4


def test_bitmap_skips_penalised_ev_for_penalty_rounds() -> None:
    sel = make_selector("bitmap", 4, random.Random(0))
    sel.i = 0
    sel.on_timeout(2, 0.0)  # +15
    sel.on_nack(1, 0.0)  # +4
    sel.on_ack(3, True, 0.0)  # +1
    evs = [sel.next_ev(0.0) for _ in range(80)]
    # EV 2 is skipped on its next 15 turns, EV 1 on 4, EV 3 on 1, each turn costing one call
    # that falls through to EV 0 (the first call comes before any turn); then all come back
    assert evs[: evs.index(2)].count(0) == 1 + 15
    assert evs[: evs.index(1)].count(0) == 1 + 4
    assert evs[: evs.index(3)].count(0) == 1 + 1
    assert evs[-8:].count(2) == 2 and evs[-8:].count(1) == 2


def test_reps_recycles_clean_evs_and_drops_marked() -> None:
    sel = make_selector("reps", 1024, random.Random(0))
    sel.on_ack(5, False, 0.0)
    sel.on_ack(7, True, 0.0)  # ECN: not recycled
    sel.on_ack(9, False, 0.0)
    assert [sel.next_ev(0.0), sel.next_ev(0.0)] == [5, 9]
    # empty ring: explore a fresh EV
    assert 0 <= sel.next_ev(0.0) < 1024
    # frozen after a timeout: cycle cached EVs without consuming them
    sel.on_ack(11, False, 0.0)
    sel.on_ack(12, False, 0.0)
    sel.on_timeout(99, 1.0)
    assert [sel.next_ev(1.0 + 1e-6) for _ in range(4)] == [11, 12, 11, 12]


def test_adaptive_avoids_recently_congested_ev() -> None:
    sel = make_selector("adaptive", 8, random.Random(0))
    sel.on_ack(3, True, 1.0)
    evs = [sel.next_ev(1.0) for _ in range(8000)]
    # EV 3 is picked only when the random challenger is also EV 3: 1/8 of its turns
    share = evs.count(3) / len(evs)
    assert share < 0.125 * 0.25
    assert all(evs.count(e) > 800 for e in range(8) if e != 3)


# ---------------------------------------------------------------------------- pipeline


def test_pipeline_packet_rate_closed_form() -> None:
    pipe = PacketPipeline(pps=400e6)
    outs = [pipe.admit(0.0, 1) for _ in range(1000)]
    assert outs[-1] == pytest.approx(999 / 400e6)
    assert pipe.admit(1.0, 1) == 1.0  # idle pipeline: no delay


def test_qp_cache_lru_and_miss_penalty() -> None:
    cache = QpContextCache(entries=2)
    pipe = PacketPipeline(pps=1e9, cache=cache, miss_penalty_s=1e-6, parallel_fetches=4)
    assert pipe.admit(0.0, 1) == pytest.approx(1e-6)  # cold miss
    assert pipe.next_free == pytest.approx(1e-9 + 0.25e-6)
    t = 1.0
    assert pipe.admit(t, 1) == t  # hit
    pipe.admit(t + 1, 2)
    pipe.admit(t + 2, 3)  # evicts 1 (least recent)
    assert pipe.admit(t + 3, 1) == pytest.approx(t + 3 + 1e-6)
    assert cache.misses == 4 and cache.hits == 1


def test_dma_cap_limits_payload_rate() -> None:
    pipe = PacketPipeline(pps=1e12, dma_bps=100e9)
    out = [pipe.admit(0.0, 0, 4096) for _ in range(100)]
    assert out[-1] == pytest.approx(100 * 4096 * 8 / 100e9)
    with pytest.raises(ValueError, match="DMA cap"):
        pipe.set_dma_cap(0)


def test_tail_loss_probe_resends_highest_in_flight() -> None:
    s = SenderReliability("sr")
    s.post(4)
    for psn in range(4):
        s.on_send(s.pick(), 100, psn * 1e-6, ev=10 + psn)
    assert s.inflight_evs() == [10, 11, 12, 13]
    assert s.probe_tail()
    assert s.pick() == 3 and s.inflight_bytes == 300
    g = SenderReliability("gbn")
    g.post(1)
    g.on_send(g.pick(), 100, 0.0)
    assert not g.probe_tail()  # classic RoCE has no tail-loss probe


def test_loss_callback_reports_the_lost_packets_path() -> None:
    s, r = SenderReliability("sr", reo_factor=0.25, reo_min_s=0.0), ReceiverReliability("sr")
    lost = []
    s.loss_cb = lambda ev, now: lost.append(ev)
    s.post(6)
    for psn in range(6):
        s.on_send(s.pick(), 100, psn * 1e-6, ev=100 + psn)
    _deliver([0, 2, 3, 4, 5], s, r, now=10e-6)
    assert lost == [101]


def test_selector_feedback_variants() -> None:
    bm = make_selector("bitmap", 8, random.Random(0))
    bm.on_loss(3, 0.0)
    assert bm.pen[3] == 15  # a vanished packet costs like a timeout
    ecmp = make_selector("ecmp", 8, random.Random(0))
    ev = ecmp.ev
    ecmp.on_timeout(ev + 1, 0.0)  # another (stale) EV timing out does not move the QP
    assert ecmp.ev == ev
    ecmp.on_path_change(ev, 0.0)  # the CC asks to leave the current path
    assert ecmp.ev != ev
    reps = make_selector("reps", 64, random.Random(0))
    for e in (1, 2, 3):
        reps.on_ack(e, False, 0.0)
    reps.on_path_change(2, 0.0)
    assert list(reps.ring) == [1, 3]


def test_selector_parameter_errors_list_what_it_takes() -> None:
    with pytest.raises(ValueError, match=r"'spray' has no parameter\(s\) \['x'\]; it takes no "):
        make_selector("spray", 4, random.Random(0), 1, {"x": 1})
    takes = sorted(PATH_SELECTORS.get("bitmap").PARAMS)
    assert takes  # bitmap has penalties to set
    with pytest.raises(ValueError, match="it takes " + ", ".join(takes)):
        make_selector("bitmap", 4, random.Random(0), 1, {"nope": 1})
