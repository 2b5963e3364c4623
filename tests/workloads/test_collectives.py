"""Collectives as graph builders: closed-form times on an idle fabric.

Over a transport where a message of ``b`` bytes takes ``t(b) = b / RATE + LAT`` and nothing
contends, each algorithm's time is its textbook closed form (Thakur et al., IJHPCA 2005; NCCL's
ring); on the simulated fabrics (flow and packet engines, one switch, so every ring neighbour is
one switch away) a collective takes its closed form in the engine's own single-message time
``t(b)``, and the two engines agree.
"""

from __future__ import annotations

import numpy as np
import pytest
from podsim.scenarios.runner import run
from podsim.workloads.collectives import BUS_FACTORS, Collective, all_to_all_v, build_collective
from podsim.workloads.graph import GraphError, OpGraph

from tests.workloads.test_graph import LAT, RATE
from tests.workloads.test_graph import run as run_graph


def t(b: float) -> float:
    return b / RATE + LAT


def timed(c: Collective) -> tuple[float, OpGraph]:
    g = OpGraph()
    done = build_collective(g, c)
    res, _ = run_graph(g, num_ranks=max(c.ranks) + 1)
    assert res.status == "complete"
    assert sorted(done) == sorted(c.ranks)
    return max(res.end_s[v] for v in done.values()), g


