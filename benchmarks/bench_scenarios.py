"""Scenario-layer overheads: what `podsim run quickstart` costs end to end, and what the layer
timeline adds per message on top of an engine.

Prints: wall time of each stage of quickstart (load + validate, build cluster, build trace,
engine, tables + summary, cost, files, plots), the engine's events/s, the CPU time of each
figure (build, PNG, SVG; first call in the process and again), and the timeline's own cost per
message over a transport that delivers instantly (the upper bound of its overhead). CPU times
are given because the machine is shared: wall times move with the load.

    python benchmarks/bench_scenarios.py
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import simpy


def stage_times() -> None:
    from podsim.scenarios.build.cluster import (
        build_cluster,
        build_trace,
        compute_table,
        trace_ranks,
    )
    from podsim.scenarios.engines import ENGINES, RunContext
    from podsim.scenarios.input.loader import load_scenario
    from podsim.scenarios.runner import Prepared, _assemble, price, write_outputs

    t = [time.perf_counter()]
    sc, _ = load_scenario("quickstart")
    t.append(time.perf_counter())
    cluster = build_cluster(sc, trace_ranks(sc))
    t.append(time.perf_counter())
    trace = build_trace(sc, cluster)
    comp = compute_table(sc, cluster, trace)
    t.append(time.perf_counter())
    events: list[int] = []
    ctx = RunContext(sc, cluster, trace, comp, progress=lambda s, n: events.append(n or 0))
    eo = ENGINES.get(sc.engine)(ctx)
    t.append(time.perf_counter())
    res = _assemble(sc, Prepared(sc, cluster, trace, comp), eo, t[-1] - t[-2])
    t.append(time.perf_counter())
    res.cost, res.bom = price(sc, cluster.graph, res)
    t.append(time.perf_counter())
    with tempfile.TemporaryDirectory() as d:
        sc_noplot = sc.model_copy(
            update={"outputs": sc.outputs.model_copy(update={"plots": False})}
        )
        write_outputs(res, sc_noplot, Path(d), graph=cluster.graph)
        t.append(time.perf_counter())
        from podsim.scenarios.report.plots import plot_all

        plot_all(res, Path(d) / "plots", graph=cluster.graph)
        t.append(time.perf_counter())
    names = ["load+validate", "build cluster", "build trace", "engine", "tables+summary",
             "cost (BOM)", "write files", "plots (png+svg)"]  # fmt: skip
    print(f"quickstart: {len(trace)} messages, {cluster.num_ranks} ranks")
    for name, a, b in zip(names, t[:-1], t[1:], strict=True):
        print(f"  {name:<16} {b - a:7.3f} s")
    n_events = events[-1] if events else 0
    print(f"  engine events    {n_events:,} ({n_events / (t[4] - t[3]) / 1e3:,.0f} k events/s)")


class Instant:
    def __init__(self) -> None:
        self.env = simpy.Environment()

    def send(self, msg, src, dst, nbytes, hop, on_done) -> None:
        on_done(msg)


def timeline_overhead(ranks: int = 64, layers: int = 4) -> None:
    from podsim.scenarios.execution.timeline import run_timeline

    src, dst = np.nonzero(~np.eye(ranks, dtype=bool))
    parts = [
        pd.DataFrame({"step": 0, "layer": ly, "phase": ph, "src_rank": src, "dst_rank": dst,
                      "bytes": 1024, "tokens": 1, "start_s": 0.0, "hop": "rdma"})
        for ly in range(layers)
        for ph in ("dispatch", "combine")
    ]  # fmt: skip
    tr = pd.concat(parts, ignore_index=True)
    comp = pd.DataFrame({"step": 0, "layer": np.repeat(np.arange(layers), ranks),
                         "rank": np.tile(np.arange(ranks), layers), "compute_s": 1e-6})  # fmt: skip
    t = Instant()
    t0 = time.perf_counter()
    run_timeline(t.env, t, tr, comp, num_ranks=ranks)
    dt = time.perf_counter() - t0
    print(f"timeline: {len(tr):,} messages over an instant transport in {dt:.3f} s "
          f"= {dt / len(tr) * 1e6:.1f} us per message")  # fmt: skip


def plot_times() -> None:
    """CPU seconds per figure of quickstart (steady state: matplotlib's one-time costs were
    paid by the stage timing): building it, saving PNG, saving SVG. The topology is drawn once
    for both formats, and not at all while the graph is unchanged."""
    import matplotlib
    from podsim.scenarios.input.loader import load_scenario
    from podsim.scenarios.report import plots
    from podsim.scenarios.runner import prepare, run

    sc, _ = load_scenario("quickstart")
    res = run(sc)
    graph = prepare(sc).cluster.graph
    cpu = time.process_time
    rows = []
    with tempfile.TemporaryDirectory() as d, matplotlib.rc_context(plots.SAVE_RC):
        t_all = cpu()
        for name, fn in plots.FIGURES.items():
            t0 = cpu()
            fig = fn(res, graph) if name == "link_utilisation" else fn(res)
            t1 = cpu()
            fig.savefig(Path(d) / f"{name}.png", dpi=120)
            t2 = cpu()
            fig.savefig(Path(d) / f"{name}.svg", dpi=120)
            rows.append((name, t1 - t0, t2 - t1, cpu() - t2))
        t0 = cpu()
        plots._draw_topology(graph, Path(d), ("png", "svg"), 120)
        topo = cpu() - t0
        total = cpu() - t_all
        t0 = cpu()
        plots._draw_topology(graph, Path(d), ("png", "svg"), 120)
        topo_again = cpu() - t0
    print(f"plots, CPU s, steady state: total {total:.3f}")
    for name, b, png, svg in rows:
        print(f"  {name:<17} build {b:.3f}  png {png:.3f}  svg {svg:.3f}")
    print(f"  {'topology':<17} png+svg {topo:.3f}  (graph unchanged: {topo_again:.4f})")


if __name__ == "__main__":
    stage_times()
    plot_times()
    timeline_overhead()
