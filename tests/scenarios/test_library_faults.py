"""The fault and storage library scenarios show what their headers claim, at small sizes:
``link-failure`` (multipath loses nothing; ECMP stalls for at least one RTO) and
``storage-contention`` (the GPUDirect Storage reads run and can only slow the dispatch)."""

from __future__ import annotations

import podsim
import pytest
from podsim.fabric.units import parse_time

LINK = ["workload.synthetic.size=128KiB", "outputs.plots=false"]
STORAGE = ["workload.moe.tokens_per_rank=16", "outputs.plots=false"]


@pytest.fixture(scope="module")
def link_runs() -> dict[str, podsim.Results]:
    return {v: podsim.run("link-failure", overrides=[f"variant={v}", *LINK])
            for v in ("spray", "reps", "ecmp")}  # fmt: skip


@pytest.mark.parametrize("variant", ["spray", "reps"])
def test_multipath_variants_lose_nothing(link_runs, variant: str) -> None:
    res = link_runs[variant]
    s = res.summary
    fault = s["engine_info"]["faults"][0]
    assert fault["kind"] == "link_down" and fault["target"] == "leaf0-spine0"
    assert fault["lost_pkts"] > 0 and fault["flows_hit"] > 0  # the cut hit live traffic
    assert s["status"] == "complete" and (res.messages["status"] == "complete").all()
    assert s["counters"]["retransmitted_packets"] > 0  # recovered by the transport
    q = res.qps
    assert int(q["bytes"].sum()) == int(res.messages.loc[res.messages.hop == "rdma", "bytes"].sum())


def test_ecmp_variant_stalls_at_least_one_rto_and_recovers(link_runs) -> None:
    s = link_runs["ecmp"].summary
    fault = s["engine_info"]["faults"][0]
    rto = parse_time(link_runs["ecmp"].scenario["cluster"]["nic"]["rto"])
    assert s["status"] == "complete"
    assert fault["max_stall_s"] >= rto and fault["recovery_s"] >= fault["max_stall_s"]
    reps = link_runs["reps"].summary["engine_info"]["faults"][0]
    assert reps["max_stall_s"] < rto < fault["max_stall_s"]
    assert s["makespan_s"] > link_runs["reps"].summary["makespan_s"]


def test_storage_reads_run_beside_the_dispatch_and_only_slow_it() -> None:
    with_reads = podsim.run("storage-contention", overrides=["variant=reads", *STORAGE])
    without = podsim.run("storage-contention", overrides=["variant=no-reads", *STORAGE])
    reads = with_reads.summary["engine_info"]["pcie"]["storage_reads"]
    assert len(reads) == 16 and all(r["bytes"] == 1 << 30 and r["bytes_done"] > 0 for r in reads)
    assert sorted(r["rank"] for r in reads) == list(range(16))  # every GPU reads
    assert not without.summary["engine_info"]["pcie"].get("storage_reads")
    t_with = with_reads.summary["phases"]["dispatch"]["completion_time_s"]
    t_without = without.summary["phases"]["dispatch"]["completion_time_s"]
    assert t_with >= t_without
