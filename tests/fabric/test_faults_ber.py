"""Pre-FEC bit errors on a link: RS(544,514) frame loss, and link-level retry (LLR).

The expected loss rates are computed here from first principles (docs/physics.md: RS(544,514) has
10-bit symbols and corrects t = 15 symbols per 544-symbol codeword; 256b/257b transcoding; a
400GBASE-R PCS interleaves two codewords symbol by symbol (IEEE 802.3 clause 119), and a frame
starts anywhere in the symbol stream: the codewords each start offset touches are counted symbol
by symbol), not taken from podsim.fabric.phy, and the simulated
counts must fall within 4 standard deviations of the binomial expectation.

Why not only BER 1e-4: with independent bit errors a codeword at BER 1e-4 has 0.54 symbol
errors on average and fails only with more than 15, probability ~1e-18: no simulation can
measure that. So the test checks 1e-4 at its exact predicted value (and that no frame of a long
run is lost), and measures the rate where it is measurable: 1e-4 with error bursts (8-symbol
bursts, e.g. DFE error propagation, the pessimistic model) and independent errors at 1.6e-3.
"""

from __future__ import annotations

import math

import pytest
from podsim.fabric.faults import FaultInjector, LinkBer
from podsim.fabric.kernel import run
from podsim.fabric.phy import get_phy
from podsim.fabric.topology import star

from tests.fabric.fabric_testutil import NS_PER_M, OVERHEAD, build

N_SYM, T, SYM_BITS, K_BITS = 544, 15, 10, 514 * 10
PAYLOAD = 1024
FRAME = PAYLOAD + OVERHEAD - 20  # the Ethernet frame: wire bytes minus preamble and IFG


def binom_sf(t: int, n: int, p: float) -> float:
    """P(X > t), X ~ Binomial(n, p), summed in log space term by term."""
    logs = [
        math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)
        + k * math.log(p) + (n - k) * math.log1p(-p)
        for k in range(t + 1, n + 1)
    ]  # fmt: skip
    top = max(logs)
    return math.exp(top) * sum(math.exp(x - top) for x in logs)


