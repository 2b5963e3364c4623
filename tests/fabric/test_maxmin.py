from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from podsim.fabric.maxmin import CAP, UNCONSTRAINED, build_incidence, maxmin_pairs, maxmin_rates


def reference_maxmin(a: np.ndarray, cap: np.ndarray, caps: np.ndarray, w: np.ndarray):
    """Textbook progressive filling, one level per step, dense and slow (the oracle)."""
    n_flows = a.shape[1]
    rate = np.zeros(n_flows)
    active = np.ones(n_flows, dtype=bool)
    while active.any():
        slope = a[:, active] @ w[active]
        residual = cap - a @ rate
        with np.errstate(divide="ignore", invalid="ignore"):
            dt_link = np.where(slope > 0, residual / slope, np.inf)
        dt_cap = np.where(active, (caps - rate) / w, np.inf)
        dt = min(dt_link.min(initial=np.inf), dt_cap.min())
        if not np.isfinite(dt):
            rate[active] = np.inf
            break
        rate[active] += w[active] * dt
        full = dt_link <= dt * (1 + 1e-12) + 1e-300
        hit = active & (((a[full] > 0).any(axis=0)) | (dt_cap <= dt * (1 + 1e-12) + 1e-300))
        active &= ~hit
    return rate


def check_optimal(a, capacity, caps, w, res, rtol=1e-7):
    """Feasible, and every flow meets its cap or has a saturated bottleneck where it is maximal."""
    a = sp.csc_array(a)
    dense = a.toarray()
    r = res.rates
    load = dense @ np.where(np.isfinite(r), r, 0.0)
    assert np.all(load <= capacity * (1 + rtol) + 1e-9)
    assert np.all(r <= caps * (1 + rtol) + 1e-12)
    norm = r / w
    for f in range(a.shape[1]):
        b = res.bottleneck[f]
        if b == CAP:
            assert r[f] == pytest.approx(caps[f], rel=rtol, abs=1e-12)
        elif b == UNCONSTRAINED:
            assert np.isinf(r[f]) and np.isinf(caps[f])
        else:
            assert dense[b, f] > 0, "bottleneck must be a constraint the flow crosses"
            assert load[b] == pytest.approx(capacity[b], rel=rtol, abs=1e-9), "not saturated"
            on_b = dense[b] > 0
            assert norm[f] >= norm[on_b].max() * (1 - rtol) - 1e-12, "not maximal on bottleneck"


def test_single_bottleneck_exact_fair_share():
    n, c = 7, 400e9
    res = maxmin_rates(np.ones((1, n)), np.array([c]))
    assert np.all(res.rates == c / n)
    assert np.all(res.bottleneck == 0)
    assert res.link_load[0] == pytest.approx(c)
    assert res.iterations == 1


def test_parking_lot_equal_capacities():
    # Links 0..L-1 in a row; flow 0 crosses all, flow l+1 crosses link l only.
    n_links, c = 5, 100.0
    a = np.zeros((n_links, n_links + 1))
    a[:, 0] = 1
    a[np.arange(n_links), np.arange(1, n_links + 1)] = 1
    res = maxmin_rates(a, np.full(n_links, c))
    assert np.allclose(res.rates, c / 2)
    check_optimal(a, np.full(n_links, c), np.full(n_links + 1, np.inf), np.ones(n_links + 1), res)


def test_parking_lot_unequal_capacities_closed_form():
    cap = np.array([30.0, 10.0, 50.0, 20.0])
    n_links = cap.size
    a = np.zeros((n_links, n_links + 1))
    a[:, 0] = 1
    a[np.arange(n_links), np.arange(1, n_links + 1)] = 1
    res = maxmin_rates(a, cap)
    long_flow = cap.min() / 2  # the tightest link splits evenly, the others give the rest
    assert res.rates[0] == pytest.approx(long_flow)
    assert np.allclose(res.rates[1:], cap - long_flow)
    assert res.bottleneck[0] == int(np.argmin(cap))


def test_caps_release_capacity_to_the_others():
    c, n = 100.0, 4
    caps = np.array([10.0, np.inf, np.inf, np.inf])
    res = maxmin_rates(np.ones((1, n)), np.array([c]), caps=caps)
    assert res.rates[0] == 10.0 and res.bottleneck[0] == CAP
    assert np.allclose(res.rates[1:], (c - 10.0) / (n - 1))
    assert np.all(res.bottleneck[1:] == 0)


