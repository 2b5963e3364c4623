"""Trace bytes against the layout, per mode, and DeepSeek-V3 node-limited routing."""

from __future__ import annotations

import numpy as np
import pytest
from podsim.workloads.dispatch import dispatch
from podsim.workloads.models import get_model
from podsim.workloads.moe import moe_layer, moe_layer_trace
from podsim.workloads.precision import bytes_per_token, quantize
from podsim.workloads.traffic import classify_hops, phase_messages

DSV3 = get_model("deepseek-v3")
FP8 = bytes_per_token("fp8", DSV3.hidden)  # 7392
BF16 = bytes_per_token("bf16", DSV3.hidden)  # 14336


@pytest.fixture(scope="module")
def layer():
    return moe_layer("deepseek-v3", 32, 64, 8, seed=1)


def _by(df, col):
    return df.groupby(col)["bytes"].sum().to_dict()


@pytest.mark.parametrize(("mode", "header"), [("megatron-alltoall", 0), ("deepep-low-latency", 16)])
def test_per_copy_modes_bytes_equal_copies(layer, mode, header):
    lay = layer.layout
    for phase, bpt, mat in (
        ("dispatch", FP8 + header, lay.pair_copies),
        ("combine", BF16, lay.pair_copies.T),
    ):
        msg = phase_messages(lay, mode, phase, bpt - header if phase == "dispatch" else bpt)
        got = np.zeros_like(mat)
        got[msg.src, msg.dst] = msg.bytes
        np.testing.assert_array_equal(got, mat * bpt)
        assert msg.bytes.sum() == lay.layout.num_tokens_per_expert.sum() * bpt


def test_deepep_normal_bytes_equal_dedup_counts(layer):
    lay = layer.layout
    r, gpn = 32, 8
    node = np.arange(r) // gpn
    for phase, bpt in (("dispatch", FP8), ("combine", BF16)):
        msg = phase_messages(lay, "deepep-normal", phase, bpt)
        rdma = msg.hop == "rdma"
        remote_node_tokens = lay.node_tokens.sum() - lay.node_tokens[np.arange(r), node].sum()
        assert msg.bytes[rdma].sum() == remote_node_tokens * bpt
        # every deduplicated (token, rank) pair arrives by exactly one scale-up or local hop
        assert msg.bytes[~rdma].sum() == lay.layout.num_tokens_per_rank.sum() * bpt
        final = msg.dst if phase == "dispatch" else msg.src  # combine leaves the expert rank once
        into = np.bincount(final[~rdma], weights=msg.tokens[~rdma], minlength=r)
        np.testing.assert_array_equal(into, lay.layout.num_tokens_per_rank)
        # RDMA goes to (or, in combine, comes from) the same local index on the other node
        a, b = (msg.src, msg.dst) if phase == "dispatch" else (msg.dst, msg.src)
        assert (a[rdma] % gpn == b[rdma] % gpn).all() and (node[a[rdma]] != node[b[rdma]]).all()
        np.testing.assert_array_equal(msg.stage[rdma], 0 if phase == "dispatch" else 1)


def test_forwarded_bytes_match_kernel_receive_buffers(layer):
    """Trace (all hops) and the dispatch kernel agree on what each rank receives."""
    x = np.zeros((layer.layout.src_rank.size, 256), np.float32)
    _, h = dispatch(
        quantize(x, "bf16"),
        layer.physical_topk,
        layer.routing.topk_weights,
        256,
        32,
        "deepep-normal",
    )
    msg = phase_messages(layer.layout, "deepep-normal", "dispatch", 1)
    last = msg.hop != "rdma"
    np.testing.assert_array_equal(
        np.bincount(msg.dst[last], weights=msg.tokens[last], minlength=32), np.diff(h.rank_offsets)
    )


def test_megatron_sends_more_than_deepep_by_the_layout_ratio(layer):
    lay = layer.layout
    t_meg = moe_layer_trace("deepseek-v3", 32, 64, 8, "megatron-alltoall", seed=1)
    t_dep = moe_layer_trace("deepseek-v3", 32, 64, 8, "deepep-normal", seed=1)
    for phase in ("dispatch", "combine"):
        meg = t_meg[t_meg.phase == phase]
        dep = t_dep[t_dep.phase == phase]
        # delivered to ranks: (token, expert) copies vs deduplicated (token, rank) pairs
        ratio = lay.layout.num_tokens_per_expert.sum() / lay.layout.num_tokens_per_rank.sum()
        assert ratio > 1
        assert meg.bytes.sum() / dep[dep.hop != "rdma"].bytes.sum() == pytest.approx(
            ratio, rel=1e-12
        )
        # across nodes: copies whose expert is on another node vs per-node dedup
        node = np.arange(32) // 8
        cross = node[:, None] != node[None, :]
        rdma_ratio = lay.pair_copies[cross].sum() / (
            lay.node_tokens.sum() - lay.node_tokens[np.arange(32), node].sum()
        )
        assert _by(meg, "hop")["rdma"] / _by(dep, "hop")["rdma"] == pytest.approx(
            rdma_ratio, rel=1e-12
        )
        assert rdma_ratio > 1


