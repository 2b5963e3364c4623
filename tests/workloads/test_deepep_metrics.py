"""DeepEP's test-script byte counts (podsim.workloads.deepep_metrics) on hand-checked layouts."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from podsim.scenarios.results.tables import conform, empty_table, summarise
from podsim.workloads.deepep_metrics import deepep_bytes_table, deepep_rank_bw, deepep_rank_bytes
from podsim.workloads.layout import ep_layout
from podsim.workloads.moe import moe_layer_trace

FP8, BF16 = 7168 + 224, 2 * 7168

# 4 ranks, 2 per node, 8 experts (2 per rank, 4 per node), one token per rank, top-2
TOPK = np.array([[0, 1], [2, 6], [4, 5], [0, 7]])
# rank 0: experts on rank 0 only        -> 1 node (its own), 2 selections
# rank 1: ranks 1 and 3, nodes 0 and 1  -> 2 nodes
# rank 2: rank 2 twice, node 1          -> 1 node
# rank 3: ranks 0 and 3, nodes 0 and 1  -> 2 nodes
# rows received (one per token with an expert on the rank): r0 {t0, t3}, r1 {t1}, r2 {t2},
# r3 {t1, t3}
NODES = np.array([1, 2, 1, 2])
RECV = np.array([2, 1, 1, 2])


def layout(gpn: int):
    return ep_layout(TOPK, 8, 4, 1, gpn)


def test_internode_normal_counts_token_node_pairs_with_own_node_and_rows_received() -> None:
    d = deepep_rank_bytes(layout(2), "deepep-normal", "dispatch", FP8)
    np.testing.assert_array_equal(d["rdma"], NODES * FP8)
    np.testing.assert_array_equal(d["nvl"], RECV * FP8)
    c = deepep_rank_bytes(layout(2), "deepep-normal", "combine", BF16)
    np.testing.assert_array_equal(c["rdma"], NODES * BF16)
    np.testing.assert_array_equal(c["nvl"], RECV * BF16)


def test_intranode_normal_has_only_the_nvl_figure() -> None:
    d = deepep_rank_bytes(layout(4), "deepep-normal", "dispatch", FP8)
    assert np.isnan(d["rdma"]).all()
    np.testing.assert_array_equal(d["nvl"], RECV * FP8)


def test_low_latency_counts_every_selection_with_the_header() -> None:
    d = deepep_rank_bytes(layout(2), "deepep-low-latency", "dispatch", FP8)
    np.testing.assert_array_equal(d["rdma"], [2 * 7408] * 4)  # hidden + hidden/128*4 + 16
    assert np.isnan(d["nvl"]).all()
    c = deepep_rank_bytes(layout(2), "deepep-low-latency", "combine", BF16)
    np.testing.assert_array_equal(c["rdma"], [2 * BF16] * 4)


def test_megatron_has_no_deepep_figure() -> None:
    d = deepep_rank_bytes(layout(2), "megatron-alltoall", "dispatch", FP8)
    assert np.isnan(d["rdma"]).all() and np.isnan(d["nvl"]).all()


def test_counts_match_deepeps_own_formulas_on_random_routing() -> None:
    """test_internode.py's num_rdma_token_sent and recv_x rows, written as the script does."""
    ranks, gpn, experts, n = 16, 8, 256, 64
    rng = np.random.default_rng(3)
    topk = np.stack([rng.choice(experts, 8, replace=False) for _ in range(ranks * n)])
    topk[5, 2] = -1  # a masked slot
    lay = ep_layout(topk, experts, ranks, n, gpn)
    d = deepep_rank_bytes(lay, "deepep-normal", "dispatch", 1)
    nodes = ranks // gpn
    for r in range(ranks):
        mine = topk[r * n : (r + 1) * n]
        rdma_idx = np.where(mine >= 0, mine // (experts // nodes), -1)
        sent = sum(len(set(row[row >= 0].tolist())) for row in rdma_idx)
        assert d["rdma"][r] == sent
    rank_of = np.where(topk >= 0, topk // (experts // ranks), -1)
    recv = [int(((rank_of == r).any(axis=1)).sum()) for r in range(ranks)]
    np.testing.assert_array_equal(d["nvl"], recv)
    ll = deepep_rank_bytes(lay, "deepep-low-latency", "combine", 1)
    np.testing.assert_array_equal(ll["rdma"], (topk >= 0).reshape(ranks, n * 8).sum(axis=1))


def test_bandwidth_is_the_ranks_bytes_over_its_own_time() -> None:
    bw = deepep_rank_bw(np.array([10.0, np.nan, 5.0]), np.array([2.0, 1.0, 0.0]))
    assert bw[0] == 5.0 and np.isnan(bw[1]) and np.isnan(bw[2])


def test_trace_carries_the_counts_and_the_summary_divides_by_rank_time() -> None:
    tr = moe_layer_trace("deepseek-v3", 16, 32, 8, "deepep-normal", seed=2)
    table = deepep_bytes_table(tr.attrs)
    assert len(table) == 2 * 16
    disp = table[table["phase"] == "dispatch"].sort_values("rank")
    # every (token, node) pair the trace sends over RDMA is counted, plus the own-node ones
    sent = tr[(tr["phase"] == "dispatch") & (tr["hop"] == "rdma")].groupby("src_rank")["bytes"]
    assert (disp["rdma_bytes"].to_numpy() >= sent.sum().reindex(range(16), fill_value=0)).all()
    # rows received = bytes delivered by the last (scale-up or local) hop of dispatch
    last = tr[(tr["phase"] == "dispatch") & (tr["hop"] != "rdma")].groupby("dst_rank")["bytes"]
    np.testing.assert_array_equal(disp["nvl_bytes"].to_numpy(), last.sum().to_numpy())
    dur = np.linspace(1e-3, 2e-3, 16)
    ph = pd.DataFrame(
        {
            "step": 0,
            "layer": 0,
            "phase": "dispatch",
            "rank": range(16),
            "start_s": 0.0,
            "end_s": dur,
            "duration_s": dur,
            "bytes_out": 0,
            "bytes_in": 0,
        }
    )
    s = summarise(
        messages=empty_table("messages"),
        phases=conform("phases", ph),
        links=empty_table("links"),
        qps=empty_table("qps"),
        num_ranks=16,
        makespan_s=2e-3,
        deepep=table,
    )["phases"]["dispatch"]
    assert s["deepep_time_s"] == pytest.approx(dur.mean())
    assert s["deepep_rdma_bw_per_gpu_Bps"] == pytest.approx(np.mean(disp["rdma_bytes"] / dur))
    assert s["deepep_nvl_bw_per_gpu_Bps"] == pytest.approx(np.mean(disp["nvl_bytes"] / dur))
