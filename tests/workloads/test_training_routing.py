"""Sampled EP routing of the training step: counts from the dispatch layout, bytes conserved,
skew, determinism, the two-hop all-to-all of a bytes matrix, errors naming their key."""

from __future__ import annotations

import numpy as np
import pytest
from podsim.workloads.collectives import Collective, build_collective, two_hop_matrices
from podsim.workloads.dispatch import get_mode
from podsim.workloads.gating import gate, max_mean, popularity_logits, popularity_topk
from podsim.workloads.graph import OpGraph
from podsim.workloads.layout import token_ranks
from podsim.workloads.models import get_model
from podsim.workloads.placement import base_rank_of_expert
from podsim.workloads.precision import bytes_per_token
from podsim.workloads.training.routing import group_layout, pair_counts
from podsim.workloads.training.step import TrainingError, TrainingSpec, build_training_step

KIMI = get_model("kimi-k2")
BASE = dict(model="kimi-k2", gpus=16, pp=1, ep=16, microbatches=2, layers=1, seq_len=256,
            gpus_per_node=8)  # fmt: skip


def sampled(**kw) -> TrainingSpec:
    return TrainingSpec(**{**BASE, "routing": "sampled", **kw})


def phase_bytes(spec: TrainingSpec, phase: str) -> np.ndarray:
    """Bytes of ``phase`` messages per (src, dst) rank over the step (one MoE layer)."""
    g = build_training_step(spec)
    m = g.messages(spec.gpus)
    m = m[m["phase"] == phase]
    out = np.zeros((spec.gpus, spec.gpus), dtype=np.int64)
    np.add.at(out, (m["src_rank"].to_numpy(), m["dst_rank"].to_numpy()), m["bytes"].to_numpy())
    return out


def test_popularity_topk_is_what_the_unlimited_gate_picks_from_the_popularity_logits() -> None:
    """The logit-free draw picks exactly the experts the gate takes from popularity_logits
    (same generators after its noise draw), so sampled training routing follows the moe
    workload's popularity model without the tokens x experts logits."""
    n, e, k = 2048, 64, 4
    roe = base_rank_of_expert(e, 8)
    kw = dict(target_max_mean=2.0, rank_of_expert=roe)
    logits = popularity_logits(n, e, k, "lognormal", **kw, rng=np.random.default_rng(5))
    chosen = np.sort(gate(logits, k, scoring="sigmoid").topk_idx, axis=1)
    rng = np.random.default_rng(5)
    rng.standard_normal((n, e), dtype=np.float32)  # popularity_logits' noise
    direct = popularity_topk(n, e, k, "lognormal", **kw, rng=rng)
    np.testing.assert_array_equal(np.sort(direct, axis=1), chosen)


