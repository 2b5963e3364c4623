"""An MoE layer under a rank map that interleaves the scale-up domains (``by-node`` over two
pods): DeepEP's "node" is the scale-up domain, so a message between two ranks of one domain
goes over the scale-up fabric and one between domains over RDMA, whatever the rank numbers.
Before the trace was relabelled (scenarios/build/cluster.py ``_moe_domains``) it took blocks of
consecutive ranks for domains, sent "scale-up" messages between pods and, at EP 256, stopped
the flow engine on a switch-byte invariant."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from podsim.scenarios.build.cluster import _moe_domains, compute_table
from podsim.scenarios.errors import ScenarioError
from podsim.scenarios.input.loader import load_scenario
from podsim.scenarios.runner import prepare

SCENARIO = {
    "name": "moe-by-node",
    "seed": 1,
    "engine": "flow",
    "cluster": {
        "preset": "superpod-128",
        "params": {"pods": 2, "gpus_per_pod": 16},
        "rank_map": "by-node",
    },
    "workload": {"moe": {"model": "kimi-k3.1-pro-class", "ep_size": 32, "tokens_per_rank": 64,
                         "layers": 1}},
    "outputs": {"plots": False},
}  # fmt: skip


def _prepared(rank_map: str):
    sc, _ = load_scenario({**SCENARIO, "cluster": {**SCENARIO["cluster"], "rank_map": rank_map}})
    return prepare(sc)


@pytest.mark.parametrize("mode", ["deepep-normal", "deepep-low-latency"])
def test_hops_follow_the_scale_up_domains_under_by_node(mode: str) -> None:
    sc, _ = load_scenario({**SCENARIO, "workload": {"moe": {**SCENARIO["workload"]["moe"],
                                                            "mode": mode}}})  # fmt: skip
    p = prepare(sc)
    pod = p.cluster.rank_pod
    assert len(set(pod[:16].tolist())) == 2  # by-node really interleaves the pods
    t = p.trace
    src, dst = t["src_rank"].to_numpy(), t["dst_rank"].to_numpy()
    same = pod[src] == pod[dst]
    assert (same[t["hop"] == "scaleup"]).all()
    if mode == "deepep-normal":  # every cross-domain byte goes over RDMA, none inside
        assert (~same[t["hop"] == "rdma"]).all()
    assert set(t["hop"]) >= {"scaleup", "rdma"}


def test_by_node_is_the_contiguous_layer_relabelled() -> None:
    """The same messages and per-rank compute as the contiguous placement, with logical rank i
    on the i-th rank in domain order."""
    bn, ct = _prepared("by-node"), _prepared("contiguous")
    order = np.asarray(bn.trace.attrs["rank_order"])
    assert sorted(order.tolist()) == list(range(32))
    assert (np.diff(bn.cluster.rank_pod[order]) >= 0).all()
    key = ["phase", "src_rank", "dst_rank", "bytes", "hop"]
    a = ct.trace[key].copy()
    a["src_rank"], a["dst_rank"] = order[a["src_rank"]], order[a["dst_rank"]]
    b = bn.trace[key]
    assert sorted(map(tuple, a.to_numpy().tolist())) == sorted(map(tuple, b.to_numpy().tolist()))
    cb = compute_table(bn.scenario, bn.cluster, bn.trace).set_index("rank")["compute_s"]
    cc = compute_table(ct.scenario, ct.cluster, ct.trace).set_index("rank")["compute_s"]
    assert np.allclose(cb.loc[order].to_numpy(), cc.loc[np.arange(32)].to_numpy())


def test_uneven_domains_are_refused_at_the_rank_map() -> None:
    cluster = SimpleNamespace(gpus_per_pod=16, has_scaleup=True,
                              rank_pod=np.array([0, 1, 0, 1, 0, 0]))  # fmt: skip
    with pytest.raises(ScenarioError, match=r"unevenly.*4, 2 ranks per domain") as e:
        _moe_domains(cluster, 6)
    assert e.value.path == "cluster.rank_map"
    # blocks that are domains already: unchanged
    ok = SimpleNamespace(gpus_per_pod=2, has_scaleup=True, rank_pod=np.array([0, 0, 1, 1]))
    assert _moe_domains(ok, 4) == (2, None)
