"""Transport speed: all-to-all of RDMA WRITEs between 64 hosts on a leaf-spine (issue 4).

Every host sends one ``--size`` message to every other host at t = 0 through a non-blocking
leaf-spine (8 leaves x 8 hosts, 8 spines, 400GbE). The issue's two configurations run by
default: DCQCN on the spraying transport, and spray + UEC NSCC (``--configs`` picks others as
``cc/selector[/gbn|sr]``). The same traffic matrix also goes through the bare fabric
(line-rate round-robin sources, spraying, no transport, no ACKs) to measure the fabric's own
cost per packet-hop on this workload.

Printed per configuration: packet-hops (data, ACK and control packets over every link), CPU and
wall seconds, packet-hops per CPU second, scheduled events per packet-hop, completion times
(mean, p99, max), retransmitted packets, and the transport's cost relative to the bare fabric:
CPU time per packet-hop, target <= 2x. CPU time (``time.process_time``) is the figure to
compare on a shared machine; wall time is printed too.

Packet-hops count ACKs: with one ACK per data packet (``--ack-every 1``, the default model)
the transport carries twice the bare run's hops, and the ACK hops cost the fabric as much as
data hops. The total CPU ratio (same data, transport vs bare) is printed as well; ACK
coalescing (``--ack-every 4``) cuts that total by roughly 40 % but the per-hop ratio much
less, because it removes fabric hops and the NIC's per-ACK work in about the same proportion.

Figures (2-core shared VM, Python 3.11, ``--repeat 3``, least CPU of three; other jobs kept
the load average at 0.6-2, which moves the ratios by up to +-0.15 between sessions):

=========================  ===========  ===========
CPU per hop vs bare         dcqcn/spray  nscc/spray
=========================  ===========  ===========
before, 1 MiB (186370c)     2.36x        2.66x
after, 1 MiB, quiet         1.71x        1.85x
after, 1 MiB, load 1.2-2    1.78x        2.02x
after, 256 KiB / 64 KiB     1.78 / 1.74  1.87 / 1.78
=========================  ===========  ===========

(1 MiB; the lead's earlier run of the old code gave 2.50x / 2.70x.) Simulated results are
bit-identical to before: same completion times, counters and per-port tables for the same
seed. What made the difference (steps measured at 256 KiB, DCQCN, CPU s: 10.9 -> 10.0 ->
8.2 -> 7.3, each +-0.3 with the machine's load):

* No cancelled timers on the event heap (10.9 -> 10.0 with the next item): QP timer re-arms
  inside the NIC's timer callback used to schedule, and at once cancel, a far-future wake-up
  each, ~2,700-3,600 dead entries in a heap of ~6,600-7,400; now one wake-up per NIC and the
  heap holds ~3,850 entries (the bare run ~2,050: ACKs in flight).
* No stop predicate per event: :meth:`RdmaNetwork.run` lets the last completion schedule an
  urgent check (:func:`podsim.fabric.kernel.stop_after_event`) instead of calling ``stop()`` after
  every event.
* Memory, not instructions (-> 8.2 -> 7.3). The NIC's code runs 2-3x slower per call with
  4,032 QPs than the same code with 240 QPs (16 hosts): each packet touches a different QP's
  state, and that state is out of cache. ``SenderReliability._tx_time`` was a list holding one
  float object per PSN ever sent (1 M live floats at 1 MiB, spread through the allocator's
  pools, which slowed the fabric's own functions too): now a raw ``array('d')``. One shared
  CCEvent per NIC instead of one per QP; QPs keep the end PSN of the next message to
  complete, deliver and segment, so most packets never touch Message objects or deques; the
  responder state is one object (:class:`RecvQp` *is* its ReceiverReliability) that data
  packets point to, so the receiver does not touch the sender's QP.
* Fewer calls per packet (part of -> 8.2): the requeue after a transmission and
  ``may_send`` inlined in the pull; a specialised path for the common ACK (next PSN, no SACK
  state) and for the in-order data packet; DCQCN flows without a CNP yet skip their no-op
  ``on_tx`` (``FlowCC.tx_events``; due timers still run); NSCC's window clamp without builtin
  calls.

Where the time goes now (cProfile, 1 MiB, DCQCN, self time; cProfile inflates small
functions): the fabric (switch receive and dequeue, port start, heap push/pop, the event
loop) about 65 %, the NIC's transmit path (pull, build) about 16 %, its receive path (RX
pipeline, responder, ACK handling, timers) about 18 %. NSCC's ACK handler costs about 1-1.5 s
more than DCQCN at 1 MiB. Events per packet-hop equal the bare fabric's (1.97 vs 1.96).

    python benchmarks/bench_nic.py                  # issue configuration, 1 MiB messages
    python benchmarks/bench_nic.py --size 256KiB    # quicker
    python benchmarks/bench_nic.py --leaves 4 --hosts-per-leaf 4 --size 64KiB   # smoke test
    python benchmarks/bench_nic.py --size 256KiB --repeat 3   # steadier on a busy machine
"""

from __future__ import annotations

import argparse
import gc
import time

import numpy as np
import simpy
from podsim.fabric.kernel import events_scheduled
from podsim.fabric.kernel import run as kernel_run
from podsim.fabric.network import Network
from podsim.fabric.packet import DATA, ROCE_OVERHEAD, Packet
from podsim.fabric.topology import build_topology
from podsim.fabric.units import fmt_time, parse_size
from podsim.nic.nic import NicConfig, RdmaNetwork


