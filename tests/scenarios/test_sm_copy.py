"""The SMs' copy path of DeepEP's normal kernels (``workload.moe.deepep.copy_rate``): on the flow
and packet engines every scale-up or local row into a GPU shares its copy rate; the bound
models it as one constraint per GPU."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from podsim.scenarios.build.cluster import build_cluster
from podsim.scenarios.engines import ENGINES, RunContext
from podsim.scenarios.engines.flow import FlowCluster
from podsim.scenarios.input.loader import load_scenario

NO_COMPUTE = pd.DataFrame({"step": [], "layer": [], "rank": [], "compute_s": []})
ONE_NODE = ["cluster.params.nodes=1", "workload.moe.ep_size=8", "workload.moe.tokens_per_rank=8"]
C = 1e9  # B/s: far below NVLink's 160 GB/s, so the copy path alone sets the times


def ctx(copy_rate: str | None, engine: str = "flow") -> RunContext:
    """One 8-GPU node; a hand-made dispatch: rank 0 copies 1 MB to itself and receives 1 MB
    from rank 1 over NVLink, rank 1 receives 0.5 MB from rank 2."""
    o = [*ONE_NODE, f"engine={engine}", f"workload.moe.deepep.copy_rate={copy_rate or 'null'}"]
    sc, _ = load_scenario("deepep-h800", overrides=o)
    tr = pd.DataFrame(
        {
            "src_rank": [0, 1, 2],
            "dst_rank": [0, 0, 1],
            "bytes": [1_000_000, 1_000_000, 500_000],
            "hop": ["local", "scaleup", "scaleup"],
        }
    ).assign(step=0, layer=0, phase="dispatch", tokens=1, start_s=0.0)
    return RunContext(sc, build_cluster(sc, 8), tr, NO_COMPUTE)


def ends(c: RunContext) -> list[float]:
    out = ENGINES.get(c.scenario.engine)(c)
    assert out.status == "complete"
    return out.messages.sort_values("msg")["end_s"].tolist()


@pytest.mark.parametrize("engine", ["flow", "packet"])
def test_local_and_nvlink_rows_into_a_gpu_share_its_copy_rate(engine: str) -> None:
    free = ends(ctx(None, engine))
    # without the copy path: the local row is free, the NVLink rows go at 160 GB/s
    assert free[0] == 0.0
    lat = free[1] - 1e6 / 160e9  # the NVLink path latency
    assert 0 < lat < 5e-6
    assert free[2] == pytest.approx(0.5e6 / 160e9 + lat, rel=1e-9)
    got = ends(ctx("1GB/s", engine))
    # rank 0 copies 2 MB at 1 GB/s, the two rows at 0.5 GB/s each: both done at 2 ms
    assert got[0] == pytest.approx(2e6 / C, rel=1e-9)  # a copy inside the GPU: no latency
    assert got[1] == pytest.approx(2e6 / C + lat, rel=1e-9)
    # rank 1 copies 0.5 MB alone
    assert got[2] == pytest.approx(0.5e6 / C + lat, rel=1e-9)


def test_rdma_rows_do_not_load_the_copy_path() -> None:
    c = ctx("1GB/s")
    fc = FlowCluster(c, sm_copy=True)
    assert fc.copy_ids is not None and fc.copy_ids.size == 8
    r = fc.route(
        np.array([0, 1, 2]),
        np.array([0, 1, 2]),
        np.array([0, 0, 1]),
        np.array([100, 100, 100]),
        np.array(["local", "scaleup", "rdma"]),
    )
    copy0, copy1 = int(fc.copy_ids[0]), int(fc.copy_ids[1])
    assert r.idx[0][r.idx[0] >= 0].tolist() == [copy0]  # the local row: its GPU's copy alone
    assert r.wire[0] == 0 and r.packets[0] == 0 and r.latency_s[0] == 0.0
    assert copy0 in r.idx[1] and (r.idx[1] >= 0).sum() > 1  # the NVLink links and the copy
    assert copy1 not in r.idx[2]  # the NIC writes RDMA rows into the buffer itself
    # without the copy path a local row cannot be routed
    with pytest.raises(ValueError, match="local messages"):
        FlowCluster(c).route(
            np.array([0]), np.array([0]), np.array([0]), np.array([1]), np.array(["local"])
        )


def test_the_bound_models_the_copy_path() -> None:
    from podsim.scenarios.engines.bound import phase_bounds

    c = ctx("1GB/s", "bound")
    pb = phase_bounds(c)
    # rank 0's copy path carries its 1 MB to itself and the 1 MB from rank 1: 2 ms at 1 GB/s
    assert pb.table["bound_s"].iloc[0] == pytest.approx(2e6 / C, rel=1e-6)
    assert pb.table["limit_kind"].iloc[0] == "gpu-copy" or "copy" in pb.table["limit"].iloc[0]
    # each message alone: its bytes at the copy rate (the local one has no latency)
    assert pb.msg_time_s[0] == pytest.approx(1e6 / C, rel=1e-9)
    assert pb.msg_time_s[1] > 1e6 / C
    ph = ENGINES.get("bound")(c).phases
    ph = ph[ph["phase"] == "dispatch"].set_index("rank")
    assert ph.loc[0, "end_s"] == pytest.approx(2e6 / C, rel=1e-6)  # rank 0 ends at the bound
    free = phase_bounds(ctx(None, "bound"))
    assert free.msg_time_s[0] == 0.0  # without the copy path a row to itself is free


def test_a_gpu_copies_to_itself_only_with_the_copy_path() -> None:
    import simpy
    from podsim.fabric.scaleup import ScaleUpPipes

    c = ctx(None)
    with pytest.raises(ValueError, match="copy path"):
        ScaleUpPipes(simpy.Environment(), c.cluster.graph).copy_local(0, 100, lambda _a: None)
