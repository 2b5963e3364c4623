"""Cost model and sweep engine speed (printed figures; not a test).

- BOM + capex of the largest preset clusters (graph already built): the cost side of a sweep
  point must be negligible next to a simulation.
- Sweep engine overhead per point (store write, resume bookkeeping) with a no-op point, in
  process, and for a local process pool.

Run: python benchmarks/bench_cost_sweep.py
"""

from __future__ import annotations

import tempfile
import time

from podsim.fabric.topology import build_topology
from podsim.scenarios.cost import cost_cluster
from podsim.scenarios.study.engine import Point, run_points
from podsim.scenarios.study.store import point_key


def noop_point(resolved: dict) -> dict:
    return {"metric": float(resolved["i"]), "capex_usd": 1.0}


def bench_bom() -> None:
    for name, kw in [("superpod-384", {"pods": 4}), ("fat-tree", {"k": 32})]:
        g = build_topology(name, **kw)
        t0 = time.perf_counter()
        n = 5
        for _ in range(n):
            c = cost_cluster(g, layout="external-switch")
        dt = (time.perf_counter() - t0) / n
        print(
            f"BOM {name} {kw}: {g.number_of_nodes()} nodes, {g.number_of_edges()} links, "
            f"{len(c.lines)} lines, capex ${c.capex_usd:,.0f}: {dt * 1e3:.1f} ms per pricing"
        )


def bench_sweep(points: int = 200) -> None:
    pts = [Point("bench", i, point_key({"i": i}), {"i": i}, {"i": i}) for i in range(points)]
    for workers in (0, 2):
        with tempfile.TemporaryDirectory() as d:
            t0 = time.perf_counter()
            rep = run_points(pts, noop_point, d, workers=workers, progress=False)
            dt = time.perf_counter() - t0
            t1 = time.perf_counter()
            again = run_points(pts, noop_point, d, workers=workers, progress=False)
            resume = time.perf_counter() - t1
        assert len(rep.table) == points and len(again.skipped) == points
        print(
            f"sweep engine, workers={workers}: {points} no-op points in {dt:.2f} s "
            f"({dt / points * 1e3:.1f} ms/point incl. pool start); resume check {resume:.2f} s"
        )


if __name__ == "__main__":
    bench_bom()
    bench_sweep()