def test_cap_above_fair_share_is_not_binding():
    res = maxmin_rates(np.ones((1, 2)), np.array([100.0]), caps=[60.0, np.inf])
    assert np.allclose(res.rates, 50.0)
    assert np.all(res.bottleneck == 0)


def test_flows_with_zero_links():
    a = sp.csc_array(np.array([[1.0, 0.0, 0.0, 1.0]]))
    res = maxmin_rates(a, np.array([10.0]), caps=[np.inf, 3.0, np.inf, np.inf])
    assert res.rates[1] == 3.0 and res.bottleneck[1] == CAP
    assert np.isinf(res.rates[2]) and res.bottleneck[2] == UNCONSTRAINED
    assert res.rates[0] == res.rates[3] == 5.0


def test_weighted_shares_are_proportional():
    w = np.array([1.0, 2.0, 5.0])
    res = maxmin_rates(np.ones((1, 3)), np.array([80.0]), weights=w)
    assert np.allclose(res.rates, 80.0 * w / w.sum())


def test_multipath_fractions_closed_form():
    # S is split 50/50 over links 0 and 1; A uses link 0, B link 1: r + r/2 = C -> r = 2C/3.
    c = 90.0
    a = np.array([[1.0, 0.0, 0.5], [0.0, 1.0, 0.5]])
    res = maxmin_rates(a, np.array([c, c]))
    assert np.allclose(res.rates, 2 * c / 3)
    assert np.allclose(res.link_load, c)


def test_coefficients_above_one_closed_form():
    # a PCIe read's tag resource: a flow loads a constraint by more than its rate. Flow 0 loads
    # link 0 twice per unit, flow 1 once: 2r + r = 9 -> r = 3 each (link 1, cap 4, is slack).
    a = np.array([[2.0, 1.0], [0.0, 1.0]])
    res = maxmin_rates(a, np.array([9.0, 4.0]))
    assert np.allclose(res.rates, [3.0, 3.0])
    assert res.bottleneck.tolist() == [0, 0]
    # a lone flow with coefficient 0.25 gets four times the capacity
    res = maxmin_rates(np.array([[0.25]]), np.array([10.0]))
    assert np.allclose(res.rates, [40.0]) and np.allclose(res.link_load, [10.0])


def test_infinite_capacity_and_zero_capacity():
    a = np.array([[1.0, 1.0], [0.0, 1.0]])
    res = maxmin_rates(a, np.array([np.inf, 0.0]))
    assert np.isinf(res.rates[0]) and res.bottleneck[0] == UNCONSTRAINED
    assert res.rates[1] == 0.0 and res.bottleneck[1] == 1


def test_build_incidence_sums_duplicates():
    a = build_incidence(np.array([0, 0, 1]), np.array([0, 0, 1]), 2, 2, np.array([0.5, 0.5, 1]))
    assert a.toarray().tolist() == [[1.0, 0.0], [0.0, 1.0]]
    with pytest.raises(ValueError, match="link_idx out of range"):
        build_incidence(np.array([2]), np.array([0]), 2, 1)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"capacity": np.array([-1.0])}, "capacity"),
        ({"capacity": np.array([1.0, 2.0])}, "capacity must have shape"),
        ({"caps": np.array([1.0])}, "caps must be a scalar or have shape"),
        ({"weights": 0.0}, "weights"),
        ({"caps": -1.0}, "caps"),
    ],
)
def test_bad_input_is_rejected(kwargs, match):
    args = {"incidence": np.ones((1, 2)), "capacity": np.array([1.0])} | kwargs
    with pytest.raises(ValueError, match=match):
        maxmin_rates(**args)


@st.composite
def problems(draw):
    n_links = draw(st.integers(1, 6))
    n_flows = draw(st.integers(1, 10))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    mask = rng.random((n_links, n_flows)) < draw(st.floats(0.2, 0.9))
    frac = np.where(
        rng.random((n_links, n_flows)) < 0.3, rng.choice([0.25, 0.5], (n_links, n_flows)), 1.0
    )
    a = mask * frac
    # Integer-ish capacities make exact ties (several links at one level) common.
    capacity = rng.integers(1, 6, n_links).astype(float) * 10
    caps = np.where(rng.random(n_flows) < 0.3, rng.integers(1, 30, n_flows).astype(float), np.inf)
    caps[(a.sum(axis=0) == 0) & np.isinf(caps)] = 7.0  # keep the oracle finite
    weighted = draw(st.booleans())
    w = rng.integers(1, 4, n_flows).astype(float) if weighted else np.ones(n_flows)
    return a, capacity, caps, w


