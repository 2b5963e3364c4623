"""podsim workloads: MoE expert dispatch on NumPy and the traffic traces it produces.

Modules, one job each: ``models`` (MoE presets), ``gating`` (router top-k, limited routing,
popularity/skew models, replay), ``placement`` (experts on ranks, EPLB-style replicas),
``layout`` (DeepEP's get_dispatch_layout, stored sparsely), ``precision`` (FP8 E4M3 / BF16
wire formats), ``dispatch`` and ``combine`` (the kernels on real token tensors), ``parallel``
(their thread pool), ``workspace`` (their reusable buffers, as DeepEP's Buffer), ``compute``
(expert grouped-GEMM time), ``traffic`` (per-mode messages from a layout), ``kernel_traffic``
(the same messages read from the buffers the dispatch and combine kernels fill, checked against
the counts), ``trace`` (schema, validation, Parquet/CSV),
``moe`` (moe_layer_trace), ``synthetic`` (fabric test patterns), ``splits`` (all-to-all split
matrices), ``catalog`` (the WORKLOADS registry), ``graph`` (the operation graph) and the
trace importers ``chakra`` (MLCommons Chakra ``.et``) and ``kineto`` (PyTorch profiler JSON),
with ``trace_import`` (what they share) and ``example_traces`` (writes the shipped examples).

Import rule: workloads imports none of the other podsim packages, with one exception decided by
the lead: the stdlib-only leaf modules ``podsim.fabric.registry`` (the project's one Registry class)
and ``podsim.fabric.units``, which hold no simulation code.
"""

from __future__ import annotations

from podsim.workloads.catalog import WORKLOADS, build_workload
from podsim.workloads.models import MODELS, MoEModel, get_model
from podsim.workloads.moe import moe_layer, moe_layer_trace
from podsim.workloads.trace import (
    TraceError,
    compute_table,
    read_trace,
    validate_trace,
    write_trace,
)
from podsim.workloads.workspace import Workspace

__all__ = [
    "MODELS",
    "WORKLOADS",
    "MoEModel",
    "TraceError",
    "Workspace",
    "build_workload",
    "compute_table",
    "get_model",
    "moe_layer",
    "moe_layer_trace",
    "read_trace",
    "validate_trace",
    "write_trace",
]
