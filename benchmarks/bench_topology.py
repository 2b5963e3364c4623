"""Wall time to build, validate and cut 10k-GPU topology graphs.

Usage: python benchmarks/bench_topology.py [--gpus 10240] [--no-bisection]

Builds each large cluster shape with about ``--gpus`` GPUs (rail-optimised 8-GPU servers, the
h800-deepep and superpod-128 presets, a k-ary fat-tree with at least that many hosts), then
times :func:`fabric.topology.validate_graph` and the max-flow bisection. Target (the flow engine
issue): graph construction for 10,240 GPUs in seconds, not minutes.
"""

from __future__ import annotations

import argparse
import time

from podsim.fabric.bisection import bisection_bandwidth
from podsim.fabric.superpod import smallest_fat_tree_k
from podsim.fabric.topology import build_topology, validate_graph
from podsim.fabric.units import fmt_rate


def cases(gpus: int) -> list[tuple[str, dict]]:
    return [
        ("rail", {"servers": gpus // 8}),
        ("rail", {"servers": gpus // 8, "planes": 2, "nic_phy": "200GbE", "fabric_phy": "200GbE"}),
        ("h800-deepep", {"nodes": gpus // 8}),
        ("superpod-128", {"pods": gpus // 128}),
        ("superpod", {"pods": gpus // 128, "gpus_per_pod": 128, "scaleout": "fat-tree"}),
        ("fat-tree", {"k": smallest_fat_tree_k(gpus)}),
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpus", type=int, default=10240)
    ap.add_argument("--no-bisection", action="store_true")
    args = ap.parse_args()
    print(
        f"{'topology':<14} {'params':<76} {'nodes':>7} {'edges':>7} "
        f"{'build s':>8} {'valid s':>8} {'bisect s':>8}  bisection"
    )
    for name, kw in cases(args.gpus):
        t0 = time.perf_counter()
        g = build_topology(name, **kw)
        t1 = time.perf_counter()
        validate_graph(g)
        t2 = time.perf_counter()
        if args.no_bisection:
            bis, t3 = "-", t2
        else:
            bis = fmt_rate(bisection_bandwidth(g))
            t3 = time.perf_counter()
        print(
            f"{name:<14} {kw!s:<76} {g.number_of_nodes():>7} {g.number_of_edges():>7} "
            f"{t1 - t0:>8.3f} {t2 - t1:>8.3f} {t3 - t2:>8.3f}  {bis}"
        )


if __name__ == "__main__":
    main()
