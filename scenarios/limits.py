"""Resource limits: refuse, up front, a packet-level run too big for the machine.

Before the packet engine starts, :func:`estimate` prices the run from the scenario, the built
cluster and the trace (no simulation):

* **packets**: every ``rdma`` message is cut into MTU packets (``sim.cell`` cells with the host
  endpoint); the NIC transport adds one ACK per ``ack_coalesce`` data packets;
* **packet-hops**: packets x the mean number of links between the two NIC ports (shortest
  paths of up to :data:`PATH_SAMPLES` sampled source/destination pairs of the trace);
* **events**: packet-hops x :data:`EVENTS_PER_HOP` (1.9, measured on this engine: one event
  per hop on an idle path, two under load, plus the NIC's own wake-ups) plus a few per
  message;
* **wall time**: events / :data:`EVENTS_PER_S` (400 k events/s, measured for the packet engine
  with the SmartNIC transport on one core of the 2-core reference machine; DESIGN.md quotes
  400-670 k packet-hops/s for the bare fabric);
* **memory**: a base for the interpreter and libraries, about 2 KiB per message (trace row,
  transport state, result rows), the packets that fit in every switch buffer at once, and the
  queue-depth samples (ports x simulated time / ``sim.sample_interval`` x 8 B), with the
  simulated time bounded below by the busiest NIC port's bytes at line rate plus compute.

:func:`check_limits` compares the estimate with a :class:`Budget` (default 1 hour and half the
machine's memory, at most 16 GiB; ``PODSIM_MAX_WALL_S`` / ``PODSIM_MAX_MEMORY`` override it) and
raises a :class:`scenarios.errors.ScenarioError` (exit status 2) with the estimate and the
suggestion to use the flow engine. ``podsim run --force`` skips the check. The figures are
estimates for a decision, not predictions: they err on the side of running.
"""

from __future__ import annotations

import math
import os
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import networkx as nx
import numpy as np

from fabric.units import fmt_time, parse_size, parse_time
from scenarios.errors import ScenarioError

if TYPE_CHECKING:
    import pandas as pd

    from scenarios.build import Cluster
    from scenarios.schema import Scenario

__all__ = [
    "EVENTS_PER_HOP",
    "EVENTS_PER_S",
    "PATH_SAMPLES",
    "Budget",
    "Estimate",
    "check_limits",
    "estimate",
]

#: scheduled events per packet-hop of the packet engine (measured: 1.85-1.98)
EVENTS_PER_HOP = 1.9
#: events per message outside the fabric (posting, completion, timeline)
EVENTS_PER_MESSAGE = 8
#: packet-engine speed used to turn events into wall time (see the module docstring)
EVENTS_PER_S = 400_000.0
#: source/destination pairs sampled to measure path lengths
PATH_SAMPLES = 64
BASE_MEMORY = 300 * 2**20  # interpreter, numpy/pandas/networkx/simpy, the cluster objects
BYTES_PER_MESSAGE = 2048
BYTES_PER_PACKET = 400  # a Packet object in flight with its event-heap entry
BYTES_PER_SAMPLE = 8


