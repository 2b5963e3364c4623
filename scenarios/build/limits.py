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
  with the SmartNIC transport on one core of the 2-core reference machine; docs/design.md quotes
  400-670 k packet-hops/s for the bare fabric), plus the fluid scale-up model's rate
  re-solves (:func:`scaleup_wall`), which dominate MoE layers with large scale-up domains
  (superpod-moe: about 90 % of the run);
* **memory**: a base for the interpreter and libraries, the cluster
  (:data:`CLUSTER_BYTES_PER_ELEMENT` per node or link), about 2 KiB per message (trace row,
  transport state, result rows), the packets that fit in every switch buffer at once, and the
  queue-depth and tx-byte samples (ports x simulated time / ``sim.sample_interval`` x 16 B),
  with the simulated time bounded below by the busiest NIC port's bytes at line rate plus compute.

Before any of that, :func:`check_cluster_size` prices the cluster graph itself from the topology
parameters alone (:func:`podsim.fabric.topology.topology_size`, a closed form per builder), so an
absurd cluster (``--set cluster.params.nodes=100000000``) is refused in microseconds instead of
hanging while networkx builds it: :data:`CLUSTER_BYTES_PER_ELEMENT` per node or link and
:data:`CLUSTER_ELEMENTS_PER_S` to build and check it, for every engine and for ``validate``,
``trace`` and ``cost`` too. ``--force`` overrides that budget, but not a cluster larger than the
machine's physical memory (it could only end in the out-of-memory killer). The flow and bound
engines are priced too (:func:`estimate_fluid`): :data:`FLUID_BYTES_PER_MESSAGE` per message
for the route tables they hold for every message at once.

