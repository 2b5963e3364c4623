"""Every built-in scenario validates (every variant), runs at a small size, and is
deterministic: the same seed gives identical tables."""

from __future__ import annotations

import pandas as pd
import podsim
import pytest
from podsim.scenarios.build.cluster import build_cluster, trace_ranks
from podsim.scenarios.input.loader import library_names, load_scenario, variant_names
from podsim.scenarios.runner import prepare

# small sizes for the default suite (the files themselves hold the documented sizes)
SMALL: dict[str, list[str]] = {
    "quickstart": ["workload.moe.tokens_per_rank=16"],
    "deepep-h800": ["workload.moe.tokens_per_rank=16"],
    "superpod-moe": [
        "cluster.preset=superpod",
        "cluster.params={pods: 2, gpus_per_pod: 8, gpus_per_server: 4, gpus_per_nic: 2, "
        "planes: 2, nic_phy: 200GbE, fabric_phy: 200GbE, scaleup_switches: 2}",
        "workload.moe.ep_size=16",
        "workload.moe.tokens_per_rank=8",
    ],
    "incast-cc": ["workload.synthetic.size=64KiB"],
    "spray-vs-ecmp": ["workload.synthetic.size=64KiB"],
    "link-failure": ["workload.synthetic.size=128KiB"],
    "pd-4p4d": [
        "workload.serving.requests=3",
        "workload.serving.mix=[{prompt_tokens: 4096, output_tokens: 8}]",
    ],
    "storage-contention": ["workload.moe.tokens_per_rank=16"],
    "chakra-4rank": [],
    "kineto-2rank": [],
    "collectives": ["workload.collective.size=4MiB"],
    # one node: the DP reduction of DeepSeek-V3's dense layers over the fabric takes ~40 s of
    # CPU even at this size; classes on the fabric are tested in test_traffic_classes.py
    "traffic-classes": [
        "cluster.params.nodes=1",
        "workload.training.ep=8",
        "workload.training.layers=1",
        "workload.training.microbatches=1",
        "workload.training.seq_len=128",
        "workload.training.grad_bytes=2",
    ],
    "train-1t-moe": [
        "cluster.params.nodes=2",
        "workload.training.pp=2",
        "workload.training.ep=8",
        "workload.training.layers=2",
        "workload.training.microbatches=2",
        "workload.training.seq_len=512",
    ],
}
NO_FILES = ["outputs.plots=false"]


def test_small_sizes_cover_the_library() -> None:
    assert set(SMALL) == set(library_names())


@pytest.mark.parametrize("name", sorted(SMALL))
def test_builtin_validates_and_builds_every_variant(name: str) -> None:
    for variant in variant_names(name) or [None]:
        sc, _ = load_scenario(name, [] if variant is None else [f"variant={variant}"])
        assert sc.variant == variant
        cluster = build_cluster(sc, trace_ranks(sc))
        assert cluster.num_ranks >= 2


@pytest.mark.parametrize("name", sorted(SMALL))
def test_builtin_runs_small(name: str) -> None:
    res = podsim.run(name, overrides=SMALL[name] + NO_FILES)
    s = res.summary
    assert s["status"] == "complete", s
    assert s["messages"]["unfinished"] == 0
    assert s["messages"]["count"] == len(res.messages) > 0
    comm = [p for p in s["phases"] if p != "compute"]
    assert comm and all(s["phases"][p]["completion_time_s"] > 0 for p in comm)
    # every byte the workload asked for (the trace built before the run, independently of the
    # engine) was carried: each message complete, with an end time, and the totals equal
    sc, _ = load_scenario(name, SMALL[name] + NO_FILES)
    asked = prepare(sc).trace
    assert len(asked) == len(res.messages)
    assert int(asked["bytes"].sum()) == s["messages"]["bytes"] == int(res.messages["bytes"].sum())
    assert (res.messages["status"] == "complete").all()
    assert res.messages["end_s"].notna().all()


def _comparable(res: podsim.Results) -> tuple[dict, dict]:
    summary = {
        k: v
        for k, v in res.summary.items()
        if k not in ("wall_s", "events", "events_per_s", "provenance")
    }
    return summary, res.tables()


@pytest.mark.parametrize("name", ["quickstart", "incast-cc"])
def test_same_seed_same_results(name: str) -> None:
    a_sum, a = _comparable(podsim.run(name, overrides=SMALL[name] + NO_FILES))
    b_sum, b = _comparable(podsim.run(name, overrides=SMALL[name] + NO_FILES))
    assert a_sum == b_sum
    for table in a:
        pd.testing.assert_frame_equal(a[table], b[table], check_exact=True)
