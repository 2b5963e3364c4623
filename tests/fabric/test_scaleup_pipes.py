"""The scale-up domain's fluid pipes (podsim.fabric.scaleup): max-min sharing and refill, every
transfer finishes, and the partial re-solve equals a full progressive filling."""

from __future__ import annotations

import pytest


def _pipes(gpus: int):
    import simpy
    from podsim.fabric.scaleup import ScaleUpPipes
    from podsim.fabric.topology import build_topology

    g = build_topology("superpod", pods=1, gpus_per_pod=gpus, gpus_per_server=8)
    env = simpy.Environment()
    return env, ScaleUpPipes(env, g)


def test_scaleup_pipes_share_and_refill_max_min() -> None:
    env, pipes = _pipes(16)
    rate, lat = pipes.rate[0], pipes.latency[0] + pipes.latency[1]
    done: dict[object, float] = {}

    def mark(arg: object) -> None:
        done[arg] = env.now

    nbytes = 1 << 20
    # one GPU to two peers, B and 2B: R/2 each until the first ends, then R for the rest
    pipes.send(0, 1, nbytes, mark, "small")
    pipes.send(0, 2, 2 * nbytes, mark, "big")
    env.run()
    assert done["small"] == pytest.approx(16 * nbytes / rate + lat, rel=1e-9)
    assert done["big"] == pytest.approx(24 * nbytes / rate + lat, rel=1e-9)
    # all-to-all of equal sizes: every egress and ingress shared by 15 transfers
    env, pipes = _pipes(16)
    done.clear()
    for a in range(16):
        for b in range(16):
            if a != b:
                pipes.send(a, b, nbytes, lambda arg, e=env: done.__setitem__(arg, e.now), (a, b))
    env.run()
    assert len(done) == 240
    expect = 8 * nbytes * 15 / rate + lat
    assert all(t == pytest.approx(expect, rel=1e-9) for t in done.values())


def test_scaleup_pipes_finish_every_transfer_of_distinct_sizes() -> None:
    # every transfer of a distinct size: one re-solve per finish (the superpod-moe case; the
    # array form pays off from tens of thousands of transfers, see the report's figures)
    env, pipes = _pipes(32)
    sent = []
    for a in range(32):
        for b in range(32):
            if a != b:
                sent.append((a, b))
                pipes.send(a, b, 4096 * (1 + len(sent)), lambda _arg: None)
    env.run()
    assert len(sent) == 992
    (dom,) = pipes.domains  # one pod: one scale-up domain
    assert dom._rem.size == 0 and not dom._new and dom._cb.size == 0


def test_scaleup_partial_resolve_matches_full_progressive_filling() -> None:
    """Finishes re-solve only the transfers at or above the lowest leaver's rate; the finish
    times must equal those of a full re-solve at every event, with skewed sizes and arrivals
    in the middle of the phase."""
    import numpy as np
    import podsim.fabric.scaleup as su

    def run(partial: bool) -> tuple[dict[object, float], list[int]]:
        env, pipes = _pipes(16)
        solved: list[int] = []
        (dom,) = pipes.domains
        solve = dom._solve

        def spy(solve_from: float) -> None:
            before = dom._rate.copy()
            solve(solve_from if partial else 0.0)
            solved.append(int((dom._rate != before).sum()))

        dom._solve = spy
        rng = np.random.default_rng(7)
        done: dict[object, float] = {}

        def post(batch: int) -> None:
            for a in range(16):
                for b in rng.choice(16, size=6, replace=False):
                    if a != b:
                        size = int(rng.lognormal(16, 1.0))
                        pipes.send(a, int(b), size, lambda k: done.__setitem__(k, env.now),
                                   (batch, a, int(b)))  # fmt: skip

        post(0)
        su.call_at(env, 20e-6, lambda _a: post(1))
        env.run()
        return done, solved

    full, _ = run(False)
    part, solved = run(True)
    assert len(full) > 150 and part.keys() == full.keys()
    assert all(part[k] == pytest.approx(full[k], rel=1e-9, abs=0) for k in full)
    assert min(solved) < max(solved)  # some finishes re-solved only part of the transfers


