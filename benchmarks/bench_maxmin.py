"""Wall time of podsim.fabric.maxmin.maxmin_rates on random sparse problems.

Usage: python benchmarks/bench_maxmin.py [--flows 100000] [--links 10000] [--hops 4] [--seed 0]

Each flow crosses ``hops`` distinct random links (a 2-tier fabric path has 4: NIC up, leaf up,
spine down, NIC down); link capacities are drawn from {100, 200, 400, 800} Gb/s and a third of
the flows carry a random cap, so the bottleneck levels are many and distinct (a hard case for
progressive filling). Prints the solve time (best of ``--repeat``) and the number of passes.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from podsim.fabric.maxmin import build_incidence, maxmin_rates


def problem(flows: int, links: int, hops: int, seed: int):
    rng = np.random.default_rng(seed)
    # Distinct links per flow: random offsets modulo links without replacement within the flow.
    base = rng.integers(0, links, size=flows)
    steps = np.cumsum(rng.integers(1, max(2, links // hops), size=(flows, hops)), axis=1)
    link_idx = ((base[:, None] + steps) % links).ravel()
    flow_idx = np.repeat(np.arange(flows), hops)
    a = build_incidence(link_idx, flow_idx, links, flows)
    capacity = rng.choice([100e9, 200e9, 400e9, 800e9], size=links)
    caps = np.where(rng.random(flows) < 1 / 3, rng.uniform(1e9, 50e9, size=flows), np.inf)
    return a, capacity, caps


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--flows", type=int, default=100_000)
    ap.add_argument("--links", type=int, default=10_000)
    ap.add_argument("--hops", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    a, capacity, caps = problem(args.flows, args.links, args.hops, args.seed)
    best = np.inf
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        res = maxmin_rates(a, capacity, caps)
        best = min(best, time.perf_counter() - t0)
    over = (res.link_load > capacity * (1 + 1e-9)).sum()
    print(
        f"maxmin_rates: {args.flows} flows x {args.links} links, {a.nnz} nonzeros: "
        f"{best * 1e3:.1f} ms (best of {args.repeat}), {res.iterations} passes, "
        f"{over} links over capacity"
    )


if __name__ == "__main__":
    main()