@pytest.mark.parametrize("ep", [16, 32, 64])
@pytest.mark.parametrize(
    ("limit", "max_nodes"), [("node", 1), ("node", 2), ("node", 4), ("model", None)]
)
def test_deepseek_v3_node_limited_routing(ep, limit, max_nodes, capsys):
    """No token reaches more than M nodes (M = 4 for DeepSeek-V3's 4 of 8 groups at 32 experts
    per node); the averages of target nodes and ranks per token are reported."""
    gpn, tpr = 8, 32
    lt = moe_layer("deepseek-v3", ep, tpr, gpn, routing_limit=limit, max_nodes=max_nodes, seed=ep)
    m = max_nodes or DSV3.topk_groups
    in_rank = lt.layout.layout.is_token_in_rank
    nodes_per_token = in_rank.reshape(in_rank.shape[0], -1, gpn).any(axis=2).sum(axis=1)
    assert nodes_per_token.max() <= m
    if ep == 64:
        assert nodes_per_token.max() == m  # the limit binds (8 nodes available)
    st = lt.layout.stats()
    assert st["avg_nodes_per_token"] == pytest.approx(nodes_per_token.mean())
    assert st["avg_ranks_per_token"] == pytest.approx(in_rank.sum(1).mean())
    with capsys.disabled():
        print(
            f"\nDeepSeek-V3 EP{ep} limit={limit} M={m}: avg nodes/token "
            f"{st['avg_nodes_per_token']:.3f}, avg ranks/token {st['avg_ranks_per_token']:.3f}"
        )


def test_classify_hops():
    assert classify_hops([0, 0, 0, 9], [0, 3, 4, 1], 4).tolist() == [
        "local",
        "scaleup",
        "rdma",
        "rdma",
    ]
    assert classify_hops([0, 1], [0, 0], None).tolist() == ["local", "rdma"]


def test_single_node_deepep_is_direct():
    lt = moe_layer("mixtral-8x7b", 8, 50, 8, seed=0)
    msg = phase_messages(lt.layout, "deepep-normal", "dispatch", 10)
    assert set(msg.hop.tolist()) <= {"scaleup", "local"} and (msg.stage == 0).all()
    np.testing.assert_array_equal(
        np.bincount(msg.dst, weights=msg.bytes, minlength=8),
        lt.layout.layout.num_tokens_per_rank * 10,
    )


@pytest.mark.parametrize("phase", ["dispatch", "combine"])
def test_low_latency_goes_over_rdma_unless_nvlink_is_allowed(layer, phase):
    """DeepEP LL puts every message over RDMA (IBGDA), same-node peers too; only self-copies are
    local. allow_nvlink_for_low_latency_mode moves same-node messages to the scale-up domain;
    the bytes per (src, dst) never change."""
    lay, gpn = layer.layout, 8
    rdma_only = phase_messages(
        lay, "deepep-low-latency", phase, BF16, allow_nvlink_for_low_latency_mode=False
    )
    nvl = phase_messages(lay, "deepep-low-latency", phase, BF16)  # DeepEP's default: NVLink
    self_msg = rdma_only.src == rdma_only.dst
    same_node = rdma_only.src // gpn == rdma_only.dst // gpn
    assert self_msg.any() and (same_node & ~self_msg).any()  # the case exercises both kinds
    np.testing.assert_array_equal(rdma_only.hop, np.where(self_msg, "local", "rdma"))
    np.testing.assert_array_equal(nvl.hop, classify_hops(nvl.src, nvl.dst, gpn))
    for f in ("src", "dst", "tokens", "bytes", "stage"):
        np.testing.assert_array_equal(getattr(rdma_only, f), getattr(nvl, f))
    # RDMA bytes = every (token, expert) copy that leaves its rank, with the 16 B LL header
    # on dispatch messages
    mat = lay.pair_copies if phase == "dispatch" else lay.pair_copies.T
    off_rank = mat.sum() - np.trace(mat)
    row = BF16 + (16 if phase == "dispatch" else 0)
    assert rdma_only.bytes[rdma_only.hop == "rdma"].sum() == off_rank * row
    # Megatron's NCCL all-to-all is not affected by the DeepEP flag
    meg = phase_messages(lay, "megatron-alltoall", phase, BF16)
    meg_nvl = phase_messages(
        lay, "megatron-alltoall", phase, BF16, allow_nvlink_for_low_latency_mode=True
    )
    np.testing.assert_array_equal(meg.hop, classify_hops(meg.src, meg.dst, gpn))
    np.testing.assert_array_equal(meg.hop, meg_nvl.hop)


def test_low_latency_flag_reaches_the_trace():
    kw = {"model": "mixtral-8x7b", "ep_size": 8, "tokens_per_rank": 16, "gpus_per_node": 4}
    t = moe_layer_trace(
        mode="deepep-low-latency", seed=3, allow_nvlink_for_low_latency_mode=False, **kw
    )
    t_nvl = moe_layer_trace(mode="deepep-low-latency", seed=3, **kw)  # default: NVLink, as DeepEP
    assert t.attrs["allow_nvlink_for_low_latency_mode"] is False
    assert t_nvl.attrs["allow_nvlink_for_low_latency_mode"] is True
    assert set(t.hop) == {"rdma", "local"} and "scaleup" in set(t_nvl.hop)
    assert (t.bytes.to_numpy() == t_nvl.bytes.to_numpy()).all()
    with pytest.raises(ValueError, match="allow_nvlink_for_low_latency_mode must be True or"):
        moe_layer_trace(mode="deepep-low-latency", allow_nvlink_for_low_latency_mode="yes", **kw)


@pytest.mark.slow
def test_full_size_deepseek_v3_ep64():
    """The benchmark's scale as a trace: EP64, 4096 tokens per rank, 8 GPUs per node."""
    t = moe_layer_trace("deepseek-v3", 64, 4096, 8, "deepep-normal", seed=0)
    d = t[t.phase == "dispatch"]
    assert t.attrs["avg_nodes_per_token"] <= 4
    final = d[d.hop != "rdma"]
    assert final.bytes.sum() == round(t.attrs["avg_ranks_per_token"] * 64 * 4096) * FP8
