"""``workload.serving``: the scenario's serving keys -> requests, instances, operation graph.

:func:`build_serving` draws or reads the requests (seeded by the scenario's ``seed``), splits
the cluster's ranks into instances (prefill instances take the first nodes, decode instances the
next, each node's GPUs in rank order; instance rank ``i`` sends its share of a cache to decode
rank ``i``), checks that the weights fit the GPUs, calls
:func:`podsim.workloads.serving.build_serving_graph` and checks that the weights and the most KV
cache the plan keeps resident on a decode instance fit its GPUs' memory. Every refusal is a
ScenarioError at the ``workload.serving`` key it concerns.

The planner's idle-fabric estimate of a rank pair's transfer (see the builder) takes the
sending rank's NIC rate (its ports' link rates) and a 5 us latency [E]. Each instance's
exchanges (:mod:`podsim.workloads.serving.exchange`) use DeepEP's normal mode in prefill and its
low-latency mode in decode, attention TP groups of ``tp``, the node's GPUs as the scale-up group
and the weight format's activation type on the wire.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from podsim.scenarios.build.cluster import Cluster, at
from podsim.scenarios.errors import ScenarioError
from podsim.scenarios.input.schema import Scenario, ServingWorkload, Straggler
from podsim.workloads.precision import weight_format
from podsim.workloads.serving import (
    Gpu,
    InstancePerf,
    RequestClass,
    RequestError,
    Requests,
    ServingPlan,
    build_serving_graph,
    get_serving_model,
    poisson_requests,
    read_requests_csv,
)
from podsim.workloads.serving.exchange import InstanceComm

__all__ = ["ServingSetup", "build_serving", "instance_ranks", "serving_requests"]

#: the planner's latency estimate of a transfer between two ranks [E]
PAIR_LATENCY_S = 5e-6
#: bytes per KV value by ``kv_dtype``
KV_BYTES = {"fp8": 1.0, "bf16": 2.0}


@dataclass
class ServingSetup:
    """What :func:`build_serving` made: the plan (graph inside), requests, instances."""

    plan: ServingPlan
    requests: Requests
    prefill: list[list[int]]
    decode: list[list[int]]

    @property
    def graph(self):
        return self.plan.graph


def serving_requests(w: ServingWorkload, seed: int, max_context: int) -> Requests:
    """The workload's requests: Poisson (seeded) or from its CSV; too long ones refused."""
    if w.csv is not None:
        with _at_request("workload.serving.csv"):
            return read_requests_csv(w.csv, max_context=max_context)
    mix = [
        RequestClass(
            m.prompt_tokens if isinstance(m.prompt_tokens, int) else tuple(m.prompt_tokens),
            m.output_tokens if isinstance(m.output_tokens, int) else tuple(m.output_tokens),
            m.weight,
        )
        for m in w.mix
    ]
    for i, m in enumerate(mix):
        high = (m.prompt_tokens if isinstance(m.prompt_tokens, int) else m.prompt_tokens[1]) + (
            m.output_tokens if isinstance(m.output_tokens, int) else m.output_tokens[1]
        )
        if high > max_context:
            raise ScenarioError(
                f"requests of this class can need {high} tokens (prompt + output), more than the "
                f"context of {max_context} tokens (workload.serving.max_context, default: the "
                "model's)",
                path=f"workload.serving.mix[{i}].prompt_tokens",
            )
    with _at_request("workload.serving"):
        return poisson_requests(w.requests, float(w.rate or 0.0), mix, np.random.default_rng(seed))


