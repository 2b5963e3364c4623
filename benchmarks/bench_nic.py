"""Transport speed: all-to-all of RDMA WRITEs between 64 hosts on a leaf-spine (issue 4).

Every host sends one ``--size`` message to every other host at t = 0 through a non-blocking
leaf-spine (8 leaves x 8 hosts, 8 spines, 400GbE), once with DCQCN and per-QP ECMP... no:
the issue's two configurations are DCQCN (with the default spraying transport) and
spray + NSCC; ``--configs`` picks others (``cc/selector[/gbn]``). The same message set is also
run through the bare fabric (:class:`fabric.host.Host`: line rate, no transport) to measure
the fabric's own wall time per packet-hop on this workload.

Printed per configuration: packet-hops (data, ACK and control packets over every link), wall
seconds, packet-hops per wall second, scheduled events per packet-hop, completion times (mean,
p99, max), retransmitted packets, and the transport's cost relative to the bare fabric
(wall time per packet-hop, target <= 2x).

    python benchmarks/bench_nic.py                  # issue configuration, 1 MiB messages
    python benchmarks/bench_nic.py --size 256KiB    # quicker
    python benchmarks/bench_nic.py --leaves 4 --hosts-per-leaf 4 --size 64KiB   # smoke test
"""

from __future__ import annotations

import argparse
import gc
import time

import numpy as np
import simpy

from fabric.host import make_hosts
from fabric.kernel import events_scheduled
from fabric.kernel import run as kernel_run
from fabric.network import Network
from fabric.topology import build_topology
from fabric.units import fmt_time, parse_size
from nic.nic import NicConfig, RdmaNetwork


def topology(args: argparse.Namespace):
    return build_topology("leaf-spine", hosts_per_leaf=args.hosts_per_leaf, leaves=args.leaves)


def bare(args: argparse.Namespace) -> dict[str, float]:
    """The fabric alone: line-rate hosts, per-packet spraying, no ACKs."""
    env = simpy.Environment()
    net = Network(env, topology(args), seed=args.seed)
    hosts = make_hosts(net, spray=True)
    names = net.endpoints
    for i, a in enumerate(names):
        for j, b in enumerate(names):
            if i != j:
                hosts[a].add_message(b, args.size)
    gc.collect()
    e0 = events_scheduled(env)
    t0 = time.perf_counter()
    kernel_run(env)
    wall = time.perf_counter() - t0
    hops = net.packet_hops()
    return {"wall": wall, "hops": hops, "events": events_scheduled(env) - e0 - 1}


def transport(args: argparse.Namespace, spec: str) -> dict[str, float]:
    parts = spec.split("/")
    cc, sel = parts[0], parts[1]
    rel = parts[2] if len(parts) > 2 else "sr"
    env = simpy.Environment()
    net = Network(env, topology(args), seed=args.seed)
    cfg = NicConfig(cc=cc, selector=sel, reliability=rel, ack_every=args.ack_every)
    rdma = RdmaNetwork(net, cfg, seed=args.seed)
    n = len(rdma.nics)
    for i in range(n):
        for j in range(n):
            if i != j:
                rdma.post(i, j, args.size)
    gc.collect()
    e0 = events_scheduled(env)
    t0 = time.perf_counter()
    rdma.run()
    wall = time.perf_counter() - t0
    hops = net.packet_hops()
    m = rdma.message_table()
    q = rdma.qp_table()
    fct = m.fct_s.to_numpy()
    return {
        "wall": wall,
        "hops": hops,
        "events": events_scheduled(env) - e0 - 1,
        "fct_mean": float(fct.mean()),
        "fct_p99": float(np.quantile(fct, 0.99)),
        "fct_max": float(fct.max()),
        "retx": int(q.retx_pkts.sum()),
        "pkts": int(m.packets.sum()),
        "drops": net.dropped_packets(),
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--size", default="1MiB", help="bytes per message (default 1MiB)")
    ap.add_argument("--leaves", type=int, default=8)
    ap.add_argument("--hosts-per-leaf", type=int, default=8)
    ap.add_argument("--ack-every", type=int, default=1, help="ACK coalescing (packets)")
    ap.add_argument(
        "--configs",
        default="dcqcn/spray,nscc/spray",
        help="comma-separated cc/selector[/gbn|sr] runs (default: the issue's two)",
    )
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--no-bare", action="store_true", help="skip the bare-fabric baseline")
    args = ap.parse_args(argv)
    args.size = int(parse_size(args.size))

    hosts = args.leaves * args.hosts_per_leaf
    print(
        f"all-to-all, {hosts} hosts on leaf-spine {args.leaves}x{args.hosts_per_leaf} "
        f"(non-blocking, 400GbE), {hosts * (hosts - 1)} messages of {args.size} B, "
        f"ACK every {args.ack_every} packet(s)"
    )
    base_per_hop = None
    if not args.no_bare:
        b = bare(args)
        base_per_hop = b["wall"] / b["hops"]
        print(
            f"  bare fabric (line-rate hosts, spraying): {b['hops']:,} packet-hops in "
            f"{b['wall']:.1f} s = {b['hops'] / b['wall']:,.0f} hops/s, "
            f"{b['events'] / b['hops']:.2f} events/hop"
        )
    for spec in args.configs.split(","):
        r = transport(args, spec.strip())
        per_hop = r["wall"] / r["hops"]
        ratio = f", {per_hop / base_per_hop:.2f}x bare per hop" if base_per_hop else ""
        print(
            f"  {spec:14s}: {r['hops']:,} packet-hops in {r['wall']:.1f} s = "
            f"{r['hops'] / r['wall']:,.0f} hops/s, {r['events'] / r['hops']:.2f} events/hop"
            f"{ratio}\n"
            f"  {'':14s}  completion mean {fmt_time(r['fct_mean'])}, p99 "
            f"{fmt_time(r['fct_p99'])}, max {fmt_time(r['fct_max'])}; retransmitted "
            f"{r['retx']:,} of {r['pkts']:,} packets, {r['drops']:,} drops"
        )


if __name__ == "__main__":
    main()
