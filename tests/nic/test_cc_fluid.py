"""A tiny fluid single-bottleneck harness: N flows share one link through the public CC API.

Time advances in steps of ``dt``. Each flow sends at its CC's pacing rate, further limited by its
window over the current RTT (``W x 8 / (T + q/C)``); the bottleneck queue integrates arrivals
minus the link rate; feedback reaches the senders one base RTT late (a delay line over the queue
history). DCQCN: the switch marks with RED on the queue the packet met; the receiver's
CnpGenerator turns a step's marks into at most one CNP per 50 us per flow. HPCC: every step each
flow gets one ACK whose INT record is the bottleneck's (qlen, tx_bytes, time, rate) one RTT ago.
No packet engine is involved; this checks the control laws close the loop as their papers say.
"""

from __future__ import annotations

import numpy as np
import pytest
from podsim.nic.congestion import CCEvent, CnpGenerator, make_cc

MTU = 4096


def _red(q: float, kmin: float, kmax: float, pmax: float) -> float:
    if q <= kmin:
        return 0.0
    if q >= kmax:
        return 1.0
    return pmax * (q - kmin) / (kmax - kmin)


def run_fluid(
    cc_name: str,
    n: int,
    line_bps: float,
    rtt_s: float,
    t_end: float,
    dt: float,
    starts: list[float],
    red: tuple[float, float, float] = (100e3, 400e3, 0.2),
    seed: int = 1,
    params: dict | None = None,
):
    """Returns (times, per-flow rate matrix [steps, n] in bit/s, queue bytes per step)."""
    cc = make_cc(cc_name, params or {})
    flows = [cc.new_flow(i, line_bps, rtt_s, MTU, hops=1, now=starts[i]) for i in range(n)]
    cnp = CnpGenerator()
    rng = np.random.default_rng(seed)
    steps = round(t_end / dt)
    lag = max(1, round(rtt_s / dt))
    cap = line_bps * dt / 8.0
    q = 0.0
    tx_total = 0.0
    q_hist = np.zeros(steps + 1)
    tx_hist = np.zeros(steps + 1)
    sent = np.zeros(n)  # cumulative bytes per flow
    sent_hist = np.zeros((steps + 1, n))
    rates = np.zeros((steps, n))
    ev = CCEvent(0.0)
    for k in range(steps):
        t = k * dt
        qdelay = q * 8.0 / line_bps
        for i, f in enumerate(flows):
            if t < starts[i]:
                continue
            r = f.send_rate_bps
            if f.window_bytes is not None:
                r = min(r, f.window_bytes * 8.0 / (rtt_s + qdelay))
            rates[k, i] = r
        arrivals = rates[k].sum() * dt / 8.0
        out = min(q + arrivals, cap)
        q = q + arrivals - out
        tx_total += out
        sent += rates[k] * dt / 8.0
        q_hist[k + 1] = q
        tx_hist[k + 1] = tx_total
        sent_hist[k + 1] = sent
        j = max(0, k + 1 - lag)  # the state one RTT ago, as the feedback reports it
        now = t + dt
        for i, f in enumerate(flows):
            if t < starts[i]:
                continue
            ev.now = now
            ev.bytes = int(rates[k, i] * dt / 8.0)
            cc.handle_tx(ev, f)
            if cc.requires_cnp:
                p = _red(q_hist[j], *red)
                pkts = rates[k, i] * dt / 8.0 / MTU
                marked = p > 0.0 and rng.random() < 1.0 - (1.0 - p) ** pkts
                if cnp.on_data(i, marked, now):
                    cc.handle_cnp(CCEvent(now), f)
            if cc.requires_int:
                ack = CCEvent(
                    now,
                    bytes=ev.bytes,
                    psn=int(sent_hist[j, i] // MTU),
                    snd_nxt=int(sent[i] // MTU),
                    int_records=[(q_hist[j], tx_hist[j], j * dt, line_bps)],
                    path=0,
                )
                cc.handle_ack(ack, f)
    times = np.arange(steps) * dt
    return times, rates, q_hist[1:]


def _jain(x: np.ndarray) -> float:
    return float(x.sum() ** 2 / (len(x) * (x**2).sum()))


def test_none_queue_grows_at_the_excess_rate():
    n, line, rtt = 4, 100e9, 10e-6
    _, rates, q = run_fluid("none", n, line, rtt, t_end=200e-6, dt=1e-6, starts=[0.0] * n)
    assert np.all(rates == line)
    # Closed form: the queue integrates (N - 1) x C.
    assert q[-1] == pytest.approx((n - 1) * line * 200e-6 / 8, rel=1e-9)


def test_hpcc_converges_to_its_closed_form_equilibrium():
    n, line, rtt = 8, 100e9, 10e-6
    starts = [i * 50e-6 for i in range(n)]  # staggered arrivals: late flows start at line rate
    times, rates, q = run_fluid("hpcc", n, line, rtt, t_end=14e-3, dt=1e-6, starts=starts)
    tail = times >= 12e-3
    mean = rates[tail].mean(axis=0)
    # Equilibrium of W = Wc eta / U + W_AI with U = N W / BDP (empty queue, equal windows):
    # N W / BDP = eta + N W_AI / BDP, i.e. total rate (eta + N ai_fraction) C, shared equally.
    eta, ai_fraction = 0.95, 5e-4
    total = (eta + n * ai_fraction) * line
    assert mean.sum() == pytest.approx(total, rel=2e-3)
    assert np.allclose(mean, total / n, rtol=0.02), mean / (total / n)
    # Utilisation stays below 1, so the queue HPCC builds drains to nothing.
    assert q[tail].max() < 1e-3 * line * rtt / 8


def test_dcqcn_converges_to_fair_share_and_queue_stays_below_kmax():
    n, line, rtt = 4, 100e9, 10e-6
    kmin, kmax, pmax = 100e3, 400e3, 0.2
    starts = [i * 1e-3 for i in range(n)]  # a new flow joins every millisecond at line rate
    t_end = 100e-3
    times, rates, q = run_fluid(
        "dcqcn",
        n,
        line,
        rtt,
        t_end=t_end,
        dt=2e-6,
        starts=starts,
        red=(kmin, kmax, pmax),
        params={"profile": "paper"},  # the paper's statement, with the paper's constants
    )
    tail = times >= t_end - 20e-3
    mean = rates[tail].mean(axis=0)
    fair = line / n
    # Within 80 ms of the last arrival every flow is within 15 % of C/N, the link is busy and
    # the queue oscillates in the RED band, well below Kmax (no PFC needed).
    assert np.all(np.abs(mean / fair - 1.0) < 0.15), mean / fair
    assert _jain(mean) > 0.99
    assert mean.sum() > 0.98 * line
    assert kmin * 0.5 < q[tail].mean() < kmax
    assert q[tail].max() < kmax
    # Just after the last arrival the shares are far apart: the convergence is the CC's work.
    early = rates[(times >= 4e-3) & (times < 6e-3)].mean(axis=0)
    assert _jain(early) < 0.95
