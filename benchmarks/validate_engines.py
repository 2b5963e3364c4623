"""Cross-validation: the same scenarios on the packet and the flow engine, and their errors.

Usage: python benchmarks/validate_engines.py [--tokens 512] [--size 1MiB] [--endpoint nic]
       [--cc dcqcn] [--selector spray ecmp] [--only NAME ...] [--markdown]

Scenarios (DeepEP's H800 setup, ``h800-deepep``: 8 GPUs per node, NVLink inside, one 400G
RoCE NIC per GPU on a rail-optimised 1:1 fabric; SmartNIC defaults unless overridden):

- ``permutation``: 32 ranks, each sends ``--size`` to one partner (a random derangement);
- ``all-to-all``: 32 ranks, every rank sends ``--size`` / 8 to every other rank;
- ``moe-ep16/32/64``: one DeepSeek-V3 layer (dispatch + compute + combine), DeepEP normal
  mode, ``--tokens`` per rank, expert load skewed log-normally to a per-rank max/mean of 2.56
  (TensorRT-LLM's DeepSeek-R1 EP32 measurement, docs/physics.md [S]);
- ``incast``: 16 ranks send ``--size`` each to rank 0.

Each scenario runs once per ``--selector`` (default both ``spray``, the SmartNIC's packet
spraying, and ``ecmp``, one hashed path per QP: the flow engine replays the packet engine's
per-hop hash, so both engines put each QP on the same path).

For every communication phase it prints the completion time on both engines, the relative
error of the flow engine's completion time and of its per-GPU bandwidth (NCCL algbw; DeepEP's
RDMA bandwidth per GPU for the MoE phases), the physical bound and the packet run's drops and
retransmissions. A scenario is *loss-free* when its packet run marked, paused, dropped and
retransmitted nothing, else *congestion*; the targets are 5 % (loss-free) and 15 %
(congestion). ``--markdown`` prints the table
for the README.
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np
import pandas as pd
from podsim.fabric.units import parse_size
from podsim.scenarios.build.cluster import assign_hops, build_cluster
from podsim.scenarios.engines import ENGINES, RunContext
from podsim.scenarios.engines.bound import bound_summary
from podsim.scenarios.input.loader import load_scenario
from podsim.scenarios.report.markdown import frame_to_markdown
from podsim.scenarios.runner import prepare

NO_COMPUTE = pd.DataFrame({"step": [], "layer": [], "rank": [], "compute_s": []})


def scenario(nodes: int, args: argparse.Namespace, workload: dict) -> object:
    sc, _ = load_scenario(
        {
            "name": "validate",
            "seed": args.seed,
            "sim": {"endpoint": args.endpoint},
            "cluster": {
                "preset": "h800-deepep",
                "params": {"nodes": nodes},
                "nic": {
                    "cc": {"name": args.cc},
                    "multipath": {"selector": args.selector},
                },
            },
            "workload": workload,
            "outputs": {"plots": False},
        }
    )
    return sc


def synthetic_ctx(name: str, args: argparse.Namespace) -> RunContext:
    from podsim.workloads import synthetic

    size = parse_size(args.size)
    if name == "permutation":
        n, nodes = 32, 4
        tr = synthetic.permutation(n, size, seed=args.seed)
    elif name == "all-to-all":
        n, nodes = 32, 4
        tr = synthetic.uniform_all_to_all(n, max(1, size // 8))
    elif name == "incast":
        n, nodes = 16, 2
        tr = synthetic.incast(n, size)
    else:
        raise ValueError(name)
    sc = scenario(nodes, args, {"synthetic": {"pattern": "uniform"}})
    cl = build_cluster(sc, n)
    tr = tr.copy()
    tr["phase"] = "dispatch"
    tr = assign_hops(tr, cl)
    tr = tr[tr["bytes"] > 0].reset_index(drop=True)
    return RunContext(sc, cl, tr, NO_COMPUTE)


def moe_ctx(ep: int, args: argparse.Namespace) -> RunContext:
    sc = scenario(
        ep // 8,
        args,
        {
            "moe": {
                "model": "deepseek-v3",
                "ep_size": ep,
                "tokens_per_rank": args.tokens,
                "mode": "deepep-normal",
                "skew": {"kind": "lognormal", "max_mean": 2.56},
            }
        },
    )
    prep = prepare(sc)
    return RunContext(sc, prep.cluster, prep.trace, prep.compute)


def rel(a: float | None, b: float | None) -> float:
    if a is None or b is None or not (math.isfinite(a) and math.isfinite(b)) or b == 0:
        return math.nan
    return (a - b) / b


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, default=512)
    ap.add_argument("--size", default="1MiB")
    ap.add_argument("--endpoint", default="nic", choices=["nic", "host"])
    ap.add_argument("--cc", default="dcqcn")
    ap.add_argument("--selector", nargs="+", default=["spray", "ecmp"])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--only", nargs="*", default=None)
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args()
    names = ["permutation", "all-to-all", "moe-ep16", "moe-ep32", "moe-ep64", "incast"]
    if args.only:
        names = [n for n in names if n in args.only]
    rows = []
    selectors = list(args.selector)
    for name, selector in [(n, sel) for sel in selectors for n in names]:
        args.selector = selector
        ctx = moe_ctx(int(name[6:]), args) if name.startswith("moe") else synthetic_ctx(name, args)
        res = {}
        for engine in ("packet", "flow"):
            t0 = time.perf_counter()
            out = ENGINES.get(engine)(ctx)
            res[engine] = (out.summary(ctx.cluster.num_ranks), time.perf_counter() - t0)
        bound = bound_summary(ctx)["phases"]
        sp, wp = res["packet"]
        sf, wf = res["flow"]
        c = sp["counters"]
        lossy = c["drops"] + c["retransmitted_packets"] + c["ecn_marks"] + c["pfc_pauses"] > 0
        for ph in ("dispatch", "combine", "other"):
            if ph not in sp["phases"]:
                continue
            mp, mf = sp["phases"][ph], sf["phases"][ph]
            bw_key = "rdma_send_bw_per_gpu_Bps" if name.startswith("moe") else "algbw_per_gpu_Bps"
            rows.append(
                {
                    "scenario": name,
                    "selector": selector,
                    "phase": ph,
                    "regime": "congestion" if lossy else "loss-free",
                    "packet_us": mp["completion_time_s"] * 1e6,
                    "flow_us": mf["completion_time_s"] * 1e6,
                    "err_time": rel(mf["completion_time_s"], mp["completion_time_s"]),
                    "bw_packet_GBps": (mp[bw_key] or math.nan) / 1e9,
                    "bw_flow_GBps": (mf[bw_key] or math.nan) / 1e9,
                    "err_bw": rel(mf[bw_key], mp[bw_key]),
                    "bound_us": bound[ph]["bound_s"] * 1e6,
                    "marks": sp["counters"]["ecn_marks"],
                    "drops": sp["counters"]["drops"],
                    "retx": sp["counters"]["retransmitted_packets"],
                    "wall_packet_s": wp,
                    "wall_flow_s": wf,
                }
            )
        r = rows[-1]
        print(
            f"# {name} ({selector}): packet {wp:.1f} s, flow {wf:.1f} s wall; last phase err "
            f"{100 * r['err_time']:+.1f} %",
            flush=True,
        )
    df = pd.DataFrame(rows)
    target = np.where(df["regime"] == "loss-free", 0.05, 0.15)
    df["ok"] = np.where(np.abs(df["err_time"]) <= target, "yes", "NO")
    fmt = {
        "packet_us": "{:.1f}".format,
        "flow_us": "{:.1f}".format,
        "bound_us": "{:.1f}".format,
        "err_time": lambda x: f"{100 * x:+.1f} %",
        "err_bw": lambda x: f"{100 * x:+.1f} %",
        "bw_packet_GBps": "{:.1f}".format,
        "bw_flow_GBps": "{:.1f}".format,
        "wall_packet_s": "{:.1f}".format,
        "wall_flow_s": "{:.1f}".format,
    }
    shown = df.copy()
    for c, f in fmt.items():
        shown[c] = shown[c].map(f)
    print(
        f"\nendpoint {args.endpoint}, CC {args.cc}, selectors {' '.join(selectors)}, tokens/rank "
        f"{args.tokens}, message size {args.size}; targets 5 % loss-free, 15 % congestion"
    )
    if args.markdown:
        print(frame_to_markdown(shown, digits=1))
    else:
        print(shown.to_string(index=False))
    worst = df.groupby("regime")["err_time"].apply(lambda x: float(np.abs(x).max()))
    for regime, w in worst.items():
        print(f"worst |error| of completion time, {regime}: {100 * w:.1f} %")


if __name__ == "__main__":
    main()