def test_skip_carries_each_transfer_at_its_rate_for_a_fast_forward_jump() -> None:
    """A fast-forward jump of d seconds (podsim.nic.fastforward): skip(d) and the pipes'
    pending events moved d earlier give the same finish times, d earlier on the event clock,
    as running through the d seconds."""
    nbytes = 1 << 20

    def run(jump: float) -> dict[object, float]:
        env, pipes = _pipes(16)
        done: dict[object, float] = {}
        pipes.send(0, 1, nbytes, lambda a: done.__setitem__(a, env.now), "small")
        pipes.send(0, 2, 2 * nbytes, lambda a: done.__setitem__(a, env.now), "big")
        env.run(until=2e-6)  # the first finish is at ~13 us
        if jump:
            pipes.skip(jump)
            q = env._queue
            q[:] = [(t - jump, p, i, ev) for t, p, i, ev in q]
        env.run()
        return {k: v + jump for k, v in done.items()}

    full, fast = run(0.0), run(5e-6)
    assert fast == pytest.approx(full, rel=1e-9)


def test_each_pod_is_a_scale_up_domain_of_its_own() -> None:
    """Two pods are two domains: no scale-up path between them, and the transfers of each run
    exactly (bit for bit) as in a cluster of that pod alone, whatever the other pod does."""
    import numpy as np
    import simpy
    from podsim.fabric.scaleup import ScaleUpPipes
    from podsim.fabric.topology import build_topology

    g = build_topology("superpod", pods=2, gpus_per_pod=16, gpus_per_server=8)
    env = simpy.Environment()
    pipes = ScaleUpPipes(env, g)
    assert len(pipes.domains) == 2
    assert pipes.reaches(0, 15) and pipes.reaches(16, 31) and not pipes.reaches(0, 16)
    with pytest.raises(ValueError, match="share no scale-up domain"):
        pipes.send(0, 16, 100, lambda _a: None)

    def traffic(seed: int) -> list[tuple[int, int, int]]:
        rng = np.random.default_rng(seed)
        return [
            (a, int(b), int(rng.lognormal(16, 1.0)))
            for a in range(16)
            for b in rng.choice(16, size=6, replace=False)
            if a != b
        ]

    both: dict[object, float] = {}
    for pod, seed in ((0, 3), (1, 4)):
        for a, b, size in traffic(seed):
            key = (pod, a, b)
            pipes.send(
                16 * pod + a, 16 * pod + b, size, lambda k: both.__setitem__(k, env.now), key
            )
    env.run()
    for pod, seed in ((0, 3), (1, 4)):
        env1, alone = _pipes(16)
        done: dict[object, float] = {}
        for a, b, size in traffic(seed):
            alone.send(a, b, size, lambda k, e=env1, d=done: d.__setitem__(k, e.now), (pod, a, b))
        env1.run()
        assert len(done) > 50
        assert all(both[k] == t for k, t in done.items())


def test_a_time_resolution_merges_finishes_and_delivers_each_at_about_its_own_time() -> None:
    """With ``resolution_s`` q, transfers finishing within q of a finish leave the fluid with
    it (fewer re-solves) and are delivered at their own finish times: every delivery within a
    few q of the exact run's (module docstring: the others speed up at most q early)."""
    import numpy as np
    import simpy
    from podsim.fabric.scaleup import ScaleUpPipes
    from podsim.fabric.topology import build_topology

    g = build_topology("superpod", pods=1, gpus_per_pod=16, gpus_per_server=8)
    rng = np.random.default_rng(11)
    # an all-to-all of nearly equal sizes: finishes a fraction of a nanosecond apart, as in
    # superpod-moe
    flows = [
        (a, b, (1 << 20) + int(rng.integers(0, 4096)))
        for a in range(16)
        for b in range(16)
        if a != b
    ]

    def run(q: float) -> tuple[dict[object, float], int]:
        env = simpy.Environment()
        pipes = ScaleUpPipes(env, g, resolution_s=q)
        (dom,) = pipes.domains
        finishes = [0]
        finish = dom._finish

        def count(arg: object) -> None:
            finishes[0] += 1
            finish(arg)

        dom._finish = count
        done: dict[object, float] = {}
        for a, b, size in flows:
            pipes.send(a, b, size, lambda k, e=env, d=done: d.__setitem__(k, e.now), (a, b))
        env.run()
        assert all(t <= done[(a, b)] for (a, b, _s), t in zip(flows, pipes.t_end, strict=True))
        return done, finishes[0]

    exact, n_exact = run(0.0)
    q = 1e-9
    merged, n_merged = run(q)
    assert merged.keys() == exact.keys() and len(exact) == 240
    assert n_merged <= 0.6 * n_exact  # finishes within q of each other: one re-solve
    worst = max(abs(merged[k] - exact[k]) for k in exact)
    assert 0 < worst <= 5 * q, worst
    with pytest.raises(ValueError, match="resolution_s"):
        ScaleUpPipes(simpy.Environment(), g, resolution_s=-1e-9)
