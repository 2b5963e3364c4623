"""Measure the flow engine's congestion-control efficiency of every algorithm on the packet engine.

Usage: python benchmarks/calibrate_cc.py [--cc dcqcn hpcc ...] [--size 1MiB] [--seed 1]

For each algorithm of the NIC's CC registry, two congested scenarios on the ``h800-deepep``
preset run on the packet engine with the SmartNIC transport (spraying, 4 KiB MTU):

- ``incast``: 16 ranks send ``--size`` each to rank 0 (one shared bottleneck: the receiver's
  link);
- ``all-to-all``: 32 ranks send ``--size`` / 8 to every other rank (every receiver link shared
  by 31 flows, plus the NIC uplinks).

The same scenarios run on the flow engine with efficiency 1 (ideal max-min sharing). The
efficiency of an algorithm is ``T_flow(eta = 1) / T_packet`` per scenario, clipped to (0, 1];
the table's value (:data:`podsim.fabric.flow.cc.CC_EFFICIENCY`) is their geometric mean. The script
prints the measurements and a ``CC_EFFICIENCY`` dict to paste into ``fabric/flow/cc.py``.
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np
from podsim.fabric.units import parse_size
from podsim.scenarios.build.cluster import assign_hops, build_cluster
from podsim.scenarios.engines import ENGINES, RunContext
from podsim.scenarios.engines.flow import OPTIONS
from podsim.scenarios.input.loader import load_scenario
from podsim.scenarios.input.registries import get_registry

NO_COMPUTE = None


def ctx_for(pattern: str, cc: str, size: int, seed: int) -> RunContext:
    import pandas as pd
    from podsim.workloads import synthetic

    if pattern == "incast":
        n, tr = 16, synthetic.incast(16, size)
    else:
        n, tr = 32, synthetic.uniform_all_to_all(32, max(1, size // 8))
    sc, _ = load_scenario(
        {
            "name": f"calibrate-{cc}",
            "seed": seed,
            "sim": {"endpoint": "nic"},
            "cluster": {
                "preset": "h800-deepep",
                "params": {"nodes": n // 8},
                "nic": {"cc": {"name": cc}, "multipath": {"selector": "spray"}},
            },
            "workload": {"synthetic": {"pattern": "uniform"}},
            "outputs": {"plots": False},
        }
    )
    cl = build_cluster(sc, n)
    tr = assign_hops(tr.assign(phase="dispatch"), cl)
    tr = tr[tr["bytes"] > 0].reset_index(drop=True)
    empty = pd.DataFrame({"step": [], "layer": [], "rank": [], "compute_s": []})
    return RunContext(sc, cl, tr, empty)


def completion(out, n: int) -> float:
    s = out.summary(n)
    return float(s["phases"]["dispatch"]["completion_time_s"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cc", nargs="*", default=None)
    ap.add_argument("--size", default="1MiB")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    names = args.cc or get_registry("congestion control").names()
    size = parse_size(args.size)
    table: dict[str, float] = {}
    print(f"{'cc':8s} {'scenario':11s} {'packet':>10s} {'flow eta=1':>11s} {'efficiency':>10s}")
    for cc in names:
        effs = []
        for pattern in ("incast", "all-to-all"):
            ctx = ctx_for(pattern, cc, size, args.seed)
            t0 = time.perf_counter()
            t_pkt = completion(ENGINES.get("packet")(ctx), ctx.cluster.num_ranks)
            wall = time.perf_counter() - t0
            OPTIONS.efficiency = 1.0
            try:
                t_flow = completion(ENGINES.get("flow")(ctx), ctx.cluster.num_ranks)
            finally:
                OPTIONS.efficiency = None
            eff = min(1.0, t_flow / t_pkt) if t_pkt > 0 else math.nan
            effs.append(eff)
            print(
                f"{cc:8s} {pattern:11s} {t_pkt * 1e6:8.1f}us {t_flow * 1e6:9.1f}us "
                f"{eff:10.3f}   ({wall:.1f} s)",
                flush=True,
            )
        table[cc] = float(np.exp(np.mean(np.log(effs))))
    print("\nCC_EFFICIENCY = {")
    for cc, e in table.items():
        print(f'    "{cc}": {e:.3f},')
    print("}")


if __name__ == "__main__":
    main()
