from __future__ import annotations

import numpy as np
import pytest
from podsim.workloads.combine import combine, expert_forward
from podsim.workloads.dispatch import MODES, dispatch
from podsim.workloads.gating import gate, popularity_logits
from podsim.workloads.layout import get_dispatch_layout
from podsim.workloads.precision import (
    FP8_BLOCK,
    bf16_bits_to_f32,
    bytes_per_token,
    f32_to_bf16_bits,
    quantize,
)

N, H, E, R, K = 384, 512, 32, 8, 4


@pytest.fixture(scope="module")
def case():
    rng = np.random.default_rng(0)
    r = gate(popularity_logits(N, E, K, "uniform", rng=rng), K, scoring="sigmoid")
    assert np.allclose(r.topk_weights.sum(1), 1.0, atol=1e-6)  # normalised, scaling 1
    x = rng.standard_normal((N, H)).astype(np.float32) * rng.uniform(0.1, 10, (N, 1)).astype(
        np.float32
    )
    return r, x


@pytest.mark.parametrize("mode", MODES.names())
@pytest.mark.parametrize("dtype", ["fp8", "bf16"])
def test_identity_experts_round_trip(case, mode, dtype):
    """Dispatch -> identity experts -> combine with weights summing to 1 returns the input."""
    r, x = case
    q = quantize(x, dtype)
    recv, h = dispatch(q, r.topk_idx, r.topk_weights, E, R, mode)
    y = bf16_bits_to_f32(combine(expert_forward(recv, h), h))
    bf16_half_ulp = 2.0**-8  # relative; each BF16 rounding on the way adds at most this
    roundings = 3 if MODES.get(mode).dedup else 2  # input/partials, (partial sums), output
    if dtype == "fp8":
        scale = np.repeat(q.scales, FP8_BLOCK, axis=1)
        fp8_err = np.maximum(np.abs(x) * 2.0**-4, scale * 2.0**-10)
        bound = fp8_err + (np.abs(x) + fp8_err) * roundings * bf16_half_ulp
    else:
        bound = np.abs(x) * roundings * bf16_half_ulp
    assert np.all(np.abs(y - x) <= bound * (1 + 1e-5))
    if dtype == "bf16" and not MODES.get(mode).dedup:
        np.testing.assert_array_equal(y, bf16_bits_to_f32(q.data))  # exact: x * sum(w) == x