def touched_codewords(frame: int, start: int, interleave: int = 2) -> int:
    """Codewords a frame touches when its first symbol is symbol ``start`` of the stream:
    symbol i belongs to codeword i mod ``interleave`` of group i // (interleave x 514)."""
    n_sym = math.ceil(frame * 8 * 257 / 256 / SYM_BITS)
    per_group = interleave * K_BITS // SYM_BITS
    return len({(i // per_group, i % interleave) for i in range(start, start + n_sym)})


def expected_frame_loss(ber: float, burst: int = 1, frame: int = FRAME) -> float:
    """Mean over every start symbol of one interleaved group of 1 - (1 - p_cw)^touched."""
    p_sym = 1 - (1 - ber) ** SYM_BITS
    p_cw = binom_sf(T, N_SYM, p_sym) if burst == 1 else binom_sf(T // burst, N_SYM, p_sym / burst)
    starts = range(2 * K_BITS // SYM_BITS)
    return sum(-math.expm1(touched_codewords(frame, s) * math.log1p(-p_cw)) for s in starts) / len(
        starts
    )


def lossy_run(ber: float, burst: int = 1, frames: int = 20_000, llr: bool = False):
    env, net, hosts = build(star(hosts=2), mtu=PAYLOAD)
    m = hosts["nic0.p0"].add_message("nic1.p0", frames * PAYLOAD)
    inj = FaultInjector(
        net, [LinkBer(link=("leaf0", "nic1.p0"), pre_fec_ber=ber, burst_len=burst, llr=llr)]
    )
    run(env)
    return net, m, inj.records[0]


def within(count: int, n: int, p: float, sigmas: float = 4.0) -> bool:
    mean = n * p
    return abs(count - mean) <= sigmas * math.sqrt(n * p * (1 - p)) + 1


def test_ber_1e4_exact_prediction_and_no_measurable_loss():
    phy = get_phy("400GbE")
    p = expected_frame_loss(1e-4)
    assert 1e-19 < p < 1e-15  # astronomically small, as RS(544,514) is designed to be
    assert phy.frame_loss_prob(FRAME, 1e-4) == pytest.approx(p, rel=2e-3)
    net, m, rec = lossy_run(1e-4, frames=20_000)
    assert rec.corrupted == 0 and m.done and net.dropped_packets() == 0


@pytest.mark.parametrize(("ber", "burst"), [(1e-4, 8), (1.6e-3, 1)])
def test_measurable_frame_loss_matches_rs544(ber: float, burst: int):
    p = expected_frame_loss(ber, burst)
    assert 1e-3 < p < 0.2  # measurable with 20k frames
    assert get_phy("400GbE").frame_loss_prob(FRAME, ber, burst) == pytest.approx(
        p, rel=2e-3
    )  # slivers
    n = 20_000
    net, m, rec = lossy_run(ber, burst, frames=n)
    assert within(rec.lost_pkts, n, p), (rec.lost_pkts, n * p)
    assert rec.corrupted == rec.lost_pkts == net.port("leaf0", "nic1.p0").lost_pkts
    assert m.size - m.rx_bytes == rec.lost_bytes == rec.lost_pkts * PAYLOAD


def test_llr_delays_each_corrupted_frame_by_its_predicted_cost():
    """Frames sent 2 us apart (the link is idle when a replay is due): every frame arrives,
    each one exactly k x (link RTT + serialisation) late, k its number of corruptions."""
    ber, burst, n = 1e-4, 8, 4000
    env, net, hosts = build(star(hosts=2), mtu=PAYLOAD, trace=True)
    src, dst = hosts["nic0.p0"], hosts["nic1.p0"]
    msgs = [src.add_message("nic1.p0", PAYLOAD, start_s=i * 2e-6) for i in range(n)]
    inj = FaultInjector(
        net, [LinkBer(link=("nic0.p0", "leaf0"), pre_fec_ber=ber, burst_len=burst, llr=True)]
    )
    run(env)
    rec = inj.records[0]
    edge = net.graph.edges["nic0.p0", "leaf0"]
    phy = get_phy(edge["phy"])
    wire = PAYLOAD + OVERHEAD
    cost = 2 * (edge["length_m"] * NS_PER_M + phy.fec_latency_s) + 8 * wire / 400e9
    assert phy.llr_retry_cost_s(FRAME, edge["length_m"]) == pytest.approx(cost, rel=1e-12)
    base = net.unloaded_latency(net.paths("nic0.p0", "nic1.p0")[0], wire)
    ks = []
    for m in msgs:
        extra = (m.t_done - m.t_first_tx) - base
        k = round(extra / cost)
        assert k >= 0 and extra == pytest.approx(k * cost, abs=1e-12)
        ks.append(k)
    assert net.dropped_packets() == 0 and all(m.done for m in msgs)
    assert sum(ks) == rec.llr_replays == rec.corrupted
    p = expected_frame_loss(ber, burst)
    assert within(sum(k > 0 for k in ks), n, p)
    assert rec.llr_delay_s == pytest.approx(sum(ks) * cost, rel=1e-9)
    # the link was busy for every replay
    up = net.port("nic0.p0", "leaf0")
    assert up.tx_bytes == n * wire + rec.llr_replays * wire
    assert dst.rx_pkts == n


def test_llr_keeps_the_link_in_order_and_loses_nothing_under_load():
    net, m, rec = lossy_run(1.6e-3, frames=5000, llr=True)
    assert rec.corrupted > 50 and rec.lost_pkts == 0 and net.dropped_packets() == 0
    assert m.done and m.rx_bytes == m.size


def test_llr_order_is_preserved():
    env, net, hosts = build(star(hosts=2), mtu=PAYLOAD, trace=True)
    hosts["nic0.p0"].add_message("nic1.p0", 3000 * PAYLOAD)
    FaultInjector(net, [LinkBer(link=("nic0.p0", "leaf0"), pre_fec_ber=1.6e-3, llr=True)])
    run(env)
    psns = [psn for _t, _f, psn, _e, _i in hosts["nic1.p0"].trace]
    assert psns == sorted(psns) and len(psns) == 3000


def test_ber_ends_with_the_fault_and_is_deterministic():
    def once():
        env, net, hosts = build(star(hosts=2), mtu=PAYLOAD)
        m = hosts["nic0.p0"].add_message("nic1.p0", 4000 * PAYLOAD)
        inj = FaultInjector(
            net,
            [LinkBer(link=("leaf0", "nic1.p0"), pre_fec_ber=1.6e-3, at=20e-6, until=60e-6)],
            seed=3,
        )
        run(env)
        return m.rx_bytes, inj.records[0].lost_pkts, inj.records[0].corrupted

    a = once()
    assert a == once() and a[1] > 0
    # only frames in the 40 us window could be hit: 40 us / 22 ns per frame ~ 1800 frames
    assert a[1] < 0.1 * 1800


def test_scaleup_link_without_fec_needs_a_phy():
    import networkx as nx
    from podsim.fabric.faults import FaultError

    _, net, _ = build(star(hosts=2))
    nx.set_edge_attributes(net.graph, "scaleup", "phy")
    nx.set_edge_attributes(net.graph, 900e9, "rate_bps")  # no Ethernet profile runs at that
    with pytest.raises(FaultError, match="no Ethernet PHY"):
        FaultInjector(net, [LinkBer(link=("leaf0", "nic1.p0"), pre_fec_ber=1e-4)])


def test_frame_loss_is_certain_not_a_math_error_when_every_codeword_fails() -> None:
    phy = get_phy("400GbE")
    for ber in (0.02, 0.1, 0.49):
        assert phy.frame_loss_prob(FRAME, ber) == 1.0


@pytest.mark.parametrize("ber", [1e-2, 5e-3])
def test_llr_gives_up_after_its_replay_bound_and_the_run_ends(ber: float) -> None:
    """A link too noisy to pass frames: each frame is replayed llr_max_replays times, then lost
    (the line-rate host does not retransmit); the run ends instead of replaying forever."""
    env, net, hosts = build(star(hosts=2), mtu=PAYLOAD)
    frames = 20
    m = hosts["nic0.p0"].add_message("nic1.p0", frames * PAYLOAD)
    fault = LinkBer(link=("leaf0", "nic1.p0"), pre_fec_ber=ber, llr=True, llr_max_replays=4)
    inj = FaultInjector(net, [fault])
    run(env)
    rec = inj.records[0]
    p = get_phy("400GbE").frame_loss_prob(FRAME, ber)
    assert p > 0.99  # practically every transmission is corrupted
    assert rec.llr_given_up == frames - m.rx_bytes // PAYLOAD
    assert rec.llr_replays <= 4 * frames
    assert m.rx_bytes + rec.lost_bytes == m.size