class _at_request:
    """RequestError -> ScenarioError at ``path`` (the message names file, row and column)."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __enter__(self) -> None:
        return None

    def __exit__(self, tp: object, exc: BaseException | None, tb: object) -> bool:
        if isinstance(exc, RequestError):
            key = self.path
            if not key.endswith(".csv"):  # a csv error names its file, row and column itself
                key += "".join(f".{x}" for x in (exc.where, exc.field) if x)
            raise ScenarioError(str(exc), path=key) from None
        return False


def instance_ranks(w: ServingWorkload, cluster: Cluster) -> tuple[list[list[int]], list[list[int]]]:
    """(prefill instances, decode instances) as rank lists (module docstring)."""
    servers = np.asarray(cluster.rank_server)
    order = list(dict.fromkeys(sorted(servers.tolist())))
    if len(order) != w.num_nodes:
        raise ScenarioError(
            f"the serving instances need their ranks on {w.num_nodes} whole nodes, but the rank "
            f"placement spreads them over {len(order)}; use cluster.rank_map: contiguous",
            path="cluster.rank_map",
        )
    nodes = [np.flatnonzero(servers == s).tolist() for s in order]
    out: list[list[list[int]]] = [[], []]
    k = 0
    for role, spec in enumerate((w.prefill, w.decode)):
        for _ in range(spec.instances):
            out[role].append([r for node in nodes[k : k + spec.nodes] for r in node])
            k += spec.nodes
    return out[0], out[1]


def _nic_rate_Bps(cluster: Cluster, rank: int) -> float:
    g = cluster.graph
    total = 0.0
    for port in cluster.rank_ports[rank]:
        rates = [float(d.get("rate_bps", 0.0)) for _, _, d in g.edges(port, data=True)]
        total += max(rates, default=0.0)
    return total / 8.0 if total > 0 else 50e9


def build_serving(sc: Scenario, cluster: Cluster) -> ServingSetup:
    """The serving workload of ``sc`` on ``cluster`` (module docstring)."""
    w = sc.workload.serving
    assert w is not None
    if any(isinstance(f, Straggler) for f in sc.faults):
        raise ScenarioError(
            "straggler faults are not modelled by the serving workload (an instance's compute "
            "comes from its FLOP and bandwidth model); remove them",
            path="faults",
        )
    model = get_serving_model(w.model)
    max_context = w.max_context or model.max_context
    requests = serving_requests(w, sc.seed, max_context)
    prefill, decode = instance_ranks(w, cluster)
    with at("workload.serving.gpu"):
        spec = w.gpu.model_dump()
        gpu = Gpu.named(spec.pop("name"), **spec)
    fmt = weight_format(w.weights)
    kv = KV_BYTES[w.kv_dtype]
    perf = {}
    for role, inst in (("prefill", prefill), ("decode", decode)):
        p = InstancePerf(model, len(inst[0]), gpu, fmt, kv, float(w.decode_overhead))
        if p.weights_per_gpu() > gpu.memory:
            raise ScenarioError(
                f"{model.name}'s weights ({p.weight_bytes / 1e9:.0f} GB in {fmt.name}) need "
                f"{p.weights_per_gpu() / 1e9:.1f} GB per GPU over the {len(inst[0])} GPUs of a "
                f"{role} instance, more than the GPU's {gpu.memory / 1e9:.0f} GB; use more nodes "
                "per instance, a smaller weight format or a larger workload.serving.gpu.memory",
                path=f"workload.serving.{role}.nodes",
            )
        perf[role] = p
    comms = {}
    servers = np.asarray(cluster.rank_server)
    for role, inst, spec, mode in (
        ("prefill", prefill, w.prefill, "deepep-normal"),
        ("decode", decode, w.decode, "deepep-low-latency"),
    ):
        if len(inst[0]) % spec.tp:
            raise ScenarioError(
                f"tp {spec.tp} does not divide the {len(inst[0])} GPUs of a {role} instance",
                path=f"workload.serving.{role}.tp",
            )
        local = int(np.sum(servers == servers[inst[0][0]]))
        comms[role] = InstanceComm(
            model, len(inst[0]), spec.tp, local, mode, fmt.activations, spec.microbatches
        )
    with at("workload.serving"):
        plan = build_serving_graph(
            requests,
            prefill,
            decode,
            perf["prefill"],
            perf["decode"],
            kv_transfer=w.kv_transfer,
            stream_layers=w.stream_layers,
            max_batch=w.max_batch,
            pair_rate=_nic_rate_Bps(cluster, prefill[0][0]),
            pair_latency=PAIR_LATENCY_S,
            prefill_comm=comms["prefill"],
            decode_comm=comms["decode"],
            exchange_steps=w.exchange_steps,
            exchange_latency=float(w.exchange_latency),
        )
    dp = perf["decode"]
    for j, peak in enumerate(plan.decode_peak_kv_bytes.tolist()):
        need = dp.weights_per_gpu() + peak / len(decode[j])
        if need > gpu.memory:
            raise ScenarioError(
                f"decode instance {j} would hold up to {peak / 1e9:.1f} GB of KV cache at once "
                f"({peak / len(decode[j]) / 1e9:.1f} GB per GPU) beside "
                f"{dp.weights_per_gpu() / 1e9:.1f} GB of weights per GPU, more than the GPU's "
                f"{gpu.memory / 1e9:.0f} GB; lower max_batch, use more or larger decode "
                "instances, or an FP8 kv_dtype",
                path="workload.serving.max_batch",
            )
    return ServingSetup(plan, requests, prefill, decode)