@pytest.mark.parametrize("mode", MODES.names())
def test_receive_buffers_hold_the_routed_tokens(case, mode):
    r, x = case
    q = quantize(x, "fp8")
    recv, h = dispatch(q, r.topk_idx, r.topk_weights, E, R, mode)
    np.testing.assert_array_equal(recv.data, q.data[h.row_token])
    np.testing.assert_array_equal(recv.scales, q.scales[h.row_token])
    lay = get_dispatch_layout(r.topk_idx, E, R)
    rows_per_rank = np.diff(h.rank_offsets)
    if MODES.get(mode).dedup:
        np.testing.assert_array_equal(rows_per_rank, lay.num_tokens_per_rank)
        for d in range(R):  # each rank gets exactly its tokens, in source order
            got = h.row_token[h.rank_offsets[d] : h.rank_offsets[d + 1]]
            np.testing.assert_array_equal(got, np.flatnonzero(lay.is_token_in_rank[:, d]))
        local = h.recv_topk_idx
        assert ((local >= -1) & (local < E // R)).all()
        assert (local >= 0).sum() == N * K
    else:
        np.testing.assert_array_equal(
            rows_per_rank, lay.num_tokens_per_expert.reshape(R, -1).sum(1)
        )
        assert (np.diff(h.row_expert) >= 0).all()  # grouped per expert for the grouped GEMM
        np.testing.assert_array_equal(
            np.bincount(h.row_expert, minlength=E), lay.num_tokens_per_expert
        )
    assert recv.nbytes == h.num_rows * bytes_per_token("fp8", H)


@pytest.mark.parametrize("mode", MODES.names())
def test_combine_applies_weights_to_real_experts(case, mode):
    """Expert e multiplies by (e + 1): combine must return sum_k w_k (e_k + 1) x."""
    r, x = case
    q = quantize(x, "bf16")
    recv, h = dispatch(q, r.topk_idx, r.topk_weights, E, R, mode)
    out = expert_forward(recv, h, lambda rows, ex: rows * (ex + 1.0)[:, None].astype(np.float32))
    y = bf16_bits_to_f32(combine(out, h))
    factor = (r.topk_weights * (r.topk_idx + 1)).sum(1)
    want = bf16_bits_to_f32(q.data) * factor[:, None]
    np.testing.assert_allclose(y, want, rtol=3 * 2.0**-8 * K, atol=1e-6)


def test_masked_slots_and_tokens_without_experts():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((6, 256)).astype(np.float32)
    idx = np.array([[0, 5], [-1, -1], [3, -1], [7, 1], [-1, 2], [6, 4]])
    w = np.where(idx >= 0, 0.5, 0.0).astype(np.float32)
    w[2, 0] = w[4, 1] = 1.0
    q = quantize(x, "bf16")
    for mode in MODES.names():
        recv, h = dispatch(q, idx, w, 8, 4, mode)
        y = bf16_bits_to_f32(combine(expert_forward(recv, h), h))
        np.testing.assert_array_equal(y[1], 0.0)
        keep = [0, 2, 3, 4, 5]
        np.testing.assert_allclose(y[keep], bf16_bits_to_f32(q.data)[keep], rtol=2.0**-7)


def test_preallocated_buffers_are_reused(case):
    r, x = case
    q = quantize(x, "fp8")
    recv, h = dispatch(q, r.topk_idx, r.topk_weights, E, R, "deepep-normal")
    recv2, _ = dispatch(q, r.topk_idx, r.topk_weights, E, R, "deepep-normal", out=recv)
    assert np.shares_memory(recv2.data, recv.data)
    out = np.empty((N, H), np.uint16)
    assert combine(expert_forward(recv, h), h, out=out) is out
    with pytest.raises(ValueError, match="cannot hold"):
        dispatch(q, r.topk_idx, r.topk_weights, E, R, "megatron-alltoall", out=recv)


def test_dispatch_input_errors(case):
    r, x = case
    q = quantize(x, "bf16")
    with pytest.raises(ValueError, match="topk_idx must be"):
        dispatch(q, r.topk_idx[:10], r.topk_weights[:10], E, R)
    with pytest.raises(ValueError, match="multiple of num_ranks"):
        dispatch(q, r.topk_idx, r.topk_weights, E, 5)
    _, h = dispatch(q, r.topk_idx, r.topk_weights, E, R)
    with pytest.raises(ValueError, match="BF16 codes"):
        combine(np.zeros((h.num_rows, H), np.float32), h)


@pytest.mark.parametrize("mode", MODES.names())
def test_combine_matches_a_float64_reference_across_blocks(mode):
    """At the benchmark's hidden size the kernel works in blocks of 2 tokens and rounding
    groups of 8; 21 tokens leave a partial block and group. Against sum_j w_j * row_j in
    float64, rounded to nearest even: apart by at most 1 BF16 ulp plus the float32
    accumulation error (k * 2**-24 of sum |w_j * row_j|, which matters under cancellation),
    and equal for almost all channels."""
    n, h, e, r, k = 21, 7168, 32, 8, 8
    rng = np.random.default_rng(11)
    rt = gate(popularity_logits(n, e, k, "uniform", rng=rng), k, scoring="sigmoid")
    x = quantize(rng.standard_normal((n, h)).astype(np.float32), "bf16")
    _, hd = dispatch(x, rt.topk_idx, rt.topk_weights, e, r, mode)
    rows = rng.standard_normal((hd.num_rows, h)).astype(np.float32)
    eo = f32_to_bf16_bits(rows)
    got = bf16_bits_to_f32(combine(eo, hd)).astype(np.float64)
    vals = bf16_bits_to_f32(eo).astype(np.float64)
    w64 = hd.combine_weight.astype(np.float64)
    want = np.einsum("tj,tjh->th", w64, vals[hd.combine_rows])
    mass = np.einsum("tj,tjh->th", np.abs(w64), np.abs(vals[hd.combine_rows]))
    want = bf16_bits_to_f32(f32_to_bf16_bits(want.astype(np.float32))).astype(np.float64)
    ulp = 2.0 ** (np.floor(np.log2(np.maximum(np.abs(want), 1e-30))) - 7)
    assert (np.abs(got - want) <= ulp + k * 2.0**-24 * mass).all()
    assert (got == want).mean() > 0.99


def test_combine_rounds_ties_to_even_in_both_bf16_lanes():
    """1 + 2**-8 lies halfway between BF16 neighbours 1 and 1 + 2**-7: it rounds to the even
    one (1); 1 + 3 * 2**-8 rounds up to the even 1 + 2**-6. Channels 0 and 1 are the two
    halves of a 32-bit word, which the kernel widens and rounds separately."""
    idx = np.array([[0, 1]])
    w = np.ones((1, 2), np.float32)
    x = quantize(np.zeros((1, 4), np.float32), "bf16")
    for mode in ("megatron-alltoall", "deepep-low-latency"):
        _, hd = dispatch(x, idx, w, 2, 2, mode)
        a = np.array([1.0, 1.0 + 2.0**-7, 1.0 + 2.0**-7, 1.0], np.float32)
        b = np.full(4, 2.0**-8, np.float32)
        eo = f32_to_bf16_bits(np.stack([a, b]))
        y = bf16_bits_to_f32(combine(eo, hd))[0]
        np.testing.assert_array_equal(y, [1.0, 1.0 + 2.0**-6, 1.0 + 2.0**-6, 1.0])


@pytest.mark.parametrize("mode", MODES.names())
def test_expert_forward_chunks_do_not_change_the_result(case, mode, monkeypatch):
    """expert_forward works in chunks of rows (memory bound); chunk edges change nothing."""
    import podsim.workloads.combine as wc

    r, x = case
    recv, h = dispatch(quantize(x, "fp8"), r.topk_idx, r.topk_weights, E, R, mode)

    def fn(rows, ex):
        return rows * (ex + 1.0)[:, None].astype(np.float32)

    whole, identity = expert_forward(recv, h, fn), expert_forward(recv, h)
    monkeypatch.setattr(wc, "_FORWARD_ROWS", 7)
    np.testing.assert_array_equal(expert_forward(recv, h, fn), whole)
    np.testing.assert_array_equal(expert_forward(recv, h), identity)


@pytest.mark.parametrize("experts", [16, 512, 70000])
def test_per_copy_order_is_by_expert_then_token_for_any_expert_count(experts):
    """The per-copy receive order uses a radix sort on 8/16-bit keys and a merge sort beyond;
    all must give rows grouped by expert, tokens ascending inside each expert."""
    rng = np.random.default_rng(experts)
    n, k, r = 300, 4, 4
    idx = np.stack([rng.choice(experts, k, replace=False) for _ in range(n)])
    idx[::7, 1] = -1  # some masked slots
    w = np.where(idx >= 0, 0.25, 0.0).astype(np.float32)
    x = quantize(np.zeros((n, 128), np.float32), "bf16")
    _, h = dispatch(x, idx, w, experts, r, "megatron-alltoall")
    key = h.row_expert * n + h.row_token
    assert (np.diff(key) > 0).all() and h.num_rows == (idx >= 0).sum()
    np.testing.assert_array_equal(h.row_token[h.combine_rows[idx >= 0]], np.nonzero(idx >= 0)[0])