@dataclass(frozen=True)
class Estimate:
    """What a packet-level run would cost (see the module docstring)."""

    messages: int
    packets: int
    packet_hops: int
    events: int
    wall_s: float
    memory_bytes: int
    sim_time_s: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Budget:
    """The most a run may cost: wall time (s) and memory (bytes)."""

    max_wall_s: float = 3600.0
    max_memory_bytes: int = 16 * 2**30

    @classmethod
    def default(cls) -> Budget:
        """1 hour and half the physical memory (at most 16 GiB), unless the environment sets
        ``PODSIM_MAX_WALL_S`` (seconds or a time like ``2h``) / ``PODSIM_MAX_MEMORY`` (a size
        like ``8GiB``)."""
        mem = 16 * 2**30
        try:
            phys = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
            mem = min(mem, phys // 2)
        except (ValueError, OSError, AttributeError):  # pragma: no cover - non-POSIX
            pass
        wall = 3600.0
        env_wall = os.environ.get("PODSIM_MAX_WALL_S")
        env_mem = os.environ.get("PODSIM_MAX_MEMORY")
        try:
            if env_wall:
                wall = parse_time(env_wall)
            if env_mem:
                mem = int(parse_size(env_mem))
        except ValueError as exc:
            raise ScenarioError(
                f"environment budget PODSIM_MAX_WALL_S={env_wall!r} / PODSIM_MAX_MEMORY="
                f"{env_mem!r}: {exc}"
            ) from None
        return cls(max_wall_s=wall, max_memory_bytes=mem)


def _mean_hops(sc: Scenario, cluster: Cluster, src: np.ndarray, dst: np.ndarray) -> float:
    """Mean links between the NIC ports of sampled (src, dst) rank pairs."""
    if not len(src):
        return 0.0
    g = cluster.graph
    view = g.edge_subgraph(
        [(u, v) for u, v, d in g.edges(data=True) if d.get("kind", "scaleout") != "scaleup"]
    )
    pairs = np.unique(np.stack([src, dst], axis=1), axis=0)
    if len(pairs) > PATH_SAMPLES:
        rng = np.random.default_rng(sc.seed)
        pairs = pairs[rng.choice(len(pairs), PATH_SAMPLES, replace=False)]
    hops = []
    for s, d in pairs.tolist():
        a, b = cluster.rank_ports[s][0], cluster.rank_ports[d][0]
        if a == b:
            continue
        try:
            hops.append(nx.shortest_path_length(view, a, b))
        except (nx.NetworkXNoPath, nx.NodeNotFound):
            continue
    return float(np.mean(hops)) if hops else 2.0


def estimate(
    sc: Scenario, cluster: Cluster, trace: pd.DataFrame, compute: pd.DataFrame | None = None
) -> Estimate:
    """The cost of running ``sc`` on the packet engine (no simulation)."""
    rdma = trace[trace["hop"] == "rdma"]
    src = rdma["src_rank"].to_numpy(np.int64)
    dst = rdma["dst_rank"].to_numpy(np.int64)
    nbytes = rdma["bytes"].to_numpy(np.int64)
    if len(rdma):
        same = cluster.rank_nic[src] == cluster.rank_nic[dst]
        src, dst, nbytes = src[~same], dst[~same], nbytes[~same]
    nic = sc.cluster.nic
    host = sc.sim.endpoint == "host"
    unit = max(nic.mtu, sc.sim.cell or 0) if host else nic.mtu
    data_pkts = int(np.maximum(1, -(-nbytes // unit)).sum()) if len(nbytes) else 0
    packets = data_pkts if host else data_pkts + data_pkts // max(1, nic.ack_coalesce)
    hops = _mean_hops(sc, cluster, src, dst)
    packet_hops = round(packets * hops)
    n_msgs = len(trace)
    events = int(packet_hops * EVENTS_PER_HOP + n_msgs * EVENTS_PER_MESSAGE)
    # simulated time: the busiest NIC port at line rate, plus the slowest rank's compute
    rate = _nic_rate(cluster)
    busiest = 0.0
    if len(nbytes):
        ports = cluster.rank_nic
        out = np.bincount(ports[src], weights=nbytes.astype(float))
        inn = np.bincount(ports[dst], weights=nbytes.astype(float))
        busiest = float(max(out.max(initial=0.0), inn.max(initial=0.0)))
    comp = 0.0
    if compute is not None and len(compute):
        comp = float(compute.groupby("rank")["compute_s"].sum().max())
    sim_t = 8.0 * busiest / rate + comp
    n_ports = 2 * sum(1 for _u, _v, d in cluster.graph.edges(data=True)
                      if d.get("kind", "scaleout") != "scaleup")  # fmt: skip
    samples = sim_t / sc.sim.sample_interval if sc.outputs.queue_series else 0.0
    buffered = (
        sc.cluster.switch.buffer
        * sum(1 for _n, r in cluster.graph.nodes(data="role") if r in ("leaf", "spine", "core"))
        // max(1, nic.mtu)
    )
    memory = int(
        BASE_MEMORY
        + n_msgs * BYTES_PER_MESSAGE
        + min(buffered, packets) * BYTES_PER_PACKET
        + samples * n_ports * BYTES_PER_SAMPLE
    )
    return Estimate(
        messages=n_msgs,
        packets=packets,
        packet_hops=packet_hops,
        events=events,
        wall_s=events / EVENTS_PER_S,
        memory_bytes=memory,
        sim_time_s=sim_t,
    )


def _nic_rate(cluster: Cluster) -> float:
    rates = [
        float(d.get("rate_bps", 0.0))
        for _u, _v, d in cluster.graph.edges(data=True)
        if d.get("tier") == "nic-leaf"
    ]
    return max(rates) if rates and max(rates) > 0 else 400e9


def _gib(n: float) -> str:
    return f"{n / 2**30:.1f} GiB"


def check_limits(
    sc: Scenario,
    cluster: Cluster,
    trace: pd.DataFrame,
    compute: pd.DataFrame | None = None,
    *,
    budget: Budget | None = None,
    force: bool = False,
) -> Estimate | None:
    """Refuse a packet-engine run whose estimate exceeds ``budget`` (ScenarioError naming the
    estimate and the alternatives); ``force`` or another engine skips it. Returns the estimate
    (None when skipped)."""
    if force or sc.engine != "packet":
        return None
    b = budget or Budget.default()
    est = estimate(sc, cluster, trace, compute)
    over = []
    if est.wall_s > b.max_wall_s:
        over.append(f"about {fmt_time(est.wall_s)} of wall time (budget {fmt_time(b.max_wall_s)})")
    if est.memory_bytes > b.max_memory_bytes:
        over.append(f"about {_gib(est.memory_bytes)} of memory (budget {_gib(b.max_memory_bytes)})")
    if over:
        raise ScenarioError(
            f"this scenario is too large for the packet engine: {est.messages:,} messages, "
            f"{est.packets:,} packets, {est.packet_hops:,} packet-hops, ~{est.events:,.0f} "
            f"events, which needs {' and '.join(over)}. Use the flow engine for this size "
            "(--set engine=flow, or engine: bound for the lower bound), or make the run "
            "smaller (fewer tokens, layers or steps; with sim.endpoint: host a sim.cell "
            "above the MTU); pass --force to run it anyway.",
            path="engine",
        )
    if not math.isfinite(est.wall_s):  # pragma: no cover - defensive
        raise ScenarioError("could not estimate the run's size.", path="engine")
    return est
