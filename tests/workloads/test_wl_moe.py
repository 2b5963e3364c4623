from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from podsim.fabric.registry import UnknownNameError
from podsim.workloads import WORKLOADS, build_workload, compute_table, moe_layer, moe_layer_trace
from podsim.workloads.gating import max_mean
from podsim.workloads.models import get_model


def test_same_seed_same_trace_bit_for_bit():
    kw = dict(skew="lognormal", target_max_mean=2.0, layers=2, steps=2)
    a = moe_layer_trace("qwen3-235b-a22b", 16, 32, 8, "megatron-alltoall", seed=3, **kw)
    b = moe_layer_trace("qwen3-235b-a22b", 16, 32, 8, "megatron-alltoall", seed=3, **kw)
    c = moe_layer_trace("qwen3-235b-a22b", 16, 32, 8, "megatron-alltoall", seed=4, **kw)
    pd.testing.assert_frame_equal(a, b)
    np.testing.assert_array_equal(a.attrs["compute"]["seconds"], b.attrs["compute"]["seconds"])
    assert not a.equals(c)
    assert sorted(a.step.unique()) == [0, 1] and sorted(a.layer.unique()) == [0, 1]


def test_hot_experts_persist_across_steps_but_tokens_change():
    kw = dict(skew="zipf", target_max_mean=3.0, routing_limit="none")
    s0 = moe_layer("kimi-k2", 16, 64, 8, step=0, **kw).routing
    s1 = moe_layer("kimi-k2", 16, 64, 8, step=1, **kw).routing
    assert not np.array_equal(s0.topk_idx, s1.topk_idx)
    assert np.argmax(s0.expert_counts()) == np.argmax(s1.expert_counts())


def test_skew_target_reached_in_trace_without_limit():
    t = moe_layer_trace(
        "kimi-k2",
        32,
        64,
        8,
        "megatron-alltoall",
        skew="lognormal",
        target_max_mean=2.56,
        routing_limit="none",
    )
    recv = (
        t[t.phase == "dispatch"]
        .groupby("dst_rank")["tokens"]
        .sum()
        .reindex(range(32), fill_value=0)
    )
    assert abs(max_mean(recv.to_numpy()) - 2.56) / 2.56 < 0.05
    assert t.attrs["rank_load_max_mean"] == pytest.approx(max_mean(recv.to_numpy()))


def test_redundant_placement_lowers_the_skew():
    kw = dict(skew="zipf", target_max_mean=3.0, routing_limit="none", mode="megatron-alltoall")
    base = moe_layer_trace("deepseek-v3", 16, 64, 8, **kw)
    red = moe_layer_trace("deepseek-v3", 16, 64, 8, placement="redundant", num_redundant=32, **kw)
    assert red.attrs["rank_load_max_mean"] < base.attrs["rank_load_max_mean"]
    assert red[red.phase == "dispatch"].tokens.sum() == base[base.phase == "dispatch"].tokens.sum()


def test_compute_times_from_flops():
    m = get_model("deepseek-v3")
    t = moe_layer_trace("deepseek-v3", 16, 32, 8, achieved_flops=5e14, layers=2)
    ct = compute_table(t)
    assert len(ct) == 2 * 16
    np.testing.assert_allclose(ct.seconds, 2 * 3 * ct.token_copies * m.hidden * m.moe_ffn / 5e14)
    # token copies computed per rank = (token, expert) rows delivered to it
    disp = t[(t.phase == "dispatch") & (t.layer == 0)]
    assert ct[ct.layer == 0].token_copies.sum() == 16 * 32 * m.top_k
    assert disp.tokens.sum() > 0


def test_replay_recorded_routing(tmp_path):
    rng = np.random.default_rng(0)
    ids = np.argsort(rng.random((8 * 16, 8)), axis=1)[:, :2]
    path = tmp_path / "routing.npy"
    np.save(path, ids)
    t = moe_layer_trace("mixtral-8x7b", 8, 16, 4, "megatron-alltoall", routing=path)
    assert t.attrs["skew"] == "replay"
    src = np.repeat(np.arange(8), 16)
    want = np.zeros((8, 8), int)
    np.add.at(want, (np.repeat(src, 2), ids.ravel()), 1)  # one expert per rank
    d = t[t.phase == "dispatch"]
    got = np.zeros((8, 8), int)
    got[d.src_rank, d.dst_rank] = d.tokens
    np.testing.assert_array_equal(got, want)
    with pytest.raises(ValueError, match="expected ep_size x tokens_per_rank"):
        moe_layer_trace("mixtral-8x7b", 8, 10, 4, routing=ids)


def test_workloads_registry_names_and_errors():
    assert set(WORKLOADS.names()) == {
        "moe",
        "uniform",
        "permutation",
        "incast",
        "ring-allreduce",
        "splits",
        "trace-file",
    }
    t = build_workload("moe", model="mixtral-8x7b", ep_size=8, tokens_per_rank=8, gpus_per_node=4)
    assert t.attrs["num_ranks"] == 8 and t.attrs["model"] == "mixtral-8x7b"
    with pytest.raises(UnknownNameError, match="incast"):
        build_workload("incas", num_ranks=4, message_bytes=1)
    with pytest.raises(ValueError, match="no parameter"):
        build_workload("incast", num_ranks=4, message_bytes=1, bogus=2)
    with pytest.raises(UnknownNameError, match="deepep-normal"):
        moe_layer_trace("mixtral-8x7b", 8, 8, 4, "deepep-normall")
