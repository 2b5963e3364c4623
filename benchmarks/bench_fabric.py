"""Packet-engine speed: a 16-host leaf-spine permutation at 400G (issue 2, "Must show").

Every host sends ``--packets`` packets of ``--size`` payload bytes to a distinct host on
another leaf (a fixed random derangement across leaves, seeded), through a non-blocking
leaf-spine (4 leaves x 4 hosts, 4 spines, 400GbE everywhere). Prints packet-hops per wall
second, scheduled events per packet-hop, and peak memory (tracemalloc in a separate,
slower run, so the timing run is not disturbed; skip it with --no-mem). The event loop is
:func:`podsim.fabric.kernel.run` (``--simpy-run`` for SimPy's own ``env.run``).

    python benchmarks/bench_fabric.py                 # the issue's configuration
    python benchmarks/bench_fabric.py --packets 2000  # quick look
    python benchmarks/bench_fabric.py --checked       # with the invariant checks (issue 9)

Target (issue 2): >= 400,000 packet-hops/s and <= 5 events per packet-hop on one core.
"""

from __future__ import annotations

import argparse
import gc
import random
import resource
import sys
import time
import tracemalloc

import simpy
from podsim.fabric.host import conservation, make_hosts
from podsim.fabric.kernel import events_scheduled, run
from podsim.fabric.network import Network
from podsim.fabric.switch import SwitchConfig
from podsim.fabric.topology import leaf_spine


def permutation(n: int, hosts_per_leaf: int, seed: int) -> list[int]:
    """A random permutation where nobody sends to a host on its own leaf."""
    rng = random.Random(seed)
    while True:
        perm = list(range(n))
        rng.shuffle(perm)
        if all(i // hosts_per_leaf != perm[i] // hosts_per_leaf for i in range(n)):
            return perm


def build(args: argparse.Namespace):
    env = simpy.Environment()
    g = leaf_spine(hosts_per_leaf=args.hosts_per_leaf, leaves=args.leaves)
    net = Network(env, g, SwitchConfig(), seed=args.seed)
    hosts = make_hosts(net, mtu=args.size, spray=not args.ecmp)
    names = net.endpoints
    perm = permutation(len(names), args.hosts_per_leaf, args.seed)
    for i, name in enumerate(names):
        hosts[name].add_message(names[perm[i]], args.size * args.packets)
    return env, net, hosts


def run_once(args: argparse.Namespace) -> dict[str, float]:
    env, net, hosts = build(args)
    gc.collect()
    e0 = events_scheduled(env)
    c0 = time.process_time()
    t0 = time.perf_counter()
    if args.simpy_run:
        env.run()
    elif args.checked:
        from podsim.fabric.invariants import Checker, HostEndpoints, run_checked

        checker = Checker(net, endpoints=[HostEndpoints(net, hosts.values())])
        run_checked(env, checker=checker, check_every=args.check_every)
    else:
        run(env)
    wall = time.perf_counter() - t0
    cpu = time.process_time() - c0
    e1 = events_scheduled(env)
    hops = net.packet_hops()
    sent, delivered, dropped, inflight = conservation(net, hosts.values())
    assert sent == delivered + dropped + inflight, "bytes not conserved"
    done = [m.t_done for h in hosts.values() for m in h.messages if m.done]
    incomplete = sum(not m.done for h in hosts.values() for m in h.messages)
    return {
        "wall_s": wall,
        "cpu_s": cpu,
        "hops": hops,
        "hops_per_s": hops / wall,
        "hops_per_cpu_s": hops / cpu,
        "events_per_hop": (e1 - e0 - 1) / hops,
        "sim_s": env.now,
        "delivered": delivered,
        "dropped": dropped,
        "max_fct_s": max(done, default=float("nan")),
        "incomplete": incomplete,
    }


def peak_memory(args: argparse.Namespace) -> float:
    tracemalloc.start()
    env, _net, _hosts = build(args)
    env.run()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--packets", type=int, default=10_000, help="packets per host")
    ap.add_argument("--size", type=int, default=4096, help="payload bytes per packet")
    ap.add_argument("--leaves", type=int, default=4)
    ap.add_argument("--hosts-per-leaf", type=int, default=4)
    ap.add_argument("--ecmp", action="store_true", help="per-flow ECMP instead of spraying")
    ap.add_argument("--repeat", type=int, default=3, help="timing runs; the best is reported")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--no-mem", action="store_true", help="skip the tracemalloc run")
    ap.add_argument(
        "--simpy-run",
        action="store_true",
        help="use simpy's env.run instead of podsim.fabric.kernel.run",
    )
    ap.add_argument(
        "--checked",
        action="store_true",
        help="podsim.fabric.invariants.run_checked: time checked per event, all invariants every "
        "--check-every events",
    )
    ap.add_argument("--check-every", type=int, default=200_000)
    args = ap.parse_args(argv)

    runs = [run_once(args) for _ in range(args.repeat)]
    best = max(runs, key=lambda r: r["hops_per_s"])
    hosts = args.leaves * args.hosts_per_leaf
    loop = "simpy env.run" if args.simpy_run else "podsim.fabric.kernel.run"
    if args.checked:
        loop = (
            f"podsim.fabric.invariants.run_checked (invariants every {args.check_every:,} events)"
        )
    mode = "ECMP" if args.ecmp else "random spraying"
    print(
        f"leaf-spine {args.leaves}x{args.hosts_per_leaf} ({hosts} hosts), 400GbE, "
        f"{args.packets} x {args.size} B per host, {mode}, {loop}"
    )
    print(f"packet-hops          {best['hops']:,}")
    walls = ", ".join(f"{r['wall_s']:.3f}" for r in runs)
    print(f"wall time (best/{args.repeat})  {best['wall_s']:.3f} s   (all: {walls})")
    print(f"packet-hops / s      {best['hops_per_s']:,.0f}   (target >= 400,000; wall clock)")
    print(f"packet-hops / CPU s  {best['hops_per_cpu_s']:,.0f}   (process CPU time)")
    print(f"events / packet-hop  {best['events_per_hop']:.3f}   (target <= 5)")
    print(
        f"simulated time       {best['sim_s'] * 1e6:.1f} us, slowest message "
        f"{best['max_fct_s'] * 1e6:.1f} us, dropped {best['dropped']:,} B "
        f"({best['incomplete']} messages incomplete: no CC, no retransmission)"
    )
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"max RSS              {rss:.1f} MiB")
    if not args.no_mem:
        print(f"peak traced memory   {peak_memory(args) / 2**20:.1f} MiB (tracemalloc)")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
