"""Cost of the congestion-control API per event, per built-in algorithm.

Prints, for each algorithm, the wall time (net of the driving loop) of one ``handle_tx`` +
``handle_ack`` pair (what the transport pays per data packet when it reports both) over a
synthetic stream at 400 Gb/s, 4 KiB MTU, 64 flows; DCQCN also gets a CNP every 50 us per flow
and HPCC a 3-hop INT record.
Also prints the DCQCN lazy-timer saving: on_timer calls made versus the per-flow periodic events
an eager design would schedule.

    python benchmarks/bench_cc.py
"""

from __future__ import annotations

import time

from podsim.nic.congestion import CC_ALGORITHMS, CCEvent, make_cc

LINE = 400e9
MTU = 4096
FLOWS = 64
PKTS = 4000  # per flow


def bench(name: str, calls: bool = True) -> tuple[float, int]:
    cc = make_cc(name)
    flows = [cc.new_flow(i, LINE, 5e-6, MTU, hops=3) for i in range(FLOWS)]
    gap = MTU * 8 / LINE * FLOWS  # each flow gets 1/FLOWS of the line
    ev = CCEvent(0.0, bytes=MTU, rtt=6e-6, path=0)
    timer_calls = 0
    orig = cc.on_timer

    def counting(now, flow):
        nonlocal timer_calls
        timer_calls += 1
        orig(now, flow)

    cc.on_timer = counting  # type: ignore[method-assign]
    t0 = time.perf_counter()
    for k in range(PKTS):
        now = k * gap
        for i, f in enumerate(flows):
            ev.now = now + i * 1e-9
            ev.psn = k
            ev.snd_nxt = k + 8
            ev.ecn = k % 16 == 0
            ev.int_records = ((k * 10, k * MTU, ev.now, LINE),) * 3
            if not calls:
                continue
            cc.handle_tx(ev, f)
            cc.handle_ack(ev, f)
            if name == "dcqcn" and k % 8 == 0:
                cc.handle_cnp(ev, f)
    dt = time.perf_counter() - t0
    return dt / (PKTS * FLOWS), timer_calls


def main() -> None:
    sim_time = PKTS * MTU * 8 / LINE * FLOWS
    print(f"{FLOWS} flows x {PKTS} packets, {sim_time * 1e3:.2f} ms simulated")
    base, _ = bench("none", calls=False)
    print(f"(loop overhead {base * 1e9:.0f} ns per packet, subtracted below)")
    for name in CC_ALGORITHMS:
        per, calls = bench(name)
        per -= base
        line = f"{name:8s} {per * 1e9:8.0f} ns per tx+ack pair ({1 / per / 1e6:.2f} M pairs/s)"
        if name == "dcqcn":
            eager = FLOWS * (sim_time / 50e-6 + sim_time / 55e-6)
            line += f"; on_timer calls {calls} vs {eager:.0f} eager timer events"
        print(line)


if __name__ == "__main__":
    main()
