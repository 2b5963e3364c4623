"""CPU time and peak memory of one MoE training step on the flow engine, by GPU count.

Usage: python benchmarks/bench_training.py [--gpus 256 512 1024] [--layers 16]
       [--microbatches 16] [--dp-algorithm ring|hierarchical] [--markdown]

Workload: the library scenario ``train-1t-moe`` (Kimi K2, PP 16 x EP 16, ZeRO-1 data
parallelism, 4,096-token micro-batches, ``--layers`` of the model's 61 layers) on the
``h800-deepep`` preset with GPUs / 8 nodes: the data-parallel size grows with the GPU count, and
the step's messages faster than linearly with it (each data-parallel ring has DP - 1 steps;
``--dp-algorithm hierarchical`` runs the data-parallel reduction scale-up first, then over one
rank per node: ``workload.training.dp_algorithm``).
Each size runs in its own process so that its peak resident memory (``ru_maxrss``) is its own;
the script prints the graph's nodes and messages, the CPU seconds of the whole run (graph
build, engine, results; no plots), the peak memory, the simulated step time, and the
10,240-GPU step's message count (its graph built, not run) times the worst CPU time and memory
per message of the sizes run (the issue's target: a 10,240-GPU step in < 10 min and < 16 GiB on
one core).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

TARGET_GPUS = 10_240


def one(gpus: int, layers: int, microbatches: int, dp_algorithm: str) -> dict:
    """Run one size in this process and return its figures."""
    import podsim

    sets = [
        f"cluster.params.nodes={gpus // 8}",
        f"workload.training.layers={layers}",
        f"workload.training.microbatches={microbatches}",
        f"workload.training.dp_algorithm={dp_algorithm}",
        "outputs.plots=false",
    ]
    c0 = time.process_time()
    # force: past the default memory budget (half this machine's memory), not its memory
    res = podsim.run("train-1t-moe", overrides=sets, force=True)
    cpu = time.process_time() - c0
    t = res.summary["training"]
    return {
        "gpus": gpus,
        "messages": len(res.messages),
        "cpu_s": cpu,
        "peak_MiB": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "step_ms": t["step_time_s"] * 1e3,
        "mfu": t["mfu"],
    }


def target_messages(layers: int, microbatches: int, dp_algorithm: str) -> int:
    """Messages of the 10,240-GPU step (PP 16 x EP 16 x DP 640, 8 GPUs per node), from its
    graph alone (with the ring: about 2 min of CPU and 9 GiB here)."""
    from podsim.workloads.training.step import TrainingSpec, build_training_step

    spec = TrainingSpec("kimi-k2", gpus=TARGET_GPUS, pp=16, ep=16, microbatches=microbatches,
                        layers=layers, gpus_per_node=8, dp_algorithm=dp_algorithm)  # fmt: skip
    return build_training_step(spec).num_messages


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpus", type=int, nargs="+", default=[256, 512])
    ap.add_argument("--layers", type=int, default=16)
    ap.add_argument("--microbatches", type=int, default=16)
    ap.add_argument("--dp-algorithm", choices=("ring", "hierarchical"), default="ring")
    ap.add_argument("--markdown", action="store_true", help="print a Markdown table")
    ap.add_argument("--one", type=int, help=argparse.SUPPRESS)  # child process: one size
    a = ap.parse_args()
    if a.one:
        print(json.dumps(one(a.one, a.layers, a.microbatches, a.dp_algorithm)))
        return
    rows = []
    print(f"data-parallel reduction: {a.dp_algorithm}", flush=True)
    for n in a.gpus:
        if n % 256:
            ap.error(f"--gpus {n}: use multiples of 256 (PP 16 x EP 16)")
        cmd = [sys.executable, __file__, "--one", str(n), "--layers", str(a.layers),
               "--microbatches", str(a.microbatches), "--dp-algorithm", a.dp_algorithm]  # fmt: skip
        out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
        rows.append(json.loads(out.strip().splitlines()[-1]))
        r = rows[-1]
        print(
            f"{r['gpus']:>6} GPUs  {r['messages']:>9,} messages  {r['cpu_s']:7.1f} s CPU  "
            f"{r['peak_MiB']:8,.0f} MiB  step {r['step_ms']:8.1f} ms  MFU {r['mfu'] * 100:.1f} %",
            flush=True,
        )
    if TARGET_GPUS not in a.gpus:
        per_msg_cpu = max(r["cpu_s"] / r["messages"] for r in rows)
        per_msg_mem = max(r["peak_MiB"] / r["messages"] for r in rows)
        # the step's messages grow faster than the GPUs (each data-parallel ring has DP - 1
        # steps): count them on the 10,240-GPU graph itself (built, not run)
        msgs = target_messages(a.layers, a.microbatches, a.dp_algorithm)
        print(
            f"{TARGET_GPUS:,} GPUs: {msgs:,} messages (graph built, not run); at the worst "
            f"per-message cost of the sizes run: {msgs * per_msg_cpu / 60:,.1f} min CPU, "
            f"{msgs * per_msg_mem / 1024:,.1f} GiB (estimate; target < 10 min, < 16 GiB)"
        )
    if a.markdown:
        print("\n| GPUs | messages | CPU | peak memory | step | MFU |")
        print("|---:|---:|---:|---:|---:|---:|")
        for r in rows:
            mfu = r["mfu"] * 100
            print(f"| {r['gpus']:,} | {r['messages']:,} | {r['cpu_s']:.1f} s | "
                  f"{r['peak_MiB']:,.0f} MiB | {r['step_ms']:.1f} ms | {mfu:.1f} % |")  # fmt: skip


if __name__ == "__main__":
    main()