:func:`check_packet` compares the estimate with a :class:`Budget` (default 1 hour and half the
machine's memory, at most 16 GiB; ``PODSIM_MAX_WALL_S`` / ``PODSIM_MAX_MEMORY`` override it) and
raises a :class:`podsim.scenarios.errors.ScenarioError` (exit status 2) with the estimate and the
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
from podsim.fabric.units import parse_size, parse_time
from podsim.scenarios.errors import ScenarioError

if TYPE_CHECKING:
    import pandas as pd
    from podsim.fabric.topology import TopologySize
    from podsim.scenarios.build.cluster import Cluster
    from podsim.scenarios.input.schema import Scenario

__all__ = [
    "CLUSTER_BYTES_PER_ELEMENT",
    "CLUSTER_ELEMENTS_PER_S",
    "EVENTS_PER_HOP",
    "EVENTS_PER_S",
    "PATH_SAMPLES",
    "Budget",
    "Estimate",
    "check_cluster_size",
    "check_fluid",
    "check_packet",
    "check_trace_rows",
    "check_workload_size",
    "cluster_size",
    "estimate",
    "physical_memory",
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
#: one queue depth and one cumulative tx-byte count per port and sample (int64 each)
BYTES_PER_SAMPLE = 16
#: the packet engine's scale-up domain is a fluid max-min model (podsim.fabric.scaleup):
#: every transfer that finishes costs a few NumPy passes over the active transfers and a
#: re-solve of the rates at or above its own. Per (step, layer, phase) with m scale-up
#: messages of u distinct (source rank, size) pairs, about S = min(m, SCALEUP_SOLVES_PER_GROUP
#: x u) finishes over SCALEUP_ACTIVE_FRACTION x m active transfers each, at
#: SCALEUP_S_PER_SOLVE + SCALEUP_S_PER_FLOW per active transfer. S/u came out 2.6-4.5 and the
#: active fraction 0.17-0.26 on superpod-moe (EP 256, 128-GPU pods) at tokens_per_rank 4, 16
#: and 64. Cost constants measured there after the partial re-solve (CPU time in the scale-up
#: model: 1.29 s, 2.26 s and 16.9 s over 4,869, 5,687 and 18,053 finishes; predicted 1.1 s,
#: 4.8 s and 16.1 s), so the term is good to about 2x
SCALEUP_SOLVES_PER_GROUP = 3.5
SCALEUP_ACTIVE_FRACTION = 0.2
SCALEUP_S_PER_SOLVE = 1.0e-4
SCALEUP_S_PER_FLOW = 6.0e-8
#: memory per node or link of the built cluster: the networkx graph with its attribute dicts
#: (tracemalloc: 360-435 B per node or link on star, fat-tree, h800-deepep and superpod-128
#: graphs) plus what build_cluster derives from it (graph validation, rank map, PCIe trees);
#: the slope of ``podsim validate quickstart`` peak RSS between 512 and 2048 nodes is 550 B
CLUSTER_BYTES_PER_ELEMENT = 600
#: nodes plus links built, validated and mapped per second (build_topology alone: 630-850 k/s
#: on h800-deepep; the whole validate step about a third of that)
CLUSTER_ELEMENTS_PER_S = 250_000
#: memory per message of the flow and bound engines (route tables of every message at once:
#: link indices, coefficients and fractions over the path columns, and the message tables);
#: peak RSS of benchmarks/bench_training.py (train-1t-moe on the flow engine, hierarchical DP)
#: at 1,024 and 2,048 GPUs: 1,613 and 1,370 B per message with the process's base memory in,
#: 1,140 B per added message between the two; the per-phase link bytes no longer repeat a
#: flow on every member of a bundle (before that: tracemalloc 1.58-1.67 KiB per message on
#: all-to-alls over 64 and 128 ranks, plus the result tables, and 2,048 B here)
FLUID_BYTES_PER_MESSAGE = 1536


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
    #: the part of ``wall_s`` spent in the fluid scale-up model (see SCALEUP_S_PER_FLOW)
    scaleup_wall_s: float = 0.0

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


def physical_memory() -> int | None:
    """This machine's physical memory in bytes (None where the OS does not say)."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):  # pragma: no cover - non-POSIX
        return None


def cluster_size(sc: Scenario) -> tuple[TopologySize | None, str, str]:
    """(size, topology name, scenario key of its parameters) of ``sc``'s cluster, from the
    parameters alone; size None when the builder has no closed form or rejects them."""
    from podsim.fabric.topology import topology_size

    name, params, path = sc.cluster.topology_source()
    return topology_size(name, params), name, path


def _fmt_wall(seconds: float) -> str:
    """A wall time for a person: ``40 s``, ``12 min``, ``4.6 h``, ``3.2 days``."""
    if seconds >= 2 * 86400:
        return f"{seconds / 86400:,.1f} days"
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    if seconds >= 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds:.2g} s" if seconds < 10 else f"{seconds:.0f} s"


def _fmt_bytes(n: float) -> str:
    for scale, unit in ((2**40, "TiB"), (2**30, "GiB"), (2**20, "MiB")):
        if n >= scale:
            return f"{n / scale:,.1f} {unit}"
    return f"{n / 2**10:,.0f} KiB"


def check_cluster_size(
    sc: Scenario, *, force: bool = False, budget: Budget | None = None
) -> TopologySize | None:
    """Refuse, before it is built, a cluster whose graph would not fit the budget's memory
    (ScenarioError at the topology parameters, with the counts and the estimate);
    ``force`` skips the budget but never lets through a cluster larger than the machine's
    physical memory. Returns the size (None when it cannot be computed)."""
    size, name, path = cluster_size(sc)
    if size is None:
        return None
    mem = BASE_MEMORY + size.elements * CLUSTER_BYTES_PER_ELEMENT
    wall = size.elements / CLUSTER_ELEMENTS_PER_S
    phys = physical_memory()
    what = (
        f"topology {name!r} with these parameters has {size.nodes:,} graph nodes, {size.edges:,} "
        f"links and {size.endpoints:,} NIC ports; building it needs about {_fmt_bytes(mem)} "
        f"of memory ({CLUSTER_BYTES_PER_ELEMENT} B per node or link) and about "
        f"{_fmt_wall(wall)}"
    )
    if phys is not None and mem > phys:
        raise ScenarioError(
            f"{what}, more than this machine's {_fmt_bytes(phys)} of memory (even with "
            "--force). Make the cluster smaller.",
            path=path,
        )
    if force:
        return size
    b = budget or Budget.default()
    # memory binds first: at CLUSTER_ELEMENTS_PER_S a 16 GiB graph builds in about 2 minutes,
    # so the wall budget (PODSIM_MAX_WALL_S) stays the simulation's
    if mem > b.max_memory_bytes:
        raise ScenarioError(
            f"{what}, over the memory budget of {_fmt_bytes(b.max_memory_bytes)} "
            "(PODSIM_MAX_MEMORY). Make the cluster smaller, raise the budget, or pass --force "
            "to build it anyway.",
            path=path,
        )
    return size


#: bytes per (token, expert) of the MoE trace generator while it routes one layer: float32
#: router logits and their noise, and the top-k selection's temporaries (podsim.workloads.gating:
#: popularity_logits draws an [N, E] float32 array for all N = ep_size x tokens_per_rank tokens)
MOE_BYTES_PER_TOKEN_EXPERT = 12


#: bytes per row of a generated trace while it is built and held (nine numeric columns of 8 B
#: plus pandas' temporaries while the phases are concatenated) [E: measured order of magnitude]
TRACE_BYTES_PER_ROW = 200


def trace_rows(sc: Scenario) -> tuple[int, str, str] | None:
    """(upper bound on the rows of the generated trace, scenario key, what) from the
    parameters alone: an MoE layer sends at most one message per (source, destination) rank
    pair per phase, and no more than a rank's tokens times the model's top-k. None for
    other workloads (a trace file is read as it is; a synthetic pattern is priced from its
    first step by :func:`check_trace_rows`)."""
    wl = sc.workload
    if wl.moe is not None:
        m = wl.moe
        from podsim.workloads.models import get_model

        try:
            top_k = int(get_model(m.model).top_k)
        except (KeyError, ValueError):
            top_k = int(m.ep_size)
        # a rank's tokens reach at most top_k ranks each: no more pairs than that
        pairs = min(int(m.ep_size) ** 2, int(m.ep_size) * int(m.tokens_per_rank) * top_k)
        rows = int(m.steps) * int(m.layers) * 2 * pairs
        key = "workload.moe.layers" if m.layers >= m.steps else "workload.moe.steps"
        what = f"{m.steps:,} steps x {m.layers:,} layers x 2 phases x {pairs:,} rank pairs"
        return rows, key, what
    return None  # a synthetic pattern is priced from its first step (check_trace_rows)


def workload_memory(sc: Scenario) -> tuple[int, str] | None:
    """(bytes, scenario key) the workload generator needs at once, from the parameters alone:
    the MoE router's logits for a layer, or the generated trace's rows (:func:`trace_rows`),
    whichever is larger; None for workloads with nothing to estimate (a trace file is read as
    it is)."""
    found: list[tuple[int, str]] = []
    rows = trace_rows(sc)
    if rows is not None:
        found.append((rows[0] * TRACE_BYTES_PER_ROW, rows[1]))
    m = sc.workload.moe
    if m is not None:
        from podsim.workloads.models import get_model

        try:
            experts = int(get_model(m.model).routed_experts)
        except (KeyError, ValueError):
            experts = 0
        tokens = int(m.ep_size) * int(m.tokens_per_rank)
        found.append(
            (tokens * experts * MOE_BYTES_PER_TOKEN_EXPERT, "workload.moe.tokens_per_rank")
        )
    return max(found) if found else None


def _check_memory(
    need: float, what: str, fix: str, path: str, *, force: bool, budget: Budget | None
) -> None:
    """Refuse ``need`` bytes over the machine's physical memory (always) or over the budget
    (unless ``force``): ``what`` says what needs it, ``fix`` how to make it smaller."""
    phys = physical_memory()
    if phys is not None and need > phys:
        raise ScenarioError(
            f"{what}, more than this machine's {_fmt_bytes(phys)} (even with --force). {fix}.",
            path=path,
        )
    b = budget or Budget.default()
    if not force and need > b.max_memory_bytes:
        raise ScenarioError(
            f"{what}, over the budget of {_fmt_bytes(b.max_memory_bytes)} (PODSIM_MAX_MEMORY). "
            f"{fix}, or pass --force.",
            path=path,
        )


def check_trace_rows(
    rows: int, what: str, *, force: bool = False, budget: Budget | None = None
) -> None:
    """Refuse a synthetic trace of ``rows`` messages before it is built when it would not fit
    the machine's memory (or the budget, unless ``force``), at ``workload.synthetic.steps``."""
    need = BASE_MEMORY + rows * TRACE_BYTES_PER_ROW
    what = (
        f"the workload's trace has {rows:,} messages ({what}), about {_fmt_bytes(need)} of memory"
    )
    fix = "Make the workload smaller (fewer steps or ranks)"
    _check_memory(need, what, fix, "workload.synthetic.steps", force=force, budget=budget)


def check_workload_size(
    sc: Scenario, *, force: bool = False, budget: Budget | None = None
) -> int | None:
    """Refuse, before the trace is generated, a workload whose generator would not fit the
    memory budget (``force`` skips the budget, not the physical memory). Returns the bytes."""
    est = workload_memory(sc)
    if est is None:
        return None
    need, path = est
    if path == "workload.moe.tokens_per_rank":
        m = sc.workload.moe
        assert m is not None
        what = (
            f"routing {int(m.ep_size) * int(m.tokens_per_rank):,} tokens ({m.ep_size} ranks x "
            f"{m.tokens_per_rank:,}) of {m.model!r} needs about "
            f"{_fmt_bytes(BASE_MEMORY + need)} of memory for the router logits of a layer"
        )
        fix = "Route fewer tokens per rank"
    else:
        rows = trace_rows(sc)
        assert rows is not None
        what = (
            f"the workload's trace has up to {rows[0]:,} messages ({rows[2]}), about "
            f"{_fmt_bytes(BASE_MEMORY + need)} of memory"
        )
        fix = "Make the workload smaller (fewer steps, layers or ranks)"
    _check_memory(BASE_MEMORY + need, what, fix, path, force=force, budget=budget)
    return need


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
    # scale-up messages cost the fluid model's solves (below), not engine events
    n_su = int((trace["hop"] == "scaleup").sum()) if cluster.has_scaleup else 0
    events = int(packet_hops * EVENTS_PER_HOP + (n_msgs - n_su) * EVENTS_PER_MESSAGE)
    su_wall = scaleup_wall(trace) if n_su else 0.0
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
    switch = cluster.switch  # the device config (podsim.fabric.switch.SwitchConfig)
    buffered = sum(
        switch.buffer_for(cluster.graph.degree(n))
        for n, r in cluster.graph.nodes(data="role")
        if r in ("leaf", "spine", "core")
    ) // max(1, nic.mtu)
    g = cluster.graph
    memory = int(
        BASE_MEMORY
        + (g.number_of_nodes() + g.number_of_edges()) * CLUSTER_BYTES_PER_ELEMENT
        + n_msgs * BYTES_PER_MESSAGE
        + min(buffered, packets) * BYTES_PER_PACKET
        + samples * n_ports * BYTES_PER_SAMPLE
    )
    return Estimate(
        messages=n_msgs,
        packets=packets,
        packet_hops=packet_hops,
        events=events,
        wall_s=events / EVENTS_PER_S + su_wall,
        memory_bytes=memory,
        sim_time_s=sim_t,
        scaleup_wall_s=su_wall,
    )


def scaleup_wall(trace: pd.DataFrame) -> float:
    """Wall seconds of the packet engine's fluid scale-up model for ``trace`` (the model of
    the SCALEUP_* constants)."""
    su = trace[trace["hop"] == "scaleup"]
    if not len(su):
        return 0.0
    keys = ["step", "layer", "phase"]
    m = su.groupby(keys).size()
    u = su[[*keys, "src_rank", "bytes"]].drop_duplicates().groupby(keys).size()
    m_arr = m.to_numpy(float)
    solves = np.minimum(m_arr, SCALEUP_SOLVES_PER_GROUP * u.reindex(m.index).to_numpy(float))
    flows = SCALEUP_ACTIVE_FRACTION * m_arr * solves
    return float((solves * SCALEUP_S_PER_SOLVE + flows * SCALEUP_S_PER_FLOW).sum())


def _nic_rate(cluster: Cluster) -> float:
    rates = [
        float(d.get("rate_bps", 0.0))
        for _u, _v, d in cluster.graph.edges(data=True)
        if d.get("tier") == "nic-leaf"
    ]
    return max(rates) if rates and max(rates) > 0 else 400e9


def _gib(n: float) -> str:
    return f"{n / 2**30:.1f} GiB"


def fluid_memory(cluster: Cluster, trace: pd.DataFrame) -> int:
    """Memory of a flow- or bound-engine run: the base, the cluster and
    :data:`FLUID_BYTES_PER_MESSAGE` per message."""
    g = cluster.graph
    elements = g.number_of_nodes() + g.number_of_edges()
    return int(
        BASE_MEMORY + elements * CLUSTER_BYTES_PER_ELEMENT + len(trace) * FLUID_BYTES_PER_MESSAGE
    )


def check_fluid(
    sc: Scenario,
    cluster: Cluster,
    trace: pd.DataFrame,
    compute: pd.DataFrame | None = None,
    *,
    budget: Budget | None = None,
    force: bool = False,
) -> int:
    """Refuse a flow/bound run whose route tables would not fit the memory budget (``force``
    skips the budget, not the physical memory). Returns the estimate in bytes."""
    need = fluid_memory(cluster, trace)
    what = (
        f"the {sc.engine} engine holds the routes of all {len(trace):,} messages at once: about "
        f"{_fmt_bytes(need)} of memory ({FLUID_BYTES_PER_MESSAGE} B per message)"
    )
    fix = "Make the run smaller (fewer ranks, layers or steps)"
    _check_memory(need, what, fix, "engine", force=force, budget=budget)
    return need


def check_packet(
    sc: Scenario,
    cluster: Cluster,
    trace: pd.DataFrame,
    compute: pd.DataFrame | None = None,
    *,
    budget: Budget | None = None,
    force: bool = False,
) -> Estimate | None:
    """Refuse a packet-level run whose estimate exceeds ``budget`` (ScenarioError naming the
    estimate and the alternatives); ``force`` skips it. Returns the estimate (None when
    skipped). The packet engine's ``check_size``."""
    if force:
        return None
    b = budget or Budget.default()
    est = estimate(sc, cluster, trace, compute)
    over = []
    if est.wall_s > b.max_wall_s:
        over.append(
            f"about {_fmt_wall(est.wall_s)} of wall time (budget {_fmt_wall(b.max_wall_s)})"
        )
    if est.memory_bytes > b.max_memory_bytes:
        over.append(f"about {_gib(est.memory_bytes)} of memory (budget {_gib(b.max_memory_bytes)})")
    if over:
        su = (
            f" (of which ~{_fmt_wall(est.scaleup_wall_s)} re-solving the fluid scale-up rates)"
            if est.scaleup_wall_s > 0.5 * est.wall_s
            else ""
        )
        raise ScenarioError(
            f"this scenario is too large for the packet engine: {est.messages:,} messages, "
            f"{est.packets:,} packets, {est.packet_hops:,} packet-hops, ~{est.events:,.0f} "
            f"events, which needs {' and '.join(over)}{su}. Use the flow engine for this size "
            "(--set engine=flow, or engine: bound for the lower bound), or make the run "
            "smaller (fewer tokens, layers or steps; with sim.endpoint: host a sim.cell "
            "above the MTU); pass --force to run it anyway.",
            path="engine",
        )
    if not math.isfinite(est.wall_s):  # pragma: no cover - defensive
        raise ScenarioError("could not estimate the run's size.", path="engine")
    return est
