"""Router gating: logits -> scores -> (group- or node-limited) top-k experts and weights.

The gate follows the published routers:

- ``softmax`` scoring (Mixtral, Qwen3): softmax over all experts, top-k, optionally renormalise
  the k weights (``norm_topk_prob``; for Mixtral this equals a softmax over the top-k logits);
- ``sigmoid`` scoring (DeepSeek-V3, Kimi K2): sigmoid per expert; an optional per-expert
  ``bias`` (DeepSeek's aux-loss-free balancing term) changes only which experts are chosen,
  the weights are the unbiased scores, renormalised and multiplied by ``scaling``
  (``routed_scaling_factor``).
- Limited routing (one mechanism, two uses): experts are partitioned into equal groups; a
  group's score is the sum of its best ``group_topn`` expert scores; each token keeps the best
  ``max_groups`` groups and takes its top-k inside them. DeepSeek-V3's group-limited routing uses
  8 contiguous groups of 32 experts, top-4 groups, top-2 sum; node-limited routing (the V3 paper:
  "at most M nodes, chosen by the sum of the highest K/M affinities on each node") uses the node
  of each expert as its group. ``group_topn`` defaults to max(1, k // max_groups), which is 2 for
  both DeepSeek-V3 cases.

Expert popularity models (``POPULARITY``) make the logits skewed. docs/physics.md: per-rank load is
far from uniform in production (TensorRT-LLM, DeepSeek-R1 on EP32: per-rank max/mean 2.56,
per-expert about 12, per-rank counts fit a log-normal); uniform random routing gives about 1.25.

- ``uniform``: i.i.d. standard normal logits, so top-k is a uniformly random k-subset;
  its imbalance is sampling noise only and it takes no target.
- ``zipf``: expert popularity proportional to 1 / i**s over a random order of the experts.
- ``lognormal``: popularity exp(sigma * z_e), z_e standard normal per expert.

For ``zipf``/``lognormal`` the shape (s or sigma) is calibrated by bisection so that the per-rank
load (token copies per rank, given the ranks of the experts) has the requested max/mean. The
expected per-expert counts N*K*p_e are capped at N (an expert is chosen at most once per token)
with the excess spread over the others, rounded to integers summing to N*K, and an assignment
with exactly these counts and k distinct experts per token is built; the logits put the assigned
experts above all others (margin 0.5 over the token's noise range), so an unlimited top-k gate
reproduces the target exactly up to integer rounding. Limited routing can then move load (the
group limit overrides some choices): the realised figure is reported, not forced.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from podsim.fabric.registry import Registry

__all__ = [
    "POPULARITY",
    "Routing",
    "calibrate_counts",
    "expert_groups",
    "gate",
    "max_mean",
    "popularity_logits",
    "popularity_topk",
    "replay_routing",
    "sample_topk",
    "scores_from_logits",
]

SCORINGS = ("softmax", "sigmoid")
_CHUNK_TOKENS = 16384


@dataclass(frozen=True, eq=False)
class Routing:
    """Top-k routing of N tokens: logical expert ids (-1 = masked slot) and gate weights."""

    topk_idx: np.ndarray
    topk_weights: np.ndarray
    num_experts: int

    def __post_init__(self) -> None:
        idx = np.asarray(self.topk_idx)
        if idx.ndim != 2 or not np.issubdtype(idx.dtype, np.integer):
            raise ValueError(
                f"topk_idx must be an integer [tokens, k] array; got {idx.dtype} {idx.shape}"
            )
        w = np.asarray(self.topk_weights, dtype=np.float32)
        if w.shape != idx.shape:
            raise ValueError(f"topk_weights shape {w.shape} != topk_idx shape {idx.shape}")
        if idx.size and (idx.min() < -1 or idx.max() >= self.num_experts):
            bad = idx[(idx < -1) | (idx >= self.num_experts)][0]
            raise ValueError(
                f"expert id {bad} out of range; expected -1 or 0..{self.num_experts - 1}"
            )
        if idx.shape[1] > 1 and idx.size:
            s = np.sort(idx, axis=1)
            dup = (s[:, 1:] == s[:, :-1]) & (s[:, 1:] >= 0)
            if dup.any():
                t = int(np.flatnonzero(dup.any(axis=1))[0])
                raise ValueError(f"token {t} is routed twice to one expert: {idx[t].tolist()}")
        if not np.isfinite(w).all():
            raise ValueError("topk_weights contain NaN or infinity")
        object.__setattr__(self, "topk_idx", idx.astype(np.int64, copy=False))
        object.__setattr__(self, "topk_weights", w)

    @property
    def num_tokens(self) -> int:
        return int(self.topk_idx.shape[0])

    @property
    def top_k(self) -> int:
        return int(self.topk_idx.shape[1])

    def expert_counts(self) -> np.ndarray:
        """Token copies per logical expert."""
        return np.bincount(self.topk_idx[self.topk_idx >= 0], minlength=self.num_experts)


def max_mean(load: np.ndarray) -> float:
    """max / mean of a load vector (1.0 for an all-zero vector)."""
    load = np.asarray(load, dtype=np.float64)
    mean = load.mean()
    return float(load.max() / mean) if mean > 0 else 1.0


def scores_from_logits(logits: np.ndarray, scoring: str) -> np.ndarray:
    """Router scores (float32): softmax over experts, or an element-wise sigmoid."""
    logits = np.asarray(logits, dtype=np.float32)
    if scoring == "softmax":
        e = np.exp(logits - logits.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)
    if scoring == "sigmoid":
        return 1.0 / (1.0 + np.exp(-logits))
    raise ValueError(f"unknown scoring {scoring!r}; expected one of {', '.join(SCORINGS)}")


def expert_groups(num_experts: int, n_groups: int) -> np.ndarray:
    """Group id of each expert for ``n_groups`` contiguous equal groups (DeepSeek's groups)."""
    if n_groups <= 0 or num_experts % n_groups:
        raise ValueError(f"n_groups={n_groups} must divide num_experts={num_experts}")
    return np.arange(num_experts) // (num_experts // n_groups)


def gate(
    logits: np.ndarray,
    top_k: int,
    *,
    scoring: str = "softmax",
    bias: np.ndarray | None = None,
    groups: np.ndarray | None = None,
    max_groups: int | None = None,
    group_topn: int | None = None,
    norm_topk_prob: bool = True,
    scaling: float = 1.0,
) -> Routing:
    """Top-k routing from router logits [N, E] (see the module docstring for the rules).

    ``groups`` (a group id per expert, equal-sized groups) with ``max_groups`` limits every token
    to that many groups (DeepSeek group-limited routing, or node-limited routing when the groups
    are the experts' nodes). Experts come out sorted by descending selection score.
    """
    logits = np.asarray(logits, dtype=np.float32)
    if logits.ndim != 2:
        raise ValueError(f"logits must be [tokens, experts]; got shape {logits.shape}")
    n, e = logits.shape
    if not 1 <= top_k <= e:
        raise ValueError(f"top_k={top_k} must be in 1..{e} (the number of experts)")
    if scoring not in SCORINGS:
        raise ValueError(f"unknown scoring {scoring!r}; expected one of {', '.join(SCORINGS)}")
    limit = _group_limit(e, top_k, groups, max_groups, group_topn)
    if bias is not None:
        bias = np.asarray(bias, dtype=np.float32)
        if bias.shape != (e,):
            raise ValueError(f"bias must have one value per expert ({e}); got shape {bias.shape}")
    idx = np.empty((n, top_k), dtype=np.int64)
    w = np.empty((n, top_k), dtype=np.float32)
    for s in range(0, n, _CHUNK_TOKENS):  # chunks of tokens bound the temporaries' memory
        sl = slice(s, min(n, s + _CHUNK_TOKENS))
        idx[sl], w[sl] = _gate_chunk(logits[sl], top_k, scoring, bias, limit)
    if norm_topk_prob:
        w /= w.sum(axis=1, keepdims=True) + np.float32(1e-20)
    if scaling != 1.0:
        w *= np.float32(scaling)
    return Routing(idx, w, e)


def _group_limit(
    e: int, top_k: int, groups: np.ndarray | None, max_groups: int | None, group_topn: int | None
) -> tuple[np.ndarray, np.ndarray, int, int] | None:
    if groups is None:
        if max_groups is not None:
            raise ValueError("max_groups needs groups (a group id per expert)")
        return None
    groups = np.asarray(groups)
    if groups.shape != (e,):
        raise ValueError(f"groups must have one id per expert ({e}); got shape {groups.shape}")
    labels, ginv, sizes = np.unique(groups, return_inverse=True, return_counts=True)
    if (sizes != sizes[0]).any():
        raise ValueError(
            f"limited routing needs equal-sized groups; got sizes {sorted(set(sizes.tolist()))}"
        )
    n_groups, size = len(labels), int(sizes[0])
    if max_groups is None or max_groups >= n_groups:
        return None
    if max_groups <= 0 or max_groups * size < top_k:
        raise ValueError(
            f"max_groups={max_groups} must be >= 1 and leave >= top_k={top_k} experts "
            f"({size} per group)"
        )
    topn = group_topn if group_topn is not None else max(1, top_k // max_groups)
    if not 1 <= topn <= size:
        raise ValueError(f"group_topn={topn} must be in 1..{size} (experts per group)")
    order = np.argsort(ginv, kind="stable")
    return order, ginv.astype(np.int64), max_groups, topn


def _gate_chunk(
    logits: np.ndarray,
    top_k: int,
    scoring: str,
    bias: np.ndarray | None,
    limit: tuple[np.ndarray, np.ndarray, int, int] | None,
) -> tuple[np.ndarray, np.ndarray]:
    scores = scores_from_logits(logits, scoring)
    choice = scores if bias is None else scores + bias
    if limit is not None:
        order, ginv, max_groups, topn = limit
        n, e = choice.shape
        size = e // (int(ginv.max()) + 1)
        grouped = choice[:, order].reshape(n, -1, size)
        gscore = np.partition(grouped, size - topn, axis=2)[:, :, size - topn :].sum(axis=2)
        keep = np.argpartition(-gscore, max_groups - 1, axis=1)[:, :max_groups]
        allowed = np.zeros(gscore.shape, dtype=bool)
        np.put_along_axis(allowed, keep, True, axis=1)
        choice = np.where(allowed[:, ginv], choice, -np.inf)
    part = np.argpartition(-choice, top_k - 1, axis=1)[:, :top_k]
    vals = np.take_along_axis(choice, part, axis=1)
    idx = np.take_along_axis(part, np.argsort(-vals, axis=1, kind="stable"), axis=1)
    return idx, np.take_along_axis(scores, idx, axis=1)


def replay_routing(
    topk_idx: np.ndarray, num_experts: int, topk_weights: np.ndarray | None = None
) -> Routing:
    """A recorded routing (expert ids per token, -1 = masked). Without recorded weights every
    valid slot weighs 1 / (number of valid slots of its token)."""
    idx = np.asarray(topk_idx)
    if idx.ndim == 1:
        idx = idx[:, None]
    if topk_weights is None:
        valid = idx >= 0
        per = np.maximum(valid.sum(axis=1, keepdims=True), 1)
        topk_weights = np.where(valid, 1.0 / per, 0.0)
    return Routing(idx, topk_weights, num_experts)


# ---------------------------------------------------------------- expert popularity models

POPULARITY: Registry[Callable[[int, float, np.random.Generator], np.ndarray]] = Registry(
    "expert popularity model"
)


@POPULARITY.register("uniform", "i.i.d. logits: uniformly random top-k (sampling noise only)")
def _uniform(num_experts: int, shape: float, rng: np.random.Generator) -> np.ndarray:
    return np.full(num_experts, 1.0 / num_experts)


@POPULARITY.register("zipf", "popularity 1/i**s over a random expert order; s from the target")
def _zipf(num_experts: int, shape: float, rng: np.random.Generator) -> np.ndarray:
    rank = rng.permutation(num_experts) + 1.0
    p = rank**-shape
    return p / p.sum()


@POPULARITY.register("lognormal", "popularity exp(sigma*z) per expert; sigma from the target")
def _lognormal(num_experts: int, shape: float, rng: np.random.Generator) -> np.ndarray:
    z = rng.standard_normal(num_experts)
    p = np.exp(shape * (z - z.max()))
    return p / p.sum()


def _capped_counts(p: np.ndarray, total: int, cap: int) -> np.ndarray:
    """Expected counts total*p with each capped at ``cap``; excess spread proportionally."""
    c = total * p
    capped = np.zeros(p.shape, dtype=bool)
    for _ in range(p.size):  # at most one new capped expert set per pass; usually 1-3 passes
        over = (c > cap) & ~capped
        if not over.any():
            break
        capped |= over
        free = ~capped
        c = np.where(capped, float(cap), 0.0)
        if free.any():
            c[free] = (total - cap * capped.sum()) * p[free] / p[free].sum()
    return c


def _round_counts(c: np.ndarray, total: int, cap: int) -> np.ndarray:
    counts = np.minimum(np.floor(c + 1e-9).astype(np.int64), cap)
    short = total - int(counts.sum())
    frac = np.where(counts < cap, c - counts, -np.inf)
    counts[np.argsort(-frac, kind="stable")[:short]] += 1
    return counts


def _rank_load(counts: np.ndarray, rank_of_expert: np.ndarray | None) -> np.ndarray:
    if rank_of_expert is None:
        return counts
    return np.bincount(rank_of_expert, weights=counts)


def calibrate_counts(
    num_tokens: int,
    num_experts: int,
    top_k: int,
    popularity: str,
    *,
    target_max_mean: float | None = None,
    shape: float | None = None,
    rank_of_expert: np.ndarray | None = None,
    rng: np.random.Generator,
) -> tuple[np.ndarray, float]:
    """Integer token copies per expert (sum N*K, each <= N) and the shape parameter used.

    Give either ``shape`` (s or sigma) or ``target_max_mean`` (per-rank load max/mean, ranks from
    ``rank_of_expert``; per expert when None). Bisection over the shape with the model's random
    draws held fixed; an unreachable target raises ValueError with the reachable maximum.
    """
    model = POPULARITY.get(popularity)
    total, cap = num_tokens * top_k, num_tokens
    if (target_max_mean is None) == (shape is None):
        raise ValueError(f"popularity {popularity!r}: give exactly one of target_max_mean or shape")
    state = rng.bit_generator.state

    def counts_for(s: float) -> np.ndarray:
        rng.bit_generator.state = state  # same expert order / z for every trial shape
        return _capped_counts(model(num_experts, s, rng), total, cap)

    if shape is None:
        target = float(target_max_mean)
        if target < 1.0:
            raise ValueError(f"target_max_mean={target} must be >= 1 (max >= mean)")

        def f(s: float) -> float:
            return max_mean(_rank_load(counts_for(s), rank_of_expert))

        lo, hi = 0.0, 1.0
        while f(hi) < target:
            lo, hi = hi, hi * 2
            if hi > 64:
                raise ValueError(
                    f"{popularity}: per-rank max/mean {target} is unreachable with {num_tokens} "
                    f"tokens, top-{top_k} of {num_experts} experts (max about {f(hi):.3g})"
                )
        for _ in range(60):
            mid = 0.5 * (lo + hi)
            lo, hi = (mid, hi) if f(mid) < target else (lo, mid)
        shape = hi
    c = counts_for(float(shape))
    return _round_counts(c, total, cap), float(shape)


def _assignment(
    counts: np.ndarray, num_tokens: int, top_k: int, rng: np.random.Generator
) -> np.ndarray:
    """[N, K] expert ids with expert e used exactly counts[e] times, k distinct per token.

    The experts' runs (a random expert order) fill K columns of N; each column goes to a random
    permutation of the tokens. A run is at most N long so it spans at most two columns; where it
    does, the next column starts with tokens that the run's first part did not use.
    """
    n = num_tokens
    seq = np.repeat(order := rng.permutation(counts.size), counts[order]).reshape(top_k, n)
    assign = np.empty((n, top_k), dtype=np.int64)
    sigma = rng.permutation(n)
    for j in range(top_k):  # one pass per top-k column, not per token
        if j:
            prev = seq[j - 1]
            tail = n - np.searchsorted(prev[::-1] != prev[-1], True)  # start of prev's last run
            if seq[j, 0] == prev[-1]:
                used = np.zeros(n, dtype=bool)
                used[sigma[tail:]] = True
                sigma = np.concatenate(
                    [rng.permutation(np.flatnonzero(~used)), rng.permutation(np.flatnonzero(used))]
                )
            else:
                sigma = rng.permutation(n)
        assign[sigma, j] = seq[j]
    return assign


def popularity_logits(
    num_tokens: int,
    num_experts: int,
    top_k: int,
    popularity: str = "uniform",
    *,
    target_max_mean: float | None = None,
    shape: float | None = None,
    rank_of_expert: np.ndarray | None = None,
    rng: np.random.Generator,
    expert_rng: np.random.Generator | None = None,
) -> np.ndarray:
    """Router logits [N, E] (float32) whose top-k follows the popularity model (module doc).

    ``expert_rng`` draws the model's per-expert randomness (which experts are hot; default
    ``rng``): pass the same seed across steps to keep a layer's hot experts fixed while ``rng``
    draws fresh tokens.
    """
    POPULARITY.get(popularity)
    noise = rng.standard_normal((num_tokens, num_experts), dtype=np.float32)
    if popularity == "uniform":
        _no_uniform_shape(target_max_mean, shape)
        return noise
    assign = popularity_topk(
        num_tokens,
        num_experts,
        top_k,
        popularity,
        target_max_mean=target_max_mean,
        shape=shape,
        rank_of_expert=rank_of_expert,
        rng=rng,
        expert_rng=expert_rng,
    )
    lift = noise.max(axis=1) - noise.min(axis=1) + np.float32(0.5)
    np.put_along_axis(noise, assign, np.take_along_axis(noise, assign, 1) + lift[:, None], 1)
    return noise


# ------------------------------------------------------------ routing without router logits


def _no_uniform_shape(target_max_mean: float | None, shape: float | None) -> None:
    if target_max_mean is not None or shape is not None:
        raise ValueError(
            "popularity 'uniform' takes no target_max_mean or shape; use 'zipf' or 'lognormal'"
        )


def popularity_topk(
    num_tokens: int,
    num_experts: int,
    top_k: int,
    popularity: str,
    *,
    target_max_mean: float | None = None,
    shape: float | None = None,
    rank_of_expert: np.ndarray | None = None,
    rng: np.random.Generator,
    expert_rng: np.random.Generator | None = None,
) -> np.ndarray:
    """[N, K] expert ids whose per-expert counts follow the popularity model, drawn without the
    [N, E] router logits: exactly the experts an unlimited top-k gate picks from
    :func:`popularity_logits` given the same generators after its noise draw (that function
    lifts these experts above all others). ``uniform`` popularity: :func:`sample_topk` (the
    same distribution as the gate on i.i.d. logits). No group or node limit applies."""
    POPULARITY.get(popularity)
    if popularity == "uniform":
        _no_uniform_shape(target_max_mean, shape)
        return sample_topk(num_tokens, num_experts, top_k, rng)
    counts, _ = calibrate_counts(
        num_tokens,
        num_experts,
        top_k,
        popularity,
        target_max_mean=target_max_mean,
        shape=shape,
        rank_of_expert=rank_of_expert,
        rng=expert_rng or rng,
    )
    return _assignment(counts, num_tokens, top_k, rng)


def sample_topk(
    num_tokens: int, num_experts: int, top_k: int, rng: np.random.Generator
) -> np.ndarray:
    """[N, K] expert ids: k distinct experts per token, uniformly at random (int64).

    The same distribution as :func:`gate` on i.i.d. logits without a group limit (top-k of
    exchangeable scores is a uniformly random k-subset), drawn without the [N, E] logits, whose
    cost grows with the experts: ids are drawn i.i.d. and the tokens that drew an expert twice
    draw again (a token keeps its row only once all k differ, so every k-subset stays equally
    likely). For routing at scale (benchmarks/bench_scale.py); ``podsim run`` uses :func:`gate`.
    """
    if not 1 <= top_k <= num_experts:
        raise ValueError(f"top_k={top_k} must be in 1..{num_experts} (the number of experts)")
    if num_tokens < 0:
        raise ValueError(f"num_tokens must be >= 0; got {num_tokens}")
    if 2 * top_k * top_k > num_experts:  # repeats likely: rank random keys instead (small E)
        return np.argsort(rng.random((num_tokens, num_experts)), axis=1)[:, :top_k]
    out = np.empty((num_tokens, top_k), dtype=np.int64)
    todo = np.arange(num_tokens)
    while todo.size:  # rounds shrink geometrically: P(repeat) <= k^2 / 2E <= 1/4 per token
        draw = rng.integers(0, num_experts, size=(todo.size, top_k))
        s = np.sort(draw, axis=1)
        bad = (s[:, 1:] == s[:, :-1]).any(axis=1)
        out[todo[~bad]] = draw[~bad]
        todo = todo[bad]
    return out
