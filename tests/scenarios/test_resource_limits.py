"""Sizes refused before anything is built: clusters, traces and token counts beyond the budget
or the machine, with the estimate and the key to change."""

from __future__ import annotations

from podsim.scenarios.cli.app import app
from typer.testing import CliRunner


def _cli(*args: str, env: dict | None = None):
    return CliRunner().invoke(app, list(args), env=env)


def _clean(r) -> None:
    assert "Traceback" not in r.output and "internal error" not in r.output, r.output


def test_absurd_cluster_is_refused_before_it_is_built(monkeypatch) -> None:
    import podsim.fabric.topology as topology

    def no_build(*args, **kwargs):
        raise AssertionError("the cluster was built")

    monkeypatch.setattr(topology, "build_topology", no_build)
    r = _cli("validate", "quickstart", "--set", "cluster.params.nodes=100000000")
    assert r.exit_code == 2, r.output
    _clean(r)
    out = " ".join(r.output.split())
    assert "--set cluster.params.nodes=100000000" in out and "key cluster.params" in out
    assert "1,712,500,064 graph nodes" in out and "800,000,000 NIC ports" in out
    # far beyond this machine: --force does not help
    r = _cli("validate", "quickstart", "--force", "--set", "cluster.params.nodes=100000000")
    assert r.exit_code == 2 and "even with --force" in " ".join(r.output.split())


def test_cluster_over_the_budget_is_refused_unless_forced() -> None:
    # the base (300 MiB) plus 600 B per node or link of a 64-node cluster exceeds 301 MiB
    env = {"PODSIM_MAX_MEMORY": "301MiB"}
    args = ("validate", "quickstart", "--set", "cluster.params.nodes=64")
    r = _cli(*args, env=env)
    assert r.exit_code == 2, r.output
    assert "over the memory budget" in r.output and "--force" in r.output
    r = _cli(*args, "--force", env=env)
    assert r.exit_code == 0, r.output
    r = _cli("cost", "quickstart", "--set", "cluster.params.nodes=64", env=env)
    assert r.exit_code == 2 and "over the memory budget" in r.output, r.output


def test_flow_engine_refuses_a_trace_it_cannot_hold() -> None:
    from podsim.scenarios.build.limits import FLUID_BYTES_PER_MESSAGE

    # 850 KiB over the base holds quickstart's cluster (92 nodes and links at 600 B) and the
    # router logits of 16 x 16 tokens, but not its 544 messages at 1.5 KiB each
    env = {"PODSIM_MAX_MEMORY": f"{300 * 2**20 + 850 * 2**10}"}
    sets = ("--set", "engine=flow", "--set", "workload.moe.tokens_per_rank=16")
    args = ("validate", "quickstart", *sets, "--force")
    assert _cli(*args, env=env).exit_code == 0  # --force skips the budget
    r = _cli(*args[:-1], env=env)
    assert r.exit_code == 2, r.output
    assert "flow engine holds the routes" in r.output
    assert f"{FLUID_BYTES_PER_MESSAGE} B per message" in r.output


def test_moe_tokens_beyond_memory_are_refused_before_routing(monkeypatch) -> None:
    import podsim.scenarios.build.cluster as cluster

    def no_routing(*args, **kwargs):
        raise AssertionError("the tokens were routed")

    monkeypatch.setattr(cluster, "moe_layer_trace", no_routing)
    r = _cli("run", "quickstart", "-q", "--set", "workload.moe.tokens_per_rank=100000000")
    assert r.exit_code == 2, r.output
    _clean(r)
    assert "workload.moe.tokens_per_rank" in r.output and "router logits" in r.output
