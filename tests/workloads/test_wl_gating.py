from __future__ import annotations

import numpy as np
import pytest
from podsim.fabric.registry import UnknownNameError
from podsim.workloads.gating import (
    Routing,
    calibrate_counts,
    expert_groups,
    gate,
    max_mean,
    popularity_logits,
    replay_routing,
    scores_from_logits,
)
from podsim.workloads.placement import contiguous, round_robin


def test_softmax_topk_matches_sort_and_weights_renormalise():
    rng = np.random.default_rng(0)
    logits = rng.standard_normal((64, 16)).astype(np.float32)
    r = gate(logits, 3, scoring="softmax")
    p = np.exp(logits - logits.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    want = np.argsort(-p, axis=1)[:, :3]
    np.testing.assert_array_equal(r.topk_idx, want)
    w = np.take_along_axis(p, want, 1)
    np.testing.assert_allclose(r.topk_weights, w / w.sum(1, keepdims=True), rtol=1e-5)
    # Mixtral's form: softmax over the top-k logits is the same thing
    tl = np.take_along_axis(logits, want, 1)
    np.testing.assert_allclose(
        r.topk_weights, np.exp(tl) / np.exp(tl).sum(1, keepdims=True), rtol=1e-5
    )


def test_sigmoid_bias_selects_but_does_not_weigh():
    rng = np.random.default_rng(1)
    logits = rng.standard_normal((32, 8)).astype(np.float32)
    bias = np.zeros(8, np.float32)
    bias[7] = 10.0  # expert 7 always chosen
    r = gate(logits, 2, scoring="sigmoid", bias=bias, norm_topk_prob=False, scaling=2.5)
    assert (r.topk_idx[:, 0] == 7).all()
    s = 1 / (1 + np.exp(-logits.astype(np.float64)))
    np.testing.assert_allclose(
        r.topk_weights, 2.5 * np.take_along_axis(s, r.topk_idx, 1), rtol=1e-5
    )


def test_group_limited_routing_brute_force():
    """DeepSeek-V3 rule on a small case: top-M groups by the sum of their best 2, then top-k."""
    rng = np.random.default_rng(2)
    n, e, g, m, k = 200, 32, 8, 3, 6
    logits = rng.standard_normal((n, e)).astype(np.float32)
    r = gate(logits, k, scoring="sigmoid", groups=expert_groups(e, g), max_groups=m, group_topn=2)
    s = scores_from_logits(logits, "sigmoid")
    for t in range(n):  # the definition, token by token (test only)
        gs = np.sort(s[t].reshape(g, -1), axis=1)[:, -2:].sum(1)
        keep = np.argsort(-gs)[:m]
        allowed = np.isin(np.arange(e) // (e // g), keep)
        want = np.argsort(-np.where(allowed, s[t], -np.inf))[:k]
        assert set(r.topk_idx[t]) == set(want)
        assert len(set(r.topk_idx[t] // (e // g))) <= m


def test_node_limit_with_non_contiguous_groups():
    rng = np.random.default_rng(3)
    pl = round_robin(64, 16)  # node = rank // 4: experts of a node are not contiguous
    node = pl.rank_of_expert() // 4
    r = gate(rng.standard_normal((500, 64)), 8, scoring="sigmoid", groups=node, max_groups=2)
    assert (np.array([len(set(row)) for row in node[r.topk_idx]]) <= 2).all()


@pytest.mark.parametrize("popularity", ["zipf", "lognormal"])
@pytest.mark.parametrize("target", [1.3, 2.56, 4.0])
@pytest.mark.parametrize("placement", [contiguous, round_robin])
def test_skew_models_hit_target_within_5_percent(popularity, target, placement):
    """Per-rank load (token copies per rank after gating) max/mean within 5 % of the target."""
    n, e, k, ranks = 4096, 256, 8, 32
    pl = placement(e, ranks)
    logits = popularity_logits(
        n,
        e,
        k,
        popularity,
        target_max_mean=target,
        rank_of_expert=pl.rank_of_expert(),
        rng=np.random.default_rng(7),
    )
    r = gate(logits, k, scoring="sigmoid")
    load = np.bincount(pl.rank_of_expert()[r.topk_idx.ravel()], minlength=ranks)
    assert load.sum() == n * k
    assert abs(max_mean(load) - target) / target < 0.05


def test_skew_per_expert_and_cap():
    counts, shape = calibrate_counts(
        1000, 16, 2, "zipf", target_max_mean=5.0, rng=np.random.default_rng(0)
    )
    assert counts.sum() == 2000 and counts.max() <= 1000 and shape > 0
    assert abs(max_mean(counts) - 5.0) / 5.0 < 0.05
    with pytest.raises(ValueError, match="unreachable"):
        calibrate_counts(1000, 16, 2, "zipf", target_max_mean=9.0, rng=np.random.default_rng(0))


def test_uniform_routing_is_random_and_takes_no_target():
    logits = popularity_logits(4096, 64, 4, "uniform", rng=np.random.default_rng(0))
    r = gate(logits, 4)
    c = r.expert_counts()
    # binomial(4096, 4/64) per expert: mean 256, sd 15.5; max of 64 stays within ~4 sd
    assert c.sum() == 4096 * 4 and max_mean(c) < 1 + 4 * np.sqrt(256 * (1 - 4 / 64)) / 256
    with pytest.raises(ValueError, match="takes no target"):
        popularity_logits(10, 8, 2, "uniform", target_max_mean=2.0, rng=np.random.default_rng(0))
    with pytest.raises(UnknownNameError, match="zipf"):
        popularity_logits(10, 8, 2, "zipff", rng=np.random.default_rng(0))


def test_popularity_is_deterministic():
    def make(seed):
        return popularity_logits(
            512, 32, 4, "lognormal", target_max_mean=2.0, rng=np.random.default_rng(seed)
        )

    np.testing.assert_array_equal(make(5), make(5))
    assert not np.array_equal(make(5), make(6))


def test_replay_routing():
    ids = np.array([[0, 3], [2, -1], [1, 2]])
    r = replay_routing(ids, 4)
    np.testing.assert_allclose(r.topk_weights, [[0.5, 0.5], [1.0, 0.0], [0.5, 0.5]])
    with pytest.raises(ValueError, match="routed twice"):
        replay_routing(np.array([[1, 1]]), 4)
    with pytest.raises(ValueError, match="expert id 4 out of range"):
        Routing(np.array([[4]]), np.ones((1, 1)), 4)


@pytest.mark.parametrize("seed", range(5))
def test_assignment_has_exact_counts_and_distinct_experts(seed):
    from podsim.workloads.gating import _assignment

    rng = np.random.default_rng(seed)
    n, k, e = 50, 4, 9
    counts = np.array([50, 50, 37, 20, 13, 10, 10, 10, 0])  # two experts at the cap of N
    assert counts.sum() == n * k
    a = _assignment(counts, n, k, rng)
    np.testing.assert_array_equal(np.bincount(a.ravel(), minlength=e), counts)
    s = np.sort(a, axis=1)
    assert (s[:, 1:] != s[:, :-1]).all()


@pytest.mark.parametrize(("n", "e", "k"), [(20000, 256, 8), (3000, 8, 4)])
def test_sample_topk_draws_k_distinct_experts_uniformly(n, e, k):
    from podsim.workloads.gating import sample_topk

    idx = sample_topk(n, e, k, np.random.default_rng(1))
    assert idx.shape == (n, k) and idx.min() >= 0 and idx.max() < e
    s = np.sort(idx, axis=1)
    assert (s[:, 1:] != s[:, :-1]).all()  # k distinct experts per token
    counts = np.bincount(idx.ravel(), minlength=e)
    expect = n * k / e  # each expert is in a uniform k-subset with probability k / e
    chi2 = ((counts - expect) ** 2 / expect).sum()
    assert chi2 < e + 6 * np.sqrt(2 * e)  # far above the mean (e - 1) only if not uniform
    np.testing.assert_array_equal(idx, sample_topk(n, e, k, np.random.default_rng(1)))
    with pytest.raises(ValueError, match=r"top_k=9 must be in 1\.\.8"):
        sample_topk(4, 8, 9, np.random.default_rng(0))
