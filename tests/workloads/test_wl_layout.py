from __future__ import annotations

import numpy as np
import pytest
from podsim.workloads.layout import ep_layout, get_dispatch_layout


def _routing(n, e, k, seed, masked=0.0):
    rng = np.random.default_rng(seed)
    idx = np.argsort(rng.random((n, e)), axis=1)[:, :k]
    idx[rng.random((n, k)) < masked] = -1
    return idx


@pytest.mark.parametrize(
    ("n", "e", "r", "k", "gpn"), [(50, 32, 8, 4, 4), (40, 16, 16, 3, 8), (30, 8, 2, 2, None)]
)
def test_get_dispatch_layout_matches_brute_force(n, e, r, k, gpn):
    idx = _routing(n, e, k, seed=n, masked=0.2)
    lay = get_dispatch_layout(idx, e, r, gpn)
    per_rank = e // r
    per_expert = np.zeros(e, int)
    in_rank = np.zeros((n, r), bool)
    for t in range(n):  # the definition, literally
        for x in idx[t]:
            if x >= 0:
                per_expert[x] += 1
                in_rank[t, x // per_rank] = True
    np.testing.assert_array_equal(lay.num_tokens_per_expert, per_expert)
    np.testing.assert_array_equal(lay.is_token_in_rank, in_rank)
    np.testing.assert_array_equal(lay.num_tokens_per_rank, in_rank.sum(0))
    if gpn is None:
        assert lay.num_tokens_per_rdma_rank is None
    else:
        nodes = -(-r // gpn)
        want = [
            sum(in_rank[t, nd * gpn : (nd + 1) * gpn].any() for t in range(n))
            for nd in range(nodes)
        ]
        np.testing.assert_array_equal(lay.num_tokens_per_rdma_rank, want)


def test_ep_layout_pair_matrices():
    r, tpr, e, k, gpn = 8, 12, 32, 4, 4
    idx = _routing(r * tpr, e, k, seed=3, masked=0.1)
    lay = ep_layout(idx, e, r, tpr, gpn)
    pair_tokens = np.zeros((r, r), int)
    pair_copies = np.zeros((r, r), int)
    node_tokens = np.zeros((r, r // gpn), int)
    for t in range(r * tpr):
        s = t // tpr
        dsts = {x // (e // r) for x in idx[t] if x >= 0}
        for d in dsts:
            pair_tokens[s, d] += 1
        for x in idx[t]:
            if x >= 0:
                pair_copies[s, x // (e // r)] += 1
        for nd in {d // gpn for d in dsts}:
            node_tokens[s, nd] += 1
    np.testing.assert_array_equal(lay.pair_tokens, pair_tokens)
    np.testing.assert_array_equal(lay.pair_copies, pair_copies)
    np.testing.assert_array_equal(lay.node_tokens, node_tokens)
    st = lay.stats()
    assert st["avg_ranks_per_token"] == pytest.approx(pair_tokens.sum() / (r * tpr))
    assert st["avg_nodes_per_token"] == pytest.approx(node_tokens.sum() / (r * tpr))


def test_ep_layout_uneven_tokens_per_rank():
    idx = _routing(10, 8, 2, seed=4)
    lay = ep_layout(idx, 8, 2, np.array([3, 7]))
    assert lay.pair_tokens.sum(axis=1).tolist() == [
        lay.layout.is_token_in_rank[:3].sum(),
        lay.layout.is_token_in_rank[3:].sum(),
    ]
    with pytest.raises(ValueError, match="sum to the 10"):
        ep_layout(idx, 8, 2, 4)


def test_layout_rejects_bad_ids():
    with pytest.raises(ValueError, match="expert id 9"):
        get_dispatch_layout(np.array([[0, 9]]), 8, 2)
    with pytest.raises(ValueError, match="multiple of num_ranks"):
        get_dispatch_layout(np.array([[0, 1]]), 8, 3)
