"""DeepEP's low-latency kernels' GPU-side time beyond their messages
(``workload.moe.deepep.ll_*``, podsim.workloads.deepep_ll): each rank's phase lasts its tail
after its last message, on every engine; the combine's reduction reads the rank's top-k copies
and writes its tokens at ``ll_reduce_rate``."""

from __future__ import annotations

import numpy as np
import pytest
from podsim.scenarios.runner import run
from podsim.workloads.deepep_ll import LowLatencyKernel

LL = [
    "cluster.params.nodes=1",
    "workload.moe.ep_size=8",
    "workload.moe.tokens_per_rank=4",
    "workload.moe.mode=deepep-low-latency",
    "outputs.plots=false",
    "outputs.timeline=false",
    # none of the library scenario's own low-latency times: each test sets its own
    "workload.moe.deepep.ll_dispatch_fixed=0s",
    "workload.moe.deepep.ll_combine_fixed=0s",
    "workload.moe.deepep.ll_reduce_rate=null",
]
ROW = 7168 * 2  # DeepSeek-V3's BF16 combine row (hidden 7168)


def phases(engine: str, extra: list[str]) -> dict:
    res = run("deepep-h800", overrides=[*LL, f"engine={engine}", *extra], force=True)
    return res.phases.set_index(["phase", "rank"])["duration_s"]


@pytest.mark.parametrize("engine", ["flow", "packet", "bound"])
def test_each_rank_phase_lasts_its_tail_longer(engine: str) -> None:
    base = phases(engine, [])
    got = phases(
        engine,
        ["workload.moe.deepep.ll_dispatch_fixed=10us", "workload.moe.deepep.ll_combine_fixed=3us"],
    )
    np.testing.assert_allclose(got.loc["dispatch"] - base.loc["dispatch"], 10e-6, rtol=1e-6)
    # the combine starts 10 us later on every rank, so its own duration grows by its tail alone
    np.testing.assert_allclose(got.loc["combine"] - base.loc["combine"], 3e-6, rtol=1e-6)


def test_combine_reduction_at_the_reduce_rate() -> None:
    base = phases("flow", [])
    got = phases("flow", ["workload.moe.deepep.ll_reduce_rate=1GB/s"])
    # every rank reduces its 4 tokens x top-8 copies and writes 4 tokens: 36 rows at 1 GB/s
    np.testing.assert_allclose(got.loc["combine"] - base.loc["combine"], 36 * ROW / 1e9, rtol=1e-6)
    np.testing.assert_allclose(got.loc["dispatch"], base.loc["dispatch"], rtol=0, atol=0)


def test_the_normal_mode_has_no_tail() -> None:
    o = ["workload.moe.deepep.ll_dispatch_fixed=10us"]
    normal = [x for x in LL if "mode" not in x] + ["engine=flow", "workload.moe.mode=deepep-normal"]
    a = run("deepep-h800", overrides=normal, force=True).phases["duration_s"]
    b = run("deepep-h800", overrides=[*normal, *o], force=True).phases["duration_s"]
    np.testing.assert_array_equal(a.to_numpy(), b.to_numpy())


def test_tail_by_hand() -> None:
    k = LowLatencyKernel(2e-6, 1e-6, 1e9)
    np.testing.assert_allclose(k.tail_s("dispatch", np.array([8, 3]), np.array([1, 1]), 10), 2e-6)
    np.testing.assert_allclose(
        k.tail_s("combine", np.array([8, 3]), np.array([1, 1]), 10), [1e-6 + 90e-9, 1e-6 + 40e-9]
    )
    with pytest.raises(ValueError, match="dispatch_fixed_s"):
        LowLatencyKernel(-1.0)
    with pytest.raises(ValueError, match="reduce_rate_Bps"):
        LowLatencyKernel(reduce_rate_Bps=0.0)
