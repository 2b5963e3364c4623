"""``WORKLOADS``: every trace source by name, the scenario layer's one entry point.

``WORKLOADS.get(name)(**params)`` returns a validated trace (podsim.workloads.trace). Parameters are
those of the function behind each name; :func:`build_workload` adds the registry's
did-you-mean error for unknown names and a clear error for unknown parameters.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import pandas as pd
from podsim.fabric.registry import Registry
from podsim.workloads.moe import moe_layer_trace
from podsim.workloads.splits import splits_trace
from podsim.workloads.synthetic import incast, permutation, ring_allreduce, uniform_all_to_all
from podsim.workloads.trace import read_trace

__all__ = ["WORKLOADS", "build_workload"]

WORKLOADS: Registry[Callable[..., pd.DataFrame]] = Registry("workload")
WORKLOADS.add("moe", moe_layer_trace, "MoE dispatch + combine of a model preset (moe_layer_trace)")
WORKLOADS.add("uniform", uniform_all_to_all, "uniform all-to-all between all rank pairs")
WORKLOADS.add("permutation", permutation, "each rank sends to one partner (random cycle)")
WORKLOADS.add("incast", incast, "many ranks send to one receiver")
WORKLOADS.add("ring-allreduce", ring_allreduce, "the 2(R-1) steps of a ring all-reduce")
WORKLOADS.add("splits", splits_trace, "an all-to-all split matrix from .npy or CSV")
WORKLOADS.add("trace-file", read_trace, "a trace written before (.parquet or .csv)")


def build_workload(name: str, **params: Any) -> pd.DataFrame:
    """The trace of workload ``name`` with ``params``; unknown parameters raise ValueError."""
    fn = WORKLOADS.get(name)
    sig = inspect.signature(fn)
    unknown = sorted(set(params) - set(sig.parameters))
    if unknown:
        raise ValueError(
            f"workload {name!r} has no parameter(s) {', '.join(unknown)}; "
            f"it takes {', '.join(sig.parameters)}"
        )
    return fn(**params)