def topology(args: argparse.Namespace):
    return build_topology("leaf-spine", hosts_per_leaf=args.hosts_per_leaf, leaves=args.leaves)


class RoundRobinSource:
    """Bare-fabric endpoint for the baseline: line rate, no transport, no ACKs; it sends one
    packet to each destination in turn, so the fabric carries the all-to-all's traffic matrix
    with every flow active at once, as the transport runs do (a FIFO host would run one flow
    at a time and congest one receiver after another)."""

    def __init__(self, net: Network, endpoint: str, dsts: list[int], size: int, mtu: int):
        self.env = net.env
        self.id = net.endpoint_id(endpoint)
        self.port = net.attach(endpoint, self)
        self.port.source = self.pull
        self.left = [[d, size, 0] for d in dsts]  # dst, bytes left, next PSN
        self.mtu = mtu
        self.i = 0
        self.ev = 0
        self.delivered = 0

    def pull(self) -> Packet | None:
        left = self.left
        if not left:
            return None
        i = self.i % len(left)
        rec = left[i]
        n = min(self.mtu, rec[1])
        pkt = Packet(n, self.id, rec[0], (self.id << 20) | rec[0], rec[2], self.ev, DATA,
                     ROCE_OVERHEAD, self.env._now)  # fmt: skip
        self.ev += 1
        rec[1] -= n
        rec[2] += 1
        if rec[1] <= 0:
            left.pop(i)
            self.i = i
        else:
            self.i = i + 1
        return pkt

    def receive(self, pkt: Packet) -> None:
        self.delivered += pkt.size


def bare(args: argparse.Namespace) -> dict[str, float]:
    """The fabric alone on the same traffic matrix: per-packet spraying, no transport."""
    env = simpy.Environment()
    net = Network(env, topology(args), seed=args.seed)
    ids = list(range(len(net.endpoints)))
    srcs = [
        RoundRobinSource(net, name, [d for d in ids if d != i], args.size, 4096)
        for i, name in enumerate(net.endpoints)
    ]
    for s in srcs:
        s.port.kick()
    gc.collect()
    e0 = events_scheduled(env)
    c0, t0 = time.process_time(), time.perf_counter()
    kernel_run(env)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    hops = net.packet_hops()
    sent = args.size * len(ids) * (len(ids) - 1)
    got = sum(s.delivered for s in srcs)
    return {
        "wall": wall,
        "cpu": cpu,
        "hops": hops,
        "events": events_scheduled(env) - e0 - 1,
        "lost": sent - got,
        "sim": env.now,
    }


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
    c0, t0 = time.process_time(), time.perf_counter()
    rdma.run()
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    hops = net.packet_hops()
    m = rdma.message_table()
    q = rdma.qp_table()
    fct = m.fct_s.to_numpy()
    return {
        "wall": wall,
        "cpu": cpu,
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
    ap.add_argument(
        "--repeat", type=int, default=1, help="runs per configuration; the least CPU time counts"
    )
    args = ap.parse_args(argv)
    args.size = int(parse_size(args.size))

    hosts = args.leaves * args.hosts_per_leaf
    print(
        f"all-to-all, {hosts} hosts on leaf-spine {args.leaves}x{args.hosts_per_leaf} "
        f"(non-blocking, 400GbE), {hosts * (hosts - 1)} messages of {args.size} B, "
        f"ACK every {args.ack_every} packet(s)"
    )
    base_per_hop = base_cpu = None
    if not args.no_bare:
        b = min((bare(args) for _ in range(args.repeat)), key=lambda r: r["cpu"])
        base_per_hop = b["cpu"] / b["hops"]
        base_cpu = b["cpu"]
        print(
            f"  bare fabric (same traffic, line rate, spraying, no transport): {b['hops']:,} "
            f"packet-hops in {b['cpu']:.1f} s CPU ({b['wall']:.1f} s wall) = "
            f"{b['hops'] / b['cpu']:,.0f} hops/CPU-s, {b['events'] / b['hops']:.2f} events/hop, "
            f"done at {fmt_time(b['sim'])}, {b['lost']:,} B lost"
        )
    for spec in args.configs.split(","):
        r = min((transport(args, spec.strip()) for _ in range(args.repeat)), key=lambda r: r["cpu"])
        per_hop = r["cpu"] / r["hops"]
        ratio = (
            f", {per_hop / base_per_hop:.2f}x bare CPU per hop "
            f"({r['cpu'] / base_cpu:.2f}x bare CPU in total)"
            if base_per_hop
            else ""
        )
        print(
            f"  {spec:14s}: {r['hops']:,} packet-hops in {r['cpu']:.1f} s CPU "
            f"({r['wall']:.1f} s wall) = {r['hops'] / r['cpu']:,.0f} hops/CPU-s, "
            f"{r['events'] / r['hops']:.2f} events/hop{ratio}\n"
            f"  {'':14s}  completion mean {fmt_time(r['fct_mean'])}, p99 "
            f"{fmt_time(r['fct_p99'])}, max {fmt_time(r['fct_max'])}; retransmitted "
            f"{r['retx']:,} of {r['pkts']:,} packets, {r['drops']:,} drops"
        )


if __name__ == "__main__":
    main()
