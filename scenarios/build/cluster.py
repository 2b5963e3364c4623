"""From a validated scenario to the things an engine runs: the cluster and the workload trace.

This module is the adapter between the scenario schema and the packages below it:

- the topology graph from :func:`podsim.fabric.topology.build_topology` (a preset or an explicit
  builder with its parameters), checked with :func:`podsim.fabric.topology.validate_graph`;
- ranks placed on GPUs with :func:`podsim.fabric.rankmap.map_ranks`;
- switch settings as a :class:`podsim.fabric.switch.SwitchConfig`;
- the node's PCIe layout (``podsim.nic.pcie``) built for every server and bound to the ranks
  (:class:`podsim.nic.pcie.cluster.ClusterPcie`);
- the workload trace (schema in the team brief / ``podsim.workloads.trace``) from the ``workloads``
  kernels (MoE), a trace file, or a synthetic pattern; and the per-rank expert-compute time.

Every parameter a lower layer rejects is re-raised as a :class:`ScenarioError` naming the
scenario key it came from (``cluster.topology.params``, ``workload.moe``, ...).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np
import pandas as pd
from podsim.fabric.phy import base_phy
from podsim.scenarios.errors import ScenarioError
from podsim.scenarios.input.schema import Scenario, Straggler
from podsim.workloads.kernel_traffic import KernelMemoryError
from podsim.workloads.moe import moe_layer_trace
from podsim.workloads.trace import COLUMNS as TRACE_COLUMNS
from podsim.workloads.trace import HOPS, PHASES, TraceRankCountMissing, read_trace
from podsim.workloads.trace import compute_table as workload_compute_table

__all__ = [
    "TRACE_COLUMNS",
    "Cluster",
    "build_cluster",
    "build_graph",
    "build_trace",
    "check_trace",
    "compute_table",
    "read_trace_file",
    "switch_config",
]


@contextmanager
def at(path: str, what: str = "") -> Iterator[None]:
    """Re-raise a lower layer's ValueError/TypeError as a ScenarioError at scenario key
    ``path`` (the lower layer's message already names its own parameter)."""
    try:
        yield
    except ScenarioError:
        raise
    except (ValueError, TypeError, KeyError) as exc:
        text = str(exc.args[0]) if isinstance(exc, KeyError) and exc.args else str(exc)
        prefix = f"{what}: " if what else ""
        raise ScenarioError(f"{prefix}{text.rstrip('.')}.", path=path) from None


# --------------------------------------------------------------------------- cluster


@dataclass
class Cluster:
    """The built cluster: graph, rank placement and device settings."""

    graph: nx.Graph
    num_ranks: int
    rank_gpu: np.ndarray
    rank_server: np.ndarray
    rank_pod: np.ndarray
    rank_ports: list[tuple[str, ...]]
    rank_nic: np.ndarray
    gpus_per_pod: int
    switch: Any = None
    #: the node's PCIe tree (of the first server; servers alike share it), None without layout
    layout: Any = None
    #: every server's tree bound to the ranks (podsim.nic.pcie.cluster.ClusterPcie) or None
    pcie: Any = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def planes(self) -> int:
        return max(1, max((len(p) for p in self.rank_ports), default=1))

    @property
    def has_scaleup(self) -> bool:
        return any(r == "gpu" for _, r in self.graph.nodes(data="role"))


def build_graph(sc: Scenario, *, force: bool = False) -> nx.Graph:
    """The topology graph of ``sc.cluster`` (preset or explicit builder). A cluster too large
    for the machine is refused before it is built
    (:func:`scenarios.build.limits.check_cluster_size`;
    ``force`` skips the budget, not the physical memory)."""
    from podsim.fabric.topology import build_topology, validate_graph
    from podsim.scenarios.build.limits import check_cluster_size

    check_cluster_size(sc, force=force)

    name, params, path = sc.cluster.topology_source()
    _check_topology_params(name, params, path)
    try:
        g = build_topology(name, **params)
    except (ValueError, TypeError) as exc:
        named = str(exc).startswith(f"topology {name!r}")
        with at(_param_path(path, params, str(exc)), "" if named else f"topology {name!r}"):
            raise
    with at(path, f"topology {name!r}"):
        validate_graph(g)
    _apply_phy_overrides(sc, g)
    return g


def _param_path(path: str, params: dict[str, Any], message: str) -> str:
    """``path.<key>`` when the builder's ``message`` starts with a parameter the scenario wrote
    (builders name the culprit first: ``scaleup_rate='0GB/s' must be > 0``), else ``path``."""
    for key in params:
        if message.startswith((f"{key}=", f"{key}:")):
            return f"{path}.{key}"
    return path


def _apply_phy_overrides(sc: Scenario, g: nx.Graph) -> None:
    """``cluster.phys``: every link of an overridden profile gets a derived profile
    (:func:`podsim.fabric.phy.derived_phy`) carrying the scenario's values."""
    from podsim.fabric.params import params_of
    from podsim.fabric.phy import PhyProfile, derived_phy

    keys = {p.key: p.field for p in params_of(PhyProfile) if p.key is not None}
    for name, override in sc.cluster.phys.items():
        values = {keys[k]: v for k, v in override.model_dump().items() if v is not None}
        if not values:
            continue
        derived = derived_phy(name, **values)
        for _u, _v, d in g.edges(data=True):
            if d.get("phy") == name:
                d["phy"] = derived


def _check_topology_params(name: str, params: dict[str, Any], path: str) -> None:
    """A misspelt builder parameter as a ScenarioError at ``path.<param>`` with a did-you-mean
    over what the builder (and, for a preset, the builder it passes through to) accepts."""
    import difflib

    from podsim.fabric.topology import TOPOLOGIES, builder_parameters

    if name not in TOPOLOGIES:
        return  # the schema names an unknown builder with its own did-you-mean
    accepted = builder_parameters(name)
    for bad in params:
        if bad in accepted:
            continue
        close = difflib.get_close_matches(bad, accepted, n=2, cutoff=0.6)
        hint = f" Did you mean {' or '.join(map(repr, close))}?" if close else ""
        raise ScenarioError(
            f"topology {name!r} has no parameter {bad!r}.{hint} Parameters: {', '.join(accepted)}.",
            path=f"{path}.{bad}",
        )


def _num_ranks(sc: Scenario, graph: nx.Graph) -> int:
    from podsim.fabric.topology import gpus

    w = sc.workload
    total = len(gpus(graph))
    if w.moe is not None:
        n = w.moe.ep_size
        path = "workload.moe.ep_size"
    elif w.synthetic is not None:
        n = w.synthetic.ranks or total
        path = "workload.synthetic.ranks"
    elif w.collective is not None:
        n = w.collective.ranks or total
        path = "workload.collective.ranks"
    elif w.chakra is not None or w.kineto is not None:
        from podsim.workloads.kineto import kineto_paths
        from podsim.workloads.trace_import import TraceImportError, rank_files

        path = f"workload.{w.kind}.path"
        try:
            if w.chakra is not None:
                n = len(rank_files(w.chakra.path, ".et"))
            else:
                n = len(kineto_paths(w.kineto.path))  # type: ignore[union-attr]
        except TraceImportError as exc:
            raise ScenarioError(str(exc), path=path) from None
    elif w.training is not None:
        n = w.training.gpus or total
        path = "workload.training.gpus"
    elif w.serving is not None:
        return _serving_ranks(sc, graph)
    else:
        return -1  # from the trace
    if n > total:
        raise ScenarioError(
            f"{n} ranks do not fit the cluster, which has {total} GPUs; use a larger cluster "
            f"(cluster.params / cluster.topology.params) or fewer ranks.",
            path=path,
        )
    return n


def _serving_ranks(sc: Scenario, graph: nx.Graph) -> int:
    """A serving workload's ranks: every GPU of its instances' nodes."""
    from podsim.fabric.topology import gpu_table

    table = gpu_table(graph)
    per_server: dict[int, int] = {}
    for server, _pod in table.values():
        per_server[server] = per_server.get(server, 0) + 1
    need = sc.workload.serving.num_nodes  # type: ignore[union-attr]
    if need > len(per_server):
        raise ScenarioError(
            f"the serving instances need {need} nodes, the cluster has {len(per_server)}; use a "
            "larger cluster (cluster.params) or fewer or smaller instances.",
            path="workload.serving",
        )
    return sum(per_server[s] for s in sorted(per_server)[:need])


def switch_config(sc: Scenario) -> Any:
    """The scenario's switch settings as a :class:`podsim.fabric.switch.SwitchConfig`."""
    from podsim.fabric.switch import SwitchConfig
    from podsim.scenarios.input.devices import device_config

    with at("cluster.switch"):
        return device_config(SwitchConfig, sc.cluster.switch)


def _node_layout(sc: Scenario, graph: nx.Graph, rm: Any) -> Any:
    """The node's PCIe tree built for every server of the cluster and bound to the ranks
    (:class:`podsim.nic.pcie.cluster.ClusterPcie`), or None without ``cluster.layout``.

    GPUs per server, NIC cards per server and the GPUs each card serves come from the topology;
    ``cluster.layout_params`` may add anything else the layout takes (``ssds``, lane widths,
    ``link``/``switch``/``root``/``ssd`` specs) and may repeat ``gpus``/``nics``/
    ``gpus_per_nic`` only in agreement with the topology (else an error names the key)."""
    name = sc.cluster.layout
    storage = sc.workload.storage
    if name is None:
        if storage is not None:
            raise ScenarioError(
                "GPUDirect Storage reads run on the node's PCIe tree; set cluster.layout "
                "(e.g. on-card-switch) with layout_params.ssds > 0.",
                path="workload.storage",
            )
        return None
    from podsim.scenarios.input.registries import get_registry

    reg = get_registry("node layout")
    from podsim.fabric.packet import link_framing
    from podsim.fabric.registry import ParamError
    from podsim.nic.pcie.cluster import ClusterPcie

    try:
        pcie = ClusterPcie.build(
            graph,
            name,
            reg.get(name),
            sc.cluster.layout_params,
            mtu=int(sc.cluster.nic.mtu),
            overhead=link_framing(str(sc.cluster.nic.link_layer))[0],
            rank_gpu=rm.gpu,
            rank_server=rm.server,
            rank_nic=rm.nic,
        )
    except ParamError as exc:
        key = "cluster.layout_params" + (f".{exc.key}" if exc.key else "")
        raise ScenarioError(str(exc), path=key) from None
    if storage is not None:
        _check_storage(storage, pcie)
    return pcie


def _check_storage(storage: Any, pcie: Any) -> None:
    ranks = range(pcie.num_ranks) if storage.ranks is None else storage.ranks
    for i, r in enumerate(ranks):
        if r >= pcie.num_ranks:
            raise ScenarioError(
                f"rank {r} is not one of the {pcie.num_ranks} ranks.",
                path=f"workload.storage.ranks[{i}]",
            )
        try:
            pcie.ssd_of(r)
        except ValueError:
            raise ScenarioError(
                f"GPUDirect Storage reads need SSDs in the node layout {pcie.layout!r}; "
                "set ssds (e.g. 4) in it.",
                path="cluster.layout_params.ssds",
            ) from None


def _check_nic_ports(sc: Scenario, g: nx.Graph) -> None:
    """``cluster.nic.phy`` / ``rate``, when given, must be what the topology built."""
    nic = sc.cluster.nic
    if nic.phy is None and nic.rate is None:
        return
    seen_phy: set[str] = set()
    seen_rate: set[float] = set()
    for _u, _v, d in g.edges(data=True):
        if d.get("tier") == "nic-leaf":
            seen_phy.add(base_phy(str(d.get("phy"))))
            seen_rate.add(float(d.get("rate_bps", 0.0)))
    if nic.phy is not None and seen_phy and seen_phy != {nic.phy}:
        raise ScenarioError(
            f"the topology's NIC ports run {', '.join(sorted(seen_phy))}, not {nic.phy}; set "
            "the PHY through the topology or preset parameters (e.g. nic_phy, host_phy, phy).",
            path="cluster.nic.phy",
        )
    if nic.rate is not None and seen_rate and seen_rate != {nic.rate}:
        from podsim.fabric.units import fmt_rate

        have = ", ".join(fmt_rate(r) for r in sorted(seen_rate))
        raise ScenarioError(
            f"the topology's NIC ports run at {have}, not {fmt_rate(nic.rate)}; set the rate "
            "through the topology's PHY parameters.",
            path="cluster.nic.rate",
        )


def build_cluster(sc: Scenario, num_ranks: int | None = None, *, force: bool = False) -> Cluster:
    """Build the graph and place the ranks (``num_ranks`` overrides the workload's count;
    ``force``: see :func:`build_graph`)."""
    from podsim.fabric.rankmap import map_ranks

    g = build_graph(sc, force=force)
    n = num_ranks if num_ranks is not None else _num_ranks(sc, g)
    if n < 0:
        raise ValueError("build_cluster needs num_ranks for a trace workload")
    placement = sc.cluster.rank_map
    with at("cluster.rank_map"):
        rm = map_ranks(g, n, placement if isinstance(placement, str) else list(placement))
    _check_nic_ports(sc, g)
    pcie = _node_layout(sc, g, rm)
    pods = rm.pod
    per_pod = np.bincount(pods - pods.min()) if n else np.array([1])
    gpus_per_pod = int(per_pod.max()) if per_pod.size else 1
    return Cluster(
        graph=g,
        num_ranks=n,
        rank_gpu=rm.gpu,
        rank_server=rm.server,
        rank_pod=rm.pod,
        rank_ports=[rm.ports(r) for r in range(n)],
        rank_nic=np.asarray(rm.nic, dtype=np.int64),
        gpus_per_pod=gpus_per_pod,
        switch=switch_config(sc),
        layout=next(iter(pcie.nodes.values())).tree if pcie is not None and pcie.nodes else None,
        pcie=pcie,
        extra={"pcie": pcie.describe()} if pcie is not None else {},
    )


# --------------------------------------------------------------------------- traces


def check_trace(
    df: pd.DataFrame, num_ranks: int | None, source: str, path: str, *, recorded: bool = False
) -> pd.DataFrame:
    """The trace with the standard columns and dtypes, or a ScenarioError saying what is wrong.

    ``recorded``: the trace is a user's file, where every row is a message: a row of zero
    bytes is refused (a message carries at least one byte), never silently dropped. A
    generated trace's zero-byte rows are rank pairs that exchanged no tokens, not messages,
    and are left out."""
    missing = [c for c in TRACE_COLUMNS if c not in df.columns]
    if "tokens" in missing:
        df = df.assign(tokens=0)
        missing.remove("tokens")
    if "start_s" in missing:
        df = df.assign(start_s=0.0)
        missing.remove("start_s")
    if missing:
        raise ScenarioError(
            f"trace {source} lacks column(s) {', '.join(missing)}; a trace needs "
            f"{', '.join(TRACE_COLUMNS)}.",
            path=path,
        )
    out = df.copy()
    try:
        for c in ("step", "layer", "src_rank", "dst_rank", "bytes", "tokens"):
            out[c] = pd.to_numeric(out[c], errors="raise").astype(np.int64)
        out["start_s"] = pd.to_numeric(out["start_s"], errors="raise").astype(float)
    except (ValueError, TypeError) as exc:
        raise ScenarioError(f"trace {source} has a non-numeric value: {exc}.", path=path) from None
    for c, allowed in (("phase", PHASES), ("hop", HOPS)):
        out[c] = out[c].astype(str)
        bad = sorted(set(out[c]) - set(allowed))
        if bad:
            raise ScenarioError(
                f"trace {source}: column {c} has {bad[:3]}; expected one of {list(allowed)}.",
                path=path,
            )
    for c in ("bytes", "tokens", "step", "layer", "src_rank", "dst_rank"):
        if len(out) and int(out[c].min()) < 0:
            raise ScenarioError(f"trace {source}: column {c} has negative values.", path=path)
    start = out["start_s"].to_numpy()
    if not (np.isfinite(start).all() and (start >= 0).all()):
        raise ScenarioError(f"trace {source}: start_s must be finite and >= 0.", path=path)
    if num_ranks is not None and len(out):
        hi = int(max(out["src_rank"].max(), out["dst_rank"].max()))
        if hi >= num_ranks:
            raise ScenarioError(
                f"trace {source} names rank {hi} but has only {num_ranks} ranks.", path=path
            )
    empty = np.flatnonzero(out["bytes"].to_numpy() == 0)
    if recorded and empty.size:
        rows = ", ".join(str(int(i) + 1) for i in empty[:5]) + (" ..." if empty.size > 5 else "")
        raise ScenarioError(
            f"trace {source}: {empty.size:,} row(s) have bytes = 0 (data rows {rows}); every "
            "row is a message and a message carries at least one byte: remove those rows or "
            "give their size.",
            path=path,
        )
    out = out[out["bytes"] > 0].reset_index(drop=True)
    out.attrs = dict(df.attrs)
    return out


def _read_raw(path: Path, fmt: str) -> pd.DataFrame:
    kind = fmt if fmt != "auto" else ("parquet" if path.suffix == ".parquet" else "csv")
    try:
        if kind == "parquet":
            return pd.read_parquet(path)
        return pd.read_csv(path, comment="#")
    except Exception as exc:
        raise ScenarioError(
            f"cannot read trace {str(path)!r} as {kind}: {type(exc).__name__}: {exc}.",
            path="workload.trace.path",
        ) from None


def read_trace_file(path: Path, fmt: str = "auto", num_ranks: int | None = None) -> pd.DataFrame:
    """Read a trace with ``workloads.trace.read_trace`` (which validates it); a file without a
    recorded rank count gets ``num_ranks`` or its highest rank + 1. A trace with no message is
    refused: a run of it would report "complete" having simulated nothing."""
    df = _read_trace_rows(path, fmt, num_ranks)
    if not len(df):
        raise ScenarioError(
            f"trace {str(path)!r} has no messages: nothing to simulate.", path="workload.trace.path"
        )
    return df


def _read_trace_rows(path: Path, fmt: str, num_ranks: int | None) -> pd.DataFrame:
    where = "workload.trace.path"
    if path.suffix not in (".parquet", ".csv"):
        df = _read_raw(path, fmt)
        if num_ranks is not None:
            df.attrs["num_ranks"] = num_ranks
        return df
    if num_ranks is None:
        try:
            return read_trace(str(path))
        except TraceRankCountMissing:
            pass  # a file that records no rank count falls back to its highest rank + 1
        except (ValueError, TypeError) as exc:  # TypeError: a header that is not a mapping
            # a rank outside the recorded count ("... (num_ranks=16)") is an error in the file
            text = str(exc).rstrip(".")
            if isinstance(exc, TypeError):
                text = f"its attrs header is not a JSON object (mapping): {text}"
            if str(path) not in text:  # JSON header and empty-file errors name no file
                text = f"trace {str(path)!r}: {text}"
            raise ScenarioError(f"{text}.", path=where) from None
        raw = _read_raw(path, fmt)
        try:
            hi = int(max(raw["src_rank"].max(), raw["dst_rank"].max())) if len(raw) else 0
        except (KeyError, TypeError, ValueError):
            hi = 0  # read_trace below names the missing or bad column
        num_ranks = hi + 1
    with at(where, f"trace {str(path)!r}"):
        return read_trace(str(path), num_ranks=num_ranks)


def topology_io(name: str) -> Callable[..., Any] | None:
    """``write_graphml`` / ``read_graphml`` / ``draw_topology`` from :mod:`fabric.topology_io`
    (imported on first use: it is only needed when writing or reading a result folder)."""
    from podsim.fabric import topology_io as tio

    fn = getattr(tio, name, None)
    return fn if callable(fn) else None


def read_graph(directory: str | Path) -> nx.Graph | None:
    """The ``topology.graphml`` of a result folder, or None."""
    from podsim.fabric.topology_io import read_graphml

    p = Path(directory) / "topology.graphml"
    if not p.is_file():
        return None
    return read_graphml(str(p))


def _deepep_kernel(m: Any) -> Any:
    """``workload.moe.deepep`` as podsim.workloads.deepep_kernels.DeepEPKernel (None: unchunked)."""
    from podsim.workloads.deepep_kernels import deepep_kernel

    d = m.deepep
    if not d.pipelined:
        return None
    return deepep_kernel(m.ep_size, d.sms, d.dispatch_rdma_chunk, d.combine_rdma_chunk)


def _ll_kernel(m: Any) -> Any:
    """``workload.moe.deepep``'s low-latency keys as podsim.workloads.deepep_ll.LowLatencyKernel
    (None: none set, or not that mode)."""
    from podsim.workloads.deepep_ll import LowLatencyKernel

    d = m.deepep
    if m.mode != "deepep-low-latency" or (
        not d.ll_dispatch_fixed and not d.ll_combine_fixed and d.ll_reduce_rate is None
    ):
        return None
    rate = None if d.ll_reduce_rate is None else float(d.ll_reduce_rate) / 8  # bit/s -> B/s
    return LowLatencyKernel(float(d.ll_dispatch_fixed), float(d.ll_combine_fixed), rate)


def deepep_copy_rate(sc: Scenario) -> float | None:
    """The SMs' copy rate (bit/s) of a ``deepep-normal`` MoE workload
    (``workload.moe.deepep.copy_rate``); None when not set or not that workload."""
    m = sc.workload.moe
    if m is None or m.mode != "deepep-normal":
        return None
    rate = m.deepep.copy_rate
    return None if rate is None else float(rate)


def _moe_domains(cluster: Cluster, ep: int) -> tuple[int, np.ndarray | None]:
    """(gpus_per_node, order) for the MoE trace. DeepEP's "node" is the scale-up domain, and
    the trace generator takes nodes to be blocks of ``gpus_per_node`` consecutive ranks. That
    holds for a contiguous rank map; a rank map that interleaves the domains (``by-node`` over
    several pods) would have the trace send "scale-up" messages between pods. Then the trace is
    generated with blocks of the ranks each domain holds and relabelled: logical rank ``i``
    runs on rank ``order[i]`` (the ranks sorted by domain), so every block is one domain. A
    ScenarioError when the domains hold different numbers of ranks."""
    gpn = min(cluster.gpus_per_pod, ep)
    pod = np.asarray(cluster.rank_pod[:ep])
    blocks = np.arange(ep) // gpn
    pairs = set(zip(blocks.tolist(), pod.tolist(), strict=True))
    if not cluster.has_scaleup or len(pairs) == len(set(blocks.tolist())) == len(set(pod.tolist())):
        return gpn, None  # each block of consecutive ranks is exactly one domain
    _pods, counts = np.unique(pod, return_counts=True)
    if (counts != counts[0]).any():
        raise ScenarioError(
            f"cluster.rank_map places the {ep} EP ranks unevenly over the scale-up domains "
            f"({', '.join(str(int(c)) for c in counts)} ranks per domain); MoE traffic needs "
            "the same number in every domain (try rank_map: contiguous)",
            path="cluster.rank_map",
        )
    return int(counts[0]), np.argsort(pod, kind="stable")


def _relabel_ranks(df: pd.DataFrame, order: np.ndarray) -> pd.DataFrame:
    """The trace with logical rank ``i`` moved to rank ``order[i]``: message ends and every
    per-rank array of the attrs (the last axis of the [step, layer, rank] arrays)."""
    out = df.copy()
    out["src_rank"] = order[df["src_rank"].to_numpy(np.int64)]
    out["dst_rank"] = order[df["dst_rank"].to_numpy(np.int64)]
    n = order.size
    for key, value in df.attrs.items():
        if not isinstance(value, dict):
            continue
        moved = {}
        for k, arr in value.items():
            if isinstance(arr, np.ndarray) and arr.ndim == 3 and arr.shape[-1] == n:
                arr = arr.copy()
                arr[..., order] = value[k]
            moved[k] = arr
        out.attrs[key] = moved
    out.attrs["rank_order"] = order.tolist()
    return out


def _moe_trace(sc: Scenario, cluster: Cluster) -> pd.DataFrame:
    """``workloads.moe_layer_trace`` with the scenario's MoE settings; ``gpus_per_node`` is
    the scale-up domain of the placed ranks (DeepEP's "node" is the NVLink domain; a rank map
    that interleaves the domains is relabelled, :func:`_moe_domains`)."""
    m = sc.workload.moe
    assert m is not None
    _check_expert_slots(m)
    gpn, order = _moe_domains(cluster, m.ep_size)
    kwargs: dict[str, Any] = {
        "model": m.model,
        "ep_size": m.ep_size,
        "tokens_per_rank": m.tokens_per_rank,
        "gpus_per_node": gpn,
        "mode": m.mode,
        "allow_nvlink_for_low_latency_mode": m.nvlink_for_low_latency,
        "deepep_kernel": _deepep_kernel(m),
        "ll_kernel": _ll_kernel(m),
        "skew": m.skew.kind,
        "target_max_mean": m.skew.max_mean,
        "skew_shape": m.skew.exponent,
        "placement": m.placement,
        "num_redundant": m.redundant_experts,
        "routing_limit": m.routing_limit,
        "max_nodes": m.max_nodes,
        "seed": sc.seed,
        "layers": m.layers,
        "steps": m.steps,
        "dispatch_dtype": m.dispatch_dtype,
        "combine_dtype": m.combine_dtype,
        "compute_overhead_s": m.compute_overhead,
        "traffic_source": m.traffic_source,
        "kernel_memory": m.kernel_memory,
        "kernel_sample_ranks": m.kernel_sample_ranks,
        **m.skew.params,
    }
    if m.tflops is not None:
        kwargs["achieved_flops"] = m.tflops * 1e12
    if m.routing is not None:
        kwargs["routing"] = str(m.routing)
    with at("workload.moe", "MoE trace"):
        try:
            df = _call_exact(moe_layer_trace, kwargs, "workload.moe.skew.params")
        except KernelMemoryError as exc:  # the budget is the key to change
            raise ScenarioError(f"{exc}.", path="workload.moe.kernel_memory") from None
    return df if order is None else _relabel_ranks(df, order)


def _check_expert_slots(m: Any) -> None:
    """Every rank holds the same number of expert slots: ``ep_size`` divides the model's routed
    experts, plus ``redundant_experts`` with the ``redundant`` (EPLB) placement; a ScenarioError
    naming the keys otherwise."""
    from podsim.workloads.models import get_model

    try:
        experts = get_model(m.model).routed_experts
    except (KeyError, ValueError):
        return  # an unknown model is reported by the trace generator itself
    ep, extra = int(m.ep_size), int(m.redundant_experts)
    if m.placement == "redundant":
        total = experts + extra
        if total % ep:
            lo, hi = (total // ep) * ep - experts, (total // ep + 1) * ep - experts
            near = " or ".join(str(x) for x in (lo, hi) if x >= 0)
            raise ScenarioError(
                f"model {m.model!r} has {experts} routed experts; with redundant_experts={extra} "
                f"that is {total} expert slots, not a multiple of workload.moe.ep_size={ep} "
                f"(every rank holds the same number of slots). Try redundant_experts={near}.",
                path="workload.moe.redundant_experts",
            )
    elif experts % ep:
        raise ScenarioError(
            f"model {m.model!r} has {experts} routed experts, not a multiple of "
            f"workload.moe.ep_size={ep} (placement {m.placement!r} gives every rank the same "
            "number of experts); use placement: redundant with redundant_experts so that "
            "experts + redundant_experts is a multiple of ep_size, or another ep_size.",
            path="workload.moe.ep_size",
        )


def _call_exact(fn: Callable[..., Any], kwargs: dict[str, Any], path: str) -> Any:
    """``fn(**kwargs)``, naming the scenario key when a user parameter is not accepted."""
    sig = inspect.signature(fn)
    if not any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values()):
        unknown = sorted(set(kwargs) - set(sig.parameters))
        if unknown:
            raise ScenarioError(
                f"unknown parameter(s) {', '.join(map(repr, unknown))}; "
                f"{getattr(fn, '__name__', 'it')} takes {', '.join(sig.parameters)}.",
                path=path,
            )
    return fn(**kwargs)


#: first positional parameter after num_ranks of each synthetic pattern is its size
_SIZE_PARAMS = ("bytes_per_pair", "message_bytes", "total_bytes", "nbytes", "size")


def _synthetic_trace(sc: Scenario, cluster: Cluster) -> pd.DataFrame:
    s = sc.workload.synthetic
    assert s is not None
    from podsim.scenarios.input.registries import get_registry

    fn = get_registry("synthetic pattern").get(s.pattern)  # the schema checked the name
    params = inspect.signature(fn).parameters
    kwargs: dict[str, Any] = {"num_ranks": cluster.num_ranks}
    size_key = next((k for k in _SIZE_PARAMS if k in params), None)
    if size_key is not None:
        kwargs[size_key] = s.size
    if "seed" in params:
        kwargs["seed"] = sc.seed
    kwargs.update(s.params)
    with at("workload.synthetic", f"pattern {s.pattern!r}"):
        df = _call_exact(fn, kwargs, "workload.synthetic.params")
    if s.steps > 1:
        from podsim.scenarios.build.limits import check_trace_rows

        # the pattern's one step times the steps: refused before it is repeated if too big
        check_trace_rows(len(df) * s.steps, f"{s.steps:,} steps x {len(df):,} messages")
        span = int(df["step"].max()) + 1 if len(df) else 1
        attrs = dict(df.attrs)
        rows = np.tile(np.arange(len(df)), s.steps)
        shift = np.repeat(np.arange(s.steps, dtype=np.int64) * span, len(df))
        df = df.iloc[rows].reset_index(drop=True)
        df["step"] = df["step"].to_numpy(np.int64) + shift
        df.attrs = attrs
    return df


def assign_hops(trace: pd.DataFrame, cluster: Cluster) -> pd.DataFrame:
    """Hops from the placement: same rank -> local, same pod with a scale-up fabric ->
    scaleup, else rdma. Used for traces made without knowledge of the cluster."""
    src = trace["src_rank"].to_numpy()
    dst = trace["dst_rank"].to_numpy()
    same_pod = cluster.rank_pod[src] == cluster.rank_pod[dst]
    hop = np.where(src == dst, "local", np.where(same_pod & cluster.has_scaleup, "scaleup", "rdma"))
    return trace.assign(hop=hop)


def _is_splits(t: Any) -> bool:
    return t.format == "splits" or (t.format == "auto" and Path(t.path).suffix == ".npy")


def _trace_workload_file(t: Any, num_ranks: int | None) -> pd.DataFrame:
    """``workload.trace``'s file: a trace, or an all-to-all split matrix (a Megatron / NCCL
    all-to-allv size log, podsim.workloads.splits) as a one-phase trace."""
    if not _is_splits(t):
        return read_trace_file(t.path, t.format, num_ranks)
    from podsim.workloads.splits import splits_trace

    with at("workload.trace", f"split matrix {str(t.path)!r}"):
        return splits_trace(t.path, unit=t.unit, bytes_per_token=t.bytes_per_token)


def trace_ranks(sc: Scenario) -> int | None:
    """For trace workloads: the trace's rank count (attrs ``num_ranks`` or max rank + 1)."""
    if sc.workload.trace is None:
        return None
    t = sc.workload.trace
    df = _trace_workload_file(t, t.ranks)
    n = df.attrs.get("num_ranks")
    if n is None and len(df):
        n = int(max(df["src_rank"].max(), df["dst_rank"].max())) + 1
    return int(n or 1)


def build_trace(sc: Scenario, cluster: Cluster) -> pd.DataFrame:
    """The workload trace for ``cluster`` (rows are messages; row i is message i)."""
    w = sc.workload
    if w.moe is not None:
        df = _moe_trace(sc, cluster)
        path, source = "workload.moe", f"from MoE model {w.moe.model!r}"
    elif w.trace is not None:
        df = _trace_workload_file(w.trace, cluster.num_ranks)
        if _is_splits(w.trace):  # a size log knows no placement: hops from the cluster's
            df = assign_hops(df, cluster)
        path, source = "workload.trace.path", repr(str(w.trace.path))
    else:
        assert w.synthetic is not None
        df = assign_hops(_synthetic_trace(sc, cluster), cluster)
        path, source = "workload.synthetic", f"pattern {w.synthetic.pattern!r}"
    if not isinstance(df, pd.DataFrame):
        raise ScenarioError(f"the workload {source} did not produce a trace table.", path=path)
    return check_trace(df, cluster.num_ranks, source, path, recorded=w.trace is not None)


def compute_table(
    sc: Scenario, cluster: Cluster, trace: pd.DataFrame, *, with_faults: bool = True
) -> pd.DataFrame:
    """Expert-compute time per (step, layer, rank), in seconds.

    A fixed ``compute_time`` from the scenario wins; otherwise the trace's own compute table
    (the workloads compute model prices the token copies each rank received:
    ``podsim.workloads.trace.compute_table``), otherwise zero. Straggler faults multiply a rank's
    time (``with_faults=False``: the modelled time alone, what the straggler analysis compares
    the run with).
    """
    w = sc.workload
    part = w.moe or w.trace or w.synthetic
    fixed = getattr(part, "compute_time", None)
    layers = trace[["step", "layer"]].drop_duplicates().sort_values(["step", "layer"])
    ranks = np.arange(cluster.num_ranks)
    out = None
    if fixed is None:
        ct = workload_compute_table(trace)
        if len(ct):
            out = pd.DataFrame(
                {
                    "step": ct["step"].to_numpy(np.int64),
                    "layer": ct["layer"].to_numpy(np.int64),
                    "rank": ct["rank"].to_numpy(np.int64),
                    "compute_s": ct["seconds"].to_numpy(float),
                }
            )
    if out is None:
        t = float(fixed or 0.0)
        # one row per (step, layer, rank): every rank of every layer, layers in order
        n = len(ranks)
        out = pd.DataFrame(
            {
                "step": np.repeat(layers["step"].to_numpy(np.int64), n),
                "layer": np.repeat(layers["layer"].to_numpy(np.int64), n),
                "rank": np.tile(ranks.astype(np.int64), len(layers)),
                "compute_s": np.full(n * len(layers), t),
            }
        )
    return with_stragglers(sc, cluster, out) if with_faults else out


def stragglers(sc: Scenario, cluster: Cluster) -> list[Straggler]:
    """The scenario's straggler faults in order; one whose rank is outside the cluster's ranks
    is a ScenarioError at its key."""
    out = []
    for i, f in enumerate(sc.faults):
        if isinstance(f, Straggler):
            if f.rank >= cluster.num_ranks:
                raise ScenarioError(
                    f"straggler rank {f.rank} is not one of the {cluster.num_ranks} ranks.",
                    path=f"faults[{i}].rank",
                )
            out.append(f)
    return out


def straggler_factors(sc: Scenario, cluster: Cluster) -> dict[int, float]:
    """Rank -> the product of its straggler faults' factors (:func:`stragglers`)."""
    out: dict[int, float] = {}
    for f in stragglers(sc, cluster):
        out[f.rank] = out.get(f.rank, 1.0) * f.factor
    return out


def with_stragglers(sc: Scenario, cluster: Cluster, compute: pd.DataFrame) -> pd.DataFrame:
    """``compute`` (a :func:`compute_table` without faults) with the scenario's straggler
    faults applied (:func:`stragglers`): each multiplies its rank's time by its factor.
    ``compute`` is not changed; without stragglers it is returned as it is."""
    out = compute
    for f in stragglers(sc, cluster):
        if out is compute:
            out = compute.copy()
        out.loc[out["rank"] == f.rank, "compute_s"] *= f.factor
    return out
