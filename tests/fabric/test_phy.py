from __future__ import annotations

import math

import numpy as np
import pytest
from podsim.fabric.phy import (
    CODEWORD_BITS,
    PROPAGATION_S_PER_M,
    RS_N_SYMBOLS,
    RS_T,
    get_phy,
    phy_for_rate,
)

from tests.fabric.test_faults_ber import expected_frame_loss, touched_codewords


def test_400g_line_rate_is_425g():
    p = get_phy("400GbE")
    # MAC x 257/256 x 544/514 = 4 x 106.25 Gb/s (docs/physics.md)
    assert p.mac_rate_bps * 257 / 256 * 544 / 514 == pytest.approx(p.line_rate_bps, rel=1e-12)
    assert p.line_rate_bps == 425e9


@pytest.mark.parametrize("name", ["200GbE", "400GbE", "800GbE", "1.6TbE"])
def test_lane_structure_consistent(name):
    p = get_phy(name)
    assert p.mac_rate_bps * 257 / 256 * 544 / 514 == pytest.approx(p.line_rate_bps, rel=1e-12)


def test_fec_latency_in_documented_range():
    p = get_phy("400GbE")
    assert p.fec_latency_s == pytest.approx(CODEWORD_BITS / 106.25e9 + 50e-9)
    assert 60e-9 <= p.fec_latency_s <= 120e-9


def test_goodput_fraction_closed_form():
    # P / (P + 82) x 400G: 4096 B -> 98.0 % (docs/physics.md)
    p = get_phy("400GbE")
    t = p.serialisation_s(4096 + 82)
    assert 8 * 4096 / t / 1e9 == pytest.approx(4096 / 4178 * 400, rel=1e-12)


def test_codeword_loss_matches_binomial_tail():
    p = get_phy("400GbE")
    ber = 2e-3
    ps = 1 - (1 - ber) ** 10
    tail = sum(
        math.comb(RS_N_SYMBOLS, k) * ps**k * (1 - ps) ** (RS_N_SYMBOLS - k)
        for k in range(RS_T + 1, RS_N_SYMBOLS + 1)
    )
    assert p.codeword_loss_prob(ber) == pytest.approx(tail, rel=1e-6)


def test_codeword_loss_monte_carlo():
    # Sampling symbol errors directly reproduces the analytic codeword-loss probability.
    p = get_phy("400GbE")
    ber = 2.5e-3
    rng = np.random.default_rng(7)
    n = 200_000
    ps = 1 - (1 - ber) ** 10
    errors = rng.binomial(RS_N_SYMBOLS, ps, size=n)
    measured = np.mean(errors > RS_T)
    expect = p.codeword_loss_prob(ber)
    sigma = math.sqrt(expect * (1 - expect) / n)
    assert abs(measured - expect) < 5 * sigma


def test_frame_loss_grows_with_frame_size_and_ber():
    p = get_phy("400GbE")
    assert p.frame_loss_prob(4178, 2e-4) < 1e-12  # typical operating point is clean
    assert p.frame_loss_prob(4178, 3e-3) > p.frame_loss_prob(1106, 3e-3)
    assert p.frame_loss_prob(4178, 3e-3) > p.frame_loss_prob(4178, 2e-3)
    assert p.frame_loss_prob(4178, 0.0) == 0.0


@pytest.mark.parametrize("frame", [64, 86, 1106, 4178, 9000])
def test_frame_loss_counts_the_interleaved_codewords_a_frame_touches(frame: int):
    """IEEE 802.3 clause 119: two codewords interleaved symbol by symbol and a frame at any
    offset: the model's loss equals the symbol-by-symbol count over every start offset (within
    the sliver its closed form ignores), and a frame touches 1 + L/G groups of two codewords
    on average: 2.1 for an ACK, 8.5 for a 4 KiB RoCE frame, where one aligned codeword stream
    would give 1 and 7."""
    p = get_phy("400GbE")
    assert p.fec_interleave == 2
    starts = range(1028)  # symbols in one group of two 514-symbol payloads
    mean = sum(touched_codewords(frame, s) for s in starts) / len(starts)
    assert p.mean_codewords_per_frame(frame) == pytest.approx(mean, rel=5e-3)
    for ber in (3e-3, 1e-3):
        assert p.frame_loss_prob(frame, ber) == pytest.approx(
            expected_frame_loss(ber, frame=frame), rel=5e-3
        )
    assert p.mean_codewords_per_frame(86) == pytest.approx(2.13, abs=0.01)
    assert p.mean_codewords_per_frame(4178) == pytest.approx(8.53, abs=0.01)


def test_burst_errors_are_worse():
    p = get_phy("400GbE")
    assert p.codeword_loss_prob(5e-4, burst_len=4) > p.codeword_loss_prob(5e-4)


def test_llr_cost_is_rtt_plus_serialisation():
    p = get_phy("400GbE")
    cost = p.llr_retry_cost_s(4178, 30.0)
    rtt = 2 * (30 * PROPAGATION_S_PER_M + p.fec_latency_s)
    assert cost == pytest.approx(rtt + 8 * (4178 + 20) / 400e9)


def test_bad_ber_rejected():
    with pytest.raises(ValueError, match="BER"):
        get_phy("400GbE").frame_loss_prob(1000, 1.5)


def test_unknown_profile_suggests():
    with pytest.raises(ValueError, match="400GbE"):
        get_phy("400GBE")


def test_phy_for_rate():
    assert phy_for_rate(800e9).name == "800GbE"
    with pytest.raises(ValueError):
        phy_for_rate(123.0)
