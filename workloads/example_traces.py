"""Writes the small example traces shipped in ``scenarios/library/traces/`` (run
``python -m podsim.workloads.example_traces [DIR]``; tests check the shipped files are what this
writes). They are made up here, to exercise the importers, and are no measurement.

``chakra-4rank/trace.<r>.et`` (:mod:`podsim.workloads.chakra`), ranks r = 0 .. 3:

====  ================  ==============================================================
id    type              what
====  ================  ==============================================================
1     COMP_NODE         "forward", 100 + 10 r us (rank 3 is the slowest)
2     COMM_COLL_NODE    all-reduce of 1 MiB over all ranks, after 1
3     COMP_NODE         "backward", 50 us, after 2
4     COMM_SEND_NODE    64 KiB to rank r + 1 (mod 4), tag 7, after 3
5     COMM_RECV_NODE    64 KiB from rank r - 1 (mod 4), tag 7, after 3
6     COMP_NODE         "optimizer", 20 us, after 5 (data) and 4 (control)
====  ================  ==============================================================

``kineto-2rank/kineto.<r>.json`` (:mod:`podsim.workloads.kineto`), ranks r = 0, 1; times in us:

=========  ======  ===================================================================
stream     ts      kernel
=========  ======  ===================================================================
7          0       ``sm90_xmma_gemm`` 200 us (rank 1: 250 us, a slow rank)
13         200|250 ``ncclDevKernel_AllReduce_Sum_f32_RING_LL``: 262144 Float (1 MiB),
                   group [0, 1] (recorded on the kernel's args)
7          210|260 ``vectorized_elementwise_kernel`` 30 us
13         400     ``ncclDevKernel_AllGather_RING_LL``: 131072 BFloat16 in per rank, only
                   "Group size" 2 recorded, the args on the ``record_param_comms`` cpu_op
=========  ======  ===================================================================
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from podsim.workloads.chakra import (
    COMM_COLL_NODE,
    COMM_RECV_NODE,
    COMM_SEND_NODE,
    COMP_NODE,
    EtNode,
    write_et,
)

__all__ = ["DEFAULT_DIR", "write_chakra_example", "write_example_traces", "write_kineto_example"]

DEFAULT_DIR = Path(__file__).resolve().parent.parent / "scenarios" / "library" / "traces"

CHAKRA_RANKS = 4
ALL_REDUCE_BYTES = 1 << 20
P2P_BYTES = 1 << 16
P2P_TAG = 7


def _chakra_rank(r: int) -> list[EtNode]:
    p = CHAKRA_RANKS
    return [
        EtNode(1, "forward", COMP_NODE, duration_micros=100 + 10 * r),
        EtNode(
            2,
            "all_reduce",
            COMM_COLL_NODE,
            data_deps=[1],
            attrs={"comm_type": 0, "comm_size": ALL_REDUCE_BYTES, "is_cpu_op": False},
        ),
        EtNode(3, "backward", COMP_NODE, data_deps=[2], duration_micros=50),
        EtNode(
            4,
            "send",
            COMM_SEND_NODE,
            data_deps=[3],
            attrs={
                "comm_dst": ("int32", (r + 1) % p),
                "comm_tag": ("int32", P2P_TAG),
                "comm_size": P2P_BYTES,
            },
        ),
        EtNode(
            5,
            "recv",
            COMM_RECV_NODE,
            data_deps=[3],
            attrs={
                "comm_src": ("int32", (r - 1) % p),
                "comm_tag": ("int32", P2P_TAG),
                "comm_size": P2P_BYTES,
            },
        ),
        EtNode(6, "optimizer", COMP_NODE, data_deps=[5], ctrl_deps=[4], duration_micros=20),
    ]


def write_chakra_example(out: Path) -> list[Path]:
    """The 4-rank Chakra example (module docstring) as ``out/trace.<r>.et``."""
    out.mkdir(parents=True, exist_ok=True)
    files = []
    for r in range(CHAKRA_RANKS):
        f = out / f"trace.{r}.et"
        write_et(f, _chakra_rank(r))
        files.append(f)
    return files


def _kernel(name: str, ts: float, dur: float, stream: int, **args: object) -> dict[str, object]:
    return {
        "ph": "X",
        "cat": "kernel",
        "name": name,
        "pid": 0,
        "tid": stream,
        "ts": ts,
        "dur": dur,
        "args": {"device": 0, "stream": stream, **args},
    }


def _kineto_rank(r: int) -> dict[str, object]:
    gemm = 200.0 if r == 0 else 250.0
    ar_dur = 150.0 if r == 0 else 100.0  # recorded (ignored: replayed on the fabric)
    events: list[dict[str, object]] = [
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 0, "dur": 5},
        _kernel("sm90_xmma_gemm_bf16bf16_bf16f32", 0.0, gemm, 7),
        _kernel(
            "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
            gemm,
            ar_dur,
            13,
            **{
                "Collective name": "allreduce",
                "In msg nelems": 262144,
                "Out msg nelems": 262144,
                "dtype": "Float",
                "Group size": 2,
                "Process Group Name": "0",
                "Process Group Ranks": "[0, 1]",
            },
        ),
        _kernel("vectorized_elementwise_kernel", gemm + 10.0, 30.0, 7),
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": "record_param_comms",
            "pid": 1,
            "tid": 1,
            "ts": 390.0,
            "dur": 4.0,
            "args": {
                "External id": 42,
                "Collective name": "_allgather_base",
                "In msg nelems": 131072,
                "Out msg nelems": 262144,
                "dtype": "BFloat16",
                "Group size": 2,
            },
        },
        _kernel(
            "ncclDevKernel_AllGather_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
            400.0,
            40.0,
            13,
            **{"External id": 42},
        ),
    ]
    return {
        "schemaVersion": 1,
        "distributedInfo": {"backend": "nccl", "rank": r, "world_size": 2},
        "traceEvents": events,
    }


def write_kineto_example(out: Path) -> list[Path]:
    """The 2-rank Kineto example (module docstring) as ``out/kineto.<r>.json``."""
    out.mkdir(parents=True, exist_ok=True)
    files = []
    for r in range(2):
        f = out / f"kineto.{r}.json"
        f.write_text(json.dumps(_kineto_rank(r), indent=1) + "\n")
        files.append(f)
    return files


def write_example_traces(root: Path = DEFAULT_DIR) -> list[Path]:
    """Both examples under ``root`` (``chakra-4rank/``, ``kineto-2rank/``)."""
    return write_chakra_example(root / "chakra-4rank") + write_kineto_example(root / "kineto-2rank")


if __name__ == "__main__":
    for f in write_example_traces(Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_DIR):
        print(f)