@settings(max_examples=150, deadline=None)
@given(problems())
def test_property_optimal_and_matches_reference(problem):
    a, capacity, caps, w = problem
    res = maxmin_rates(sp.csc_array(a), capacity, caps=caps, weights=w)
    check_optimal(a, capacity, caps, w, res)
    assert np.allclose(res.rates, reference_maxmin(a, capacity, caps, w), rtol=1e-7, atol=1e-9)


def test_larger_random_problem_is_optimal():
    rng = np.random.default_rng(1)
    n_links, n_flows, hops = 300, 3000, 4
    links = rng.integers(0, n_links, (n_flows, hops)).ravel()
    flows = np.repeat(np.arange(n_flows), hops)
    a = build_incidence(links, flows, n_links, n_flows)
    capacity = rng.choice([100.0, 200.0, 400.0], n_links)
    caps = np.where(rng.random(n_flows) < 0.3, rng.uniform(0.5, 20.0, n_flows), np.inf)
    res = maxmin_rates(a, capacity, caps=caps)
    # Vectorised optimality check: each flow capped, or maximal on a saturated bottleneck.
    dense = a.toarray()
    assert np.all(res.link_load <= capacity * (1 + 1e-9))
    capped = res.bottleneck == CAP
    assert np.allclose(res.rates[capped], caps[capped])
    b = res.bottleneck[~capped]
    assert np.all(b >= 0)
    assert np.allclose(res.link_load[b], capacity[b])
    max_on_link = np.where(dense > 0, res.rates[None, :], 0).max(axis=1)
    assert np.all(res.rates[~capped] >= max_on_link[b] * (1 - 1e-9))


def test_deterministic():
    rng = np.random.default_rng(3)
    a = sp.random_array((50, 400), density=0.05, random_state=rng, format="csc")
    cap = rng.uniform(1, 10, 50)
    r1 = maxmin_rates(a, cap)
    r2 = maxmin_rates(a, cap)
    assert np.array_equal(r1.rates, r2.rates) and np.array_equal(r1.bottleneck, r2.bottleneck)


def _pair_incidence(a: np.ndarray, b: np.ndarray, n_links: int) -> sp.csc_array:
    links = np.stack([a, b], axis=1).ravel()
    return build_incidence(links, np.repeat(np.arange(a.size), 2), n_links, a.size)


@settings(max_examples=150, deadline=None)
@given(st.integers(2, 8), st.integers(1, 30), st.integers(0, 2**32 - 1))
def test_pairs_solver_matches_the_oracle(n_links, n_flows, seed):
    rng = np.random.default_rng(seed)
    a = rng.integers(0, n_links, n_flows)
    b = (a + rng.integers(1, n_links, n_flows)) % n_links  # distinct from a
    capacity = rng.integers(0, 6, n_links).astype(float) * 10  # ties and zero capacities
    capacity[rng.random(n_links) < 0.15] = np.inf
    dense = _pair_incidence(a, b, n_links).toarray()
    expect = reference_maxmin(dense, capacity, np.full(n_flows, np.inf), np.ones(n_flows))
    got = maxmin_pairs(a, b, capacity)
    assert np.allclose(got, expect, rtol=1e-9, atol=1e-12, equal_nan=False)


def test_pairs_solver_equals_general_solver_on_an_all_to_all():
    # a skewed all-to-all over GPU egress (0..63) and ingress (64..127) constraints
    rng = np.random.default_rng(5)
    src = rng.integers(0, 64, 5000)
    dst = 64 + (src + rng.integers(1, 64, 5000)) % 64
    capacity = rng.choice([1.6e12, 3.2e12], 128)
    general = maxmin_rates(_pair_incidence(src, dst, 128), capacity).rates
    assert np.allclose(maxmin_pairs(src, dst, capacity), general, rtol=1e-12, atol=0)


@pytest.mark.parametrize(
    ("a", "b", "cap", "match"),
    [
        ([0], [0], [1.0, 1.0], "distinct"),
        ([0], [2], [1.0, 1.0], "distinct"),
        ([0, 1], [1], [1.0, 1.0], "one length"),
        ([0], [1], [1.0, -1.0], "capacity"),
    ],
)
def test_pairs_solver_rejects_bad_input(a, b, cap, match):
    with pytest.raises(ValueError, match=match):
        maxmin_pairs(np.array(a), np.array(b), np.array(cap))
