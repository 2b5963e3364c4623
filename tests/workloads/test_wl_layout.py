from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from podsim.workloads.layout import ep_layout, ep_layout_blocks, get_dispatch_layout


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


# ------------------------------------------------- sparse layout against the dense definition


def _dense_ep_layout(idx, e, r, counts, gpn):
    """The dense layout podsim used before the sparse one: a [tokens, ranks] bool matrix."""
    per_rank = e // r
    n = idx.shape[0]
    in_rank = np.zeros((n, r), dtype=bool)
    valid = idx >= 0
    rows = np.broadcast_to(np.arange(n)[:, None], idx.shape)[valid]
    in_rank[rows, idx[valid] // per_rank] = True
    src = np.repeat(np.arange(r), counts)
    tok, dst = np.nonzero(in_rank)
    pair_tokens = np.bincount(src[tok] * r + dst, minlength=r * r).reshape(r, r)
    csrc = np.broadcast_to(src[:, None], idx.shape)[valid]
    pair_copies = np.bincount(csrc * r + idx[valid] // per_rank, minlength=r * r).reshape(r, r)
    node_tokens = None
    if gpn is not None:
        nodes = -(-r // gpn)
        in_node = np.zeros((n, nodes), dtype=bool)
        in_node[tok, dst // gpn] = True
        t2, n2 = np.nonzero(in_node)
        node_tokens = np.bincount(src[t2] * nodes + n2, minlength=r * nodes).reshape(r, nodes)
    return in_rank, pair_tokens, pair_copies, node_tokens


@st.composite
def _layout_cases(draw):
    r = draw(st.sampled_from([1, 2, 3, 4, 6, 8, 16]))
    e = r * draw(st.integers(1, 4))
    k = draw(st.integers(1, min(e, 6)))
    counts = np.array(draw(st.lists(st.integers(0, 6), min_size=r, max_size=r)))
    gpn = draw(st.one_of(st.none(), st.integers(1, r + 1)))
    seed = draw(st.integers(0, 2**16))
    rng = np.random.default_rng(seed)
    n = int(counts.sum())
    idx = np.argsort(rng.random((n, e)), axis=1)[:, :k]
    idx[rng.random((n, k)) < draw(st.sampled_from([0.0, 0.3, 1.0]))] = -1
    cut = sorted(set(draw(st.lists(st.integers(1, r - 1), max_size=3)) if r > 1 else []))
    return idx, e, r, counts, gpn, [0, *cut, r]


@settings(max_examples=150, deadline=None)
@given(_layout_cases())
def test_sparse_layout_equals_dense_definition(case):
    """Differential: the sparse layout (whole, and block by block) equals the dense one."""
    idx, e, r, counts, gpn, cuts = case
    in_rank, pair_tokens, pair_copies, node_tokens = _dense_ep_layout(idx, e, r, counts, gpn)
    offsets = np.concatenate([[0], np.cumsum(counts)])
    blocks = [(a, b, idx[offsets[a] : offsets[b]]) for a, b in itertools.pairwise(cuts)]
    whole = ep_layout(idx, e, r, counts, gpn)
    for lay in (whole, ep_layout_blocks(blocks, e, r, counts, gpn)):
        np.testing.assert_array_equal(lay.pair_tokens, pair_tokens)
        np.testing.assert_array_equal(lay.pair_copies, pair_copies)
        np.testing.assert_array_equal(lay.layout.num_tokens_per_rank, in_rank.sum(axis=0))
        if gpn is None:
            assert lay.node_tokens is None
        else:
            np.testing.assert_array_equal(lay.node_tokens, node_tokens)
            np.testing.assert_array_equal(lay.layout.num_tokens_per_rdma_rank, node_tokens.sum(0))
    np.testing.assert_array_equal(whole.layout.is_token_in_rank, in_rank)
    for d in range(r):
        np.testing.assert_array_equal(whole.layout.tokens_in_rank(d), np.flatnonzero(in_rank[:, d]))
    one = get_dispatch_layout(idx, e, r, gpn)
    np.testing.assert_array_equal(one.is_token_in_rank, in_rank)


def test_layout_blocks_must_cover_the_ranks_in_order():
    idx = _routing(8, 8, 2, seed=5)
    with pytest.raises(ValueError, match="blocks must follow each other from rank 0"):
        ep_layout_blocks([(1, 2, idx[4:])], 8, 2, 4)
    with pytest.raises(ValueError, match=r"cover ranks 0\.\.0; expected 0\.\.1"):
        ep_layout_blocks([(0, 1, idx[:4])], 8, 2, 4)
    lay = ep_layout_blocks([(0, 2, idx)], 8, 2, 4)
    with pytest.raises(ValueError, match="keeps only counts"):
        lay.layout.tokens_in_rank(0)


def test_10240_rank_layout_counts_every_routed_copy():
    """A 10,240-rank layer (2 tokens per rank, top-8 over one expert per rank, some slots masked):
    per-pair copies sum to the unmasked (token, expert) slots, per-pair tokens to each token's
    distinct ranks, each source row to that rank's own slots, with no tokens x ranks array."""
    r, tpr, k = 10240, 2, 8
    rng = np.random.default_rng(7)
    spread = np.arange(k) * (r // k)  # k distinct ranks per token, at a random rotation
    idx = (rng.integers(0, r, size=(r * tpr, 1)) + spread) % r
    idx[rng.random(idx.shape) < 0.05] = -1
    idx[0, :2] = idx[0, 2]  # a token whose experts share a rank counts once in pair_tokens
    lay = ep_layout(idx, r, r, tpr, 8)
    valid = idx >= 0
    assert lay.pair_copies.sum() == valid.sum()
    distinct = sum(len(set(row[row >= 0].tolist())) for row in idx)
    assert lay.pair_tokens.sum() == distinct < valid.sum()
    np.testing.assert_array_equal(lay.pair_copies.sum(axis=1), valid.reshape(r, -1).sum(axis=1))
    assert lay.layout.token_ranks.shape == idx.shape