@pytest.mark.parametrize("n", [2, 3, 8])
def test_ring_all_reduce_reduce_scatter_all_gather_closed_forms(n: int) -> None:
    s = 1 << 20
    ranks = list(range(n))
    ar, g = timed(Collective("all-reduce", ranks, s))
    assert ar == pytest.approx(2 * (n - 1) * t(-(-s // n)))
    # bytes: each rank sends its slice 2(n-1) times
    assert g.messages(n)["bytes"].sum() == n * 2 * (n - 1) * -(-s // n)
    rs, _ = timed(Collective("reduce-scatter", ranks, s))
    ag, _ = timed(Collective("all-gather", ranks, s))
    assert rs == pytest.approx((n - 1) * t(-(-s // n)))
    assert ag == pytest.approx(rs)


def test_chunks_pipeline_the_ring_and_channels_split_it() -> None:
    n, s, chunk = 4, 1 << 20, 1 << 16
    ranks = list(range(n))
    steps = 2 * (n - 1)
    slice_ = s // n
    c = slice_ // chunk
    piped, _ = timed(Collective("all-reduce", ranks, s, chunk_bytes=chunk))
    assert piped == pytest.approx((steps + c - 1) * t(chunk))
    two, _ = timed(Collective("all-reduce", ranks, s, channels=2))
    assert two == pytest.approx(steps * t(s // 2 // n))


def test_all_to_all_and_v_and_hierarchical_closed_forms() -> None:
    n, s = 8, 1 << 20
    ranks = list(range(n))
    a2a, g = timed(Collective("all-to-all", ranks, s, algorithm="direct"))
    assert a2a == pytest.approx(t(s // n))
    assert g.messages(n)["bytes"].sum() == n * (n - 1) * (s // n)
    m = np.arange(16).reshape(4, 4) * 1000
    gv = OpGraph()
    done = all_to_all_v(gv, Collective("all-to-all", [0, 1, 2, 3], 0), m)
    res, _ = run_graph(gv)
    assert max(res.end_s[v] for v in done.values()) == pytest.approx(
        t((m - np.diag(np.diag(m))).max())
    )
    assert gv.messages(4)["bytes"].sum() == m.sum() - np.trace(m)
    # hierarchical: reduce-scatter of S in groups of 4 (3 steps of S/4), ring all-reduce of the
    # S/4 shard over 2 rails (2 steps of S/8), all-gather in the groups (3 steps of S/4)
    h, _ = timed(Collective("all-reduce", ranks, s, algorithm="hierarchical", local_size=4))
    shard = s // 4
    assert h == pytest.approx(2 * 3 * t(shard) + 2 * 1 * t(shard // 2))


def test_bus_factors_are_nccls() -> None:
    assert BUS_FACTORS["all-reduce"](8) == pytest.approx(1.75)
    assert BUS_FACTORS["all-gather"](8) == pytest.approx(0.875)


def test_bad_collectives_are_refused_by_name() -> None:
    with pytest.raises(GraphError, match="appears twice"):
        build_collective(OpGraph(), Collective("all-reduce", [0, 0], 10))
    with pytest.raises(GraphError, match="local_size 3 must divide"):
        build_collective(
            OpGraph(), Collective("all-reduce", [0, 1, 2, 3], 10, "hierarchical", local_size=3)
        )


def _scenario(engine: str, ranks: int, op: str, size: int) -> dict:
    return {
        "name": f"{op}-{ranks}",
        "engine": engine,
        "cluster": {"topology": {"name": "star", "params": {"hosts": 8}}},
        "workload": {"collective": {"op": op, "size": size, "ranks": ranks}},
        "outputs": {"plots": False},
    }


def _time(engine: str, ranks: int, op: str, size: int) -> float:
    res = run(_scenario(engine, ranks, op, size), write=False)
    assert res.summary["status"] == "complete"
    return float(res.summary["phases"]["other"]["completion_time_s"])


#: one 400G link's payload rate with a 4 KiB MTU: P/(P+82) x 400 Gb/s (docs/physics.md)
B_EFF = 400e9 / 8 * 4096 / (4096 + 82)


@pytest.mark.parametrize("engine", ["flow", "packet"])
def test_ring_all_reduce_on_an_idle_fabric_takes_its_closed_form(engine: str) -> None:
    """T(all-reduce, n, S) = 2(n-1) (S / (n B) + L): linear in S with slope 2(n-1) / (n B) at
    the link's payload rate B, and a per-step latency L that is positive and no more than one
    message's own fixed latency (a lone 2-rank exchange, which also pays the start of the
    phase)."""
    n, s1, s2 = 8, 4 << 20, 8 << 20
    t1 = _time(engine, n, "all-reduce", s1)
    t2 = _time(engine, n, "all-reduce", s2)
    steps = 2 * (n - 1)
    assert (t2 - t1) / (s2 - s1) == pytest.approx(steps / (n * B_EFF), rel=0.02)
    step_latency = (t1 - steps * s1 / (n * B_EFF)) / steps
    b = s1 // n
    lone = _time(engine, 2, "reduce-scatter", 2 * b) - b / B_EFF
    assert 0 < step_latency <= lone


def test_flow_and_packet_engines_agree_on_a_ring_all_reduce() -> None:
    n, s = 8, 4 << 20
    assert _time("flow", n, "all-reduce", s) == pytest.approx(
        _time("packet", n, "all-reduce", s), rel=0.05
    )


def test_the_bound_engine_refuses_graph_workloads_with_advice(tmp_path) -> None:
    from podsim.scenarios.errors import ScenarioError

    with pytest.raises(ScenarioError, match="does not execute operation graphs"):
        run(_scenario("bound", 4, "all-reduce", 1 << 20), write=False)


def test_cli_lists_collectives_and_refuses_an_unknown_algorithm(tmp_path) -> None:
    import yaml
    from podsim.scenarios.cli.app import app
    from typer.testing import CliRunner

    cli = CliRunner()
    r = cli.invoke(app, ["list", "collectives"])
    assert r.exit_code == 0 and "all-reduce/ring" in r.output
    f = tmp_path / "c.yaml"
    f.write_text(yaml.safe_dump(_scenario("flow", 4, "all-gather", 1 << 20)))
    r = cli.invoke(app, ["run", str(f), "--set", "workload.collective.algorithm=tree"])
    assert r.exit_code == 2
    assert "workload.collective" in r.output and "'tree' does not run all-gather" in r.output
