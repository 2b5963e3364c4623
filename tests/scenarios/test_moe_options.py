"""Scenario-level MoE options reach the workload kernels."""

from __future__ import annotations

import podsim


def _hop_bytes(flag: bool) -> dict[str, int]:
    r = podsim.run(
        "quickstart",
        overrides=[
            "workload.moe.mode=deepep-low-latency",
            f"workload.moe.nvlink_for_low_latency={str(flag).lower()}",
            "workload.moe.tokens_per_rank=32",
        ],
    )
    return r.messages.groupby("hop")["bytes"].sum().to_dict()


def test_low_latency_mode_uses_nvlink_only_when_allowed():
    rdma_only = _hop_bytes(False)
    with_nvlink = _hop_bytes(True)
    assert "scaleup" not in rdma_only
    # Same bytes either way; allowing NVLink moves the same-node share off RDMA.
    assert sum(rdma_only.values()) == sum(with_nvlink.values())
    assert with_nvlink["scaleup"] > 0
    assert with_nvlink["rdma"] + with_nvlink["scaleup"] == rdma_only["rdma"]
