"""PD-disaggregated inference serving: requests, KV-cache sizes, instance timing, the graph.

Modules: ``kv`` (KV-cache bytes per token by attention design: MLA, GQA, hybrid), ``models``
(serving presets: parameters, attention, context), ``perf`` (prefill FLOP model and decode
memory-bandwidth model of an instance), ``exchange`` (the TP all-reduces and EP
dispatch/combine inside an instance, put on the fabric), ``requests`` (Poisson arrivals or a
CSV), ``builder`` (the operation graph: prefill, KV transfer over the fabric, continuously
batched decode) and ``metrics`` (per-request TTFT/TPOT table and percentiles from a run's spans).
"""

from __future__ import annotations

from podsim.workloads.serving.builder import KV_MODES, ServingPlan, build_serving_graph
from podsim.workloads.serving.exchange import InstanceComm
from podsim.workloads.serving.kv import ATTENTION_KINDS, Attention
from podsim.workloads.serving.metrics import requests_table, serving_summary
from podsim.workloads.serving.models import SERVING_MODELS, ServingModel, get_serving_model
from podsim.workloads.serving.perf import Gpu, InstancePerf
from podsim.workloads.serving.requests import (
    RequestClass,
    RequestError,
    Requests,
    poisson_requests,
    read_requests_csv,
)

__all__ = [
    "ATTENTION_KINDS",
    "KV_MODES",
    "SERVING_MODELS",
    "Attention",
    "Gpu",
    "InstanceComm",
    "InstancePerf",
    "RequestClass",
    "RequestError",
    "Requests",
    "ServingModel",
    "ServingPlan",
    "build_serving_graph",
    "get_serving_model",
    "poisson_requests",
    "read_requests_csv",
    "requests_table",
    "serving_summary",
]