@pytest.mark.parametrize("mode", ["deepep-normal", "megatron-alltoall", "deepep-low-latency"])
def test_pair_counts_conserve_the_modes_copies(mode: str) -> None:
    """Sum over (src, dst) = tokens x copies per token: the distinct ranks of each token with
    per-rank dedup (counted from the routing itself), else top-k."""
    ep, tpr = 16, 512
    lay = group_layout(KIMI, ep, tpr, skew="lognormal", target_max_mean=2.0, seed=3, layer=1)
    counts = pair_counts(lay, get_mode(mode))
    if get_mode(mode).dedup:
        idx = popularity_topk(ep * tpr, KIMI.routed_experts, KIMI.top_k, "lognormal",
                              target_max_mean=2.0,
                              rank_of_expert=base_rank_of_expert(KIMI.routed_experts, ep),
                              rng=np.random.default_rng([3, 1, 0]),
                              expert_rng=np.random.default_rng([3, 1]))  # fmt: skip
        copies = int((token_ranks(idx, KIMI.routed_experts // ep, ep) >= 0).sum())
        assert ep * tpr < copies < ep * tpr * KIMI.top_k
    else:
        copies = ep * tpr * KIMI.top_k
    assert counts.sum() == copies
    assert (counts.sum(axis=1) >= tpr).all()  # every token goes somewhere (its own rank too)


@pytest.mark.parametrize("mode", ["deepep-normal", "megatron-alltoall"])
def test_the_steps_sampled_all_to_all_sends_the_layout_counts_times_bytes_per_token(
    mode: str,
) -> None:
    """Forward dispatch: pair (i, j) carries count[i, j] x FP8 bytes per token and the
    combine the transposed counts in BF16; the backward mirrors both in BF16 (the gradient of
    the combine toward the experts, of the dispatch back); a rank's own share stays off the
    fabric. One scale-up domain per rank, so the exchange is direct."""
    spec = sampled(dispatch_mode=mode, seed=7, gpus_per_node=None)
    m = get_mode(mode)
    counts = pair_counts(group_layout(KIMI, 16, 256, seed=7, layer=0), m)
    fp8 = bytes_per_token("fp8", KIMI.hidden, m.header_bytes)
    bf16 = bytes_per_token("bf16", KIMI.hidden)
    off = ~np.eye(16, dtype=bool)
    mb = spec.microbatches
    disp = np.where(off, counts * fp8 + counts.T * bf16, 0)
    comb = np.where(off, counts.T * bf16 + counts * bf16, 0)
    np.testing.assert_array_equal(phase_bytes(spec, "dispatch"), mb * disp)
    np.testing.assert_array_equal(phase_bytes(spec, "combine"), mb * comb)


def test_uniform_routing_is_the_default_and_unchanged_by_the_new_keys() -> None:
    """routing uniform ignores seed: the same messages whatever the seed, every pair the
    same expected count (direct exchange: one size per pass, FP8 forward and BF16 backward)."""
    base = {**BASE, "gpus_per_node": None}
    a = build_training_step(TrainingSpec(**base)).messages(16)
    b = build_training_step(TrainingSpec(**base, seed=9)).messages(16)
    assert a.equals(b)
    assert a[a["phase"] == "dispatch"]["bytes"].nunique() == 2


def test_skewed_sampled_routing_loads_the_hottest_rank_more_than_uniform() -> None:
    """Receive load per rank in the dispatch phase (megatron-alltoall: one copy per (token,
    expert)): the expected counts are flat; uniform sampling adds noise; a lognormal popularity
    calibrated to per-rank max/mean 2 (docs/physics.md: production 2.56) makes the hottest rank
    receive 2x the mean in the forward dispatch. The phase also holds the backward's dispatch
    gradient, which every rank sends back in equal shares (row sums: tokens x k each), so the
    phase's max/mean is (2 FP8 + BF16) / (FP8 + BF16) bytes per token at the target."""
    loads = {}
    for name, kw in {
        "uniform": {"routing": "uniform"},
        "sampled": {},
        "skewed": {"skew": "lognormal", "skew_max_mean": 2.0},
    }.items():
        spec = sampled(dispatch_mode="megatron-alltoall", **kw)
        recv = phase_bytes(spec, "dispatch").sum(axis=0)
        loads[name] = max_mean(recv)
    fp8, bf16 = bytes_per_token("fp8", KIMI.hidden), bytes_per_token("bf16", KIMI.hidden)
    assert loads["uniform"] == pytest.approx(1.0, abs=1e-3)
    assert 1.0 < loads["sampled"] < 1.1
    # the own rank's share stays off the fabric: a little below the target
    assert loads["skewed"] == pytest.approx((2 * fp8 + bf16) / (fp8 + bf16), rel=0.05)


def test_sampled_routing_is_deterministic_in_the_seed() -> None:
    kw = {"skew": "zipf", "skew_shape": 1.0}
    a = build_training_step(sampled(seed=4, **kw)).messages(16)
    b = build_training_step(sampled(seed=4, **kw)).messages(16)
    c = build_training_step(sampled(seed=5, **kw)).messages(16)
    assert a.equals(b)
    assert not a["bytes"].equals(c["bytes"])


def test_pipelined_all_to_all_of_a_uniform_matrix_sends_the_uniform_paths_messages() -> None:
    n, ls, s = 16, 4, 3 << 20
    for algo in ("pipelined", "hierarchical"):
        uni, mat = OpGraph(), OpGraph()
        build_collective(uni, Collective("all-to-all", list(range(n)), s, algo, local_size=ls))
        m = np.full((n, n), s // n, dtype=np.int64)
        c = Collective("all-to-all", list(range(n)), 0, algo, local_size=ls, matrix=m)
        build_collective(mat, c)
        assert mat.messages(n).equals(uni.messages(n))
        assert len(mat) == len(uni)


def test_two_hop_matrices_route_every_off_diagonal_byte_over_its_group_then_its_rail() -> None:
    """Rank (g, l) -> (g', l'): first hop to (g, l') inside the group, second along rail l'
    to (g', l'); a byte that needs no hop stays (the diagonals). Checked against a loop."""
    rng = np.random.default_rng(0)
    ng, ls = 3, 4
    n = ng * ls
    m = rng.integers(0, 100, size=(n, n))
    first, second = two_hop_matrices(m, ls)
    f = np.zeros((ng, ls, ls), dtype=np.int64)
    s = np.zeros((ls, ng, ng), dtype=np.int64)
    for i in range(n):
        for j in range(n):
            g, l_ = divmod(i, ls)
            g2, l2 = divmod(j, ls)
            f[g, l_, l2] += m[i, j]
            s[l2, g, g2] += m[i, j]
    np.testing.assert_array_equal(first, f)
    np.testing.assert_array_equal(second, s)
    assert first.sum() == second.sum() == m.sum()


def test_a_matrix_on_another_collective_is_refused() -> None:
    from podsim.workloads.graph import GraphError

    with pytest.raises(GraphError, match="all-to-all only"):
        build_collective(OpGraph(), Collective("all-reduce", [0, 1], 8, matrix=np.ones((2, 2))))


@pytest.mark.parametrize(
    ("kw", "key"),
    [
        ({"routing": "skewed"}, "routing"),
        ({"routing": "uniform", "skew": "zipf", "skew_shape": 1.0}, "skew.kind"),
        ({"skew": "pareto"}, "skew.kind"),
        ({"skew": "lognormal", "skew_max_mean": 40.0}, "skew.max_mean"),
        ({"seq_len": 255, "tp": 2, "gpus": 32}, "seq_len"),
    ],
)
def test_bad_routing_settings_name_their_key(kw: dict, key: str) -> None:
    with pytest.raises(TrainingError) as err:
        build_training_step(sampled(**kw))
    assert err.value.key == key
