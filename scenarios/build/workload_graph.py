"""Workloads that compile to an operation graph (:mod:`podsim.workloads.graph`).

:func:`build_workload_graph` turns the scenario's graph workload (``workload.collective``,
``workload.serving`` via :mod:`podsim.scenarios.build.serving`, ...) (and the imported traces
``workload.chakra`` and ``workload.kineto``) into an
:class:`~podsim.workloads.graph.OpGraph` over the cluster's ranks, and
:func:`graph_trace` gives its messages as the run's trace, with hops from the cluster's
placement. Layer-timeline workloads (``moe``, ``trace``, ``synthetic``) are compiled by the
executor's timeline instead (:func:`podsim.scenarios.execution.timeline.layer_graph`).
"""

from __future__ import annotations

import pandas as pd
from podsim.scenarios.build.cluster import Cluster, assign_hops, at, straggler_factors
from podsim.scenarios.errors import ScenarioError
from podsim.scenarios.input.schema import Scenario
from podsim.workloads.collectives import BUS_FACTORS, Collective, build_collective
from podsim.workloads.graph import GraphError, OpGraph
from podsim.workloads.training.step import TrainingError, TrainingSpec, build_training_step

__all__ = ["build_workload_graph", "graph_trace"]


def build_workload_graph(sc: Scenario, cluster: Cluster) -> OpGraph | None:
    """The operation graph of ``sc``'s workload, or None for a layer-timeline workload.
    Straggler faults multiply the durations of their rank's compute nodes (the serving
    workload refuses them)."""
    w = sc.workload
    if w.serving is not None:
        from podsim.scenarios.build.serving import build_serving

        return build_serving(sc, cluster).graph
    if w.training is not None:
        g = _training_graph(sc, cluster)
    elif w.chakra is not None or w.kineto is not None:
        g = _imported_trace_graph(sc, cluster)
    elif w.collective is not None:
        g = _collective_graph(sc, cluster)
    else:
        return None
    slow = straggler_factors(sc, cluster)
    if slow:
        g.scale_compute(slow)
    return g


def _collective_graph(sc: Scenario, cluster: Cluster) -> OpGraph:
    """``workload.collective`` repeated ``steps`` times, ``compute_time`` before each."""
    c = sc.workload.collective
    assert c is not None
    n = cluster.num_ranks
    local = c.local_size or max(1, min(cluster.gpus_per_pod, n))
    g = OpGraph()
    ranks = list(range(n))
    factor = BUS_FACTORS[c.op](n)
    if c.root >= n:
        raise ScenarioError(
            f"root {c.root} is not one of the {n} ranks (0 .. {n - 1})",
            path="workload.collective.root",
        )
    for i, (a, b) in enumerate(c.peers or ()):
        if a >= n or b >= n or a == b:
            raise ScenarioError(
                f"pair [{a}, {b}] must name two different ranks of the {n} (0 .. {n - 1})",
                path=f"workload.collective.peers[{i}]",
            )
    if not c.peers and c.op == "send-recv" and c.shift % n == 0:
        raise ScenarioError(
            f"shift {c.shift} sends every rank's data to itself ({n} ranks)",
            path="workload.collective.shift",
        )
    done: dict[int, int] = {}
    with at("workload.collective", f"{c.op} ({c.algorithm})"):
        try:
            for s in range(c.steps):
                if c.compute_time > 0:
                    for r in ranks:
                        node = g.compute(
                            r,
                            c.compute_time,
                            (done[r],) if r in done else (),
                            label=f"compute step {s} rank {r}",
                        )
                        g.span(r, node, node, step=s, layer=0, phase="compute",
                               bytes_out=0, bytes_in=0)  # fmt: skip
                        done[r] = node
                begin = {r: g.join((done[r],) if r in done else (), rank=r) for r in ranks}
                spec = Collective(
                    op=c.op,
                    ranks=ranks,
                    nbytes=c.size,
                    algorithm=c.algorithm,
                    channels=c.channels,
                    chunk_bytes=c.chunk,
                    local_size=local,
                    root=c.root,
                    peers=[tuple(p) for p in c.peers or ()],
                    shift=c.shift,
                    step=s,
                    label=f"{c.op} step {s}",
                )
                done = build_collective(g, spec, begin)
                for r in ranks:
                    g.span(r, begin[r], done[r], step=s, layer=0, phase="other",
                           bytes_out=c.size, bytes_in=c.size, bus_factor=factor)  # fmt: skip
        except GraphError as exc:
            raise ScenarioError(str(exc), path="workload.collective") from None
    return g


def _training_graph(sc: Scenario, cluster: Cluster) -> OpGraph:
    """One training step (podsim.workloads.training.step) over the cluster's ranks."""
    t = sc.workload.training
    assert t is not None
    spec = TrainingSpec(
        model=t.model,
        gpus=cluster.num_ranks,
        tp=t.tp,
        pp=t.pp,
        ep=t.ep,
        microbatches=t.microbatches,
        micro_batch_size=t.micro_batch_size,
        seq_len=t.seq_len,
        schedule=t.schedule,
        virtual_stages=t.virtual_stages,
        layers=t.layers,
        gpu=t.gpu,
        precision=t.precision,
        achieved=t.achieved,
        dispatch_dtype=t.dispatch_dtype,
        grad_bytes=t.grad_bytes,
        ep_overlap=t.ep_overlap,
        dp_overlap=t.dp_overlap,
        dp_algorithm=t.dp_algorithm,
        dispatch_mode=t.dispatch_mode,
        first_stage_layers=t.first_stage_layers,
        last_stage_layers=t.last_stage_layers,
        gpus_per_node=cluster.gpus_per_pod,
        routing=t.routing,
        skew=t.skew.kind,
        skew_max_mean=t.skew.max_mean,
        skew_shape=t.skew.exponent,
        seed=sc.seed,
    )
    try:
        return build_training_step(spec)
    except TrainingError as exc:
        raise ScenarioError(str(exc), path=f"workload.training.{exc.key}") from None


def _imported_trace_graph(sc: Scenario, cluster: Cluster) -> OpGraph:
    """A Chakra or Kineto trace as an operation graph (podsim.workloads.chakra / .kineto). A
    trace that cannot be imported is a
    :class:`ScenarioError` naming the key, the file, the node and the field."""
    from podsim.workloads.chakra import chakra_graph
    from podsim.workloads.kineto import kineto_graph
    from podsim.workloads.trace_import import TraceImportError

    w = sc.workload
    key = f"workload.{w.kind}.path"
    try:
        if w.chakra is not None:
            c = w.chakra
            g = chakra_graph(
                c.path,
                compute_scale=c.compute_scale,
                comm_groups=c.comm_groups,
                serialize_compute=c.serialize_compute,
            )
        else:
            k = w.kineto
            assert k is not None
            g = kineto_graph(k.path, compute_scale=k.compute_scale, gaps=k.gaps)
    except TraceImportError as exc:
        raise ScenarioError(str(exc), path=key) from None
    used = {int(r) for r in g.rank if r >= 0} | {int(r) for r in g.peer if r >= 0}
    if used and max(used) >= cluster.num_ranks:
        raise ScenarioError(
            f"the trace uses rank {max(used)}, but the run has {cluster.num_ranks} ranks",
            path=key,
        )
    return g


def graph_trace(g: OpGraph, cluster: Cluster) -> pd.DataFrame:
    """The graph's messages as the run's trace (row = message id), hops from the placement."""
    return assign_hops(g.messages(cluster.num_ranks), cluster)
