"""Traffic classes of a scenario: the fabric's classes and each message's class.

``cluster.traffic_classes`` (:class:`podsim.scenarios.input.schema.TrafficClassesConfig`) names
the classes and assigns message kinds to them. A message's kind follows from the workload and
the message's phase (:data:`podsim.scenarios.input.schema.TRAFFIC_KINDS`):

* ``moe``: every message is ``moe-low-latency`` in the deepep-low-latency mode, else
  ``moe-normal``;
* ``serving``: ``kv-transfer`` for the KV cache from prefill to decode; the instances' MoE
  exchanges (phases dispatch and combine) are ``moe-normal`` in prefill instances and
  ``moe-low-latency`` in decode instances (the DeepEP modes they model,
  :mod:`podsim.workloads.serving.exchange`), their TP all-reduces ``collective``; the prefill
  instances hold the first ``prefill.instances x prefill.nodes`` nodes' ranks;
* ``training``: the EP all-to-all (phases dispatch and combine) is ``moe-normal``, the TP, PP
  and DP traffic ``collective``;
* ``collective``, ``chakra``, ``kineto``: ``collective``;
* ``trace``: rows of the dispatch and combine phases are MoE traffic (low-latency when the
  trace records ``mode: deepep-low-latency``), the others ``other``;
* ``synthetic``: ``other``.

A workload has one kind of traffic unless it is a training step or a trace with several phases;
the classes then keep its kinds apart.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
from podsim.fabric.classes import TrafficClass, TrafficClasses

if TYPE_CHECKING:
    from podsim.scenarios.input.schema import Scenario

__all__ = ["fabric_classes", "message_classes", "message_kinds"]

_LL_MODE = "deepep-low-latency"


def fabric_classes(sc: Scenario) -> TrafficClasses | None:
    """The fabric's :class:`~podsim.fabric.classes.TrafficClasses`, or None with fewer than two
    classes (the plain single-queue fabric)."""
    tcs = sc.cluster.traffic_classes
    if tcs is None or len(tcs.classes) < 2:
        return None
    pfc = sc.cluster.switch.pfc.enabled
    return TrafficClasses(
        tuple(
            TrafficClass(
                c.name,
                priority=c.priority,
                weight=c.weight,
                pfc=pfc if c.pfc is None else c.pfc,
                ecn_kmin_bytes=c.ecn.kmin,
                ecn_kmax_bytes=c.ecn.kmax,
            )
            for c in tcs.classes
        )
    )


def message_kinds(sc: Scenario, trace: pd.DataFrame) -> np.ndarray:
    """The kind of every trace row (module docstring), as an object array."""
    wk = sc.workload.kind
    n = len(trace)
    moe_phase = trace["phase"].isin(("dispatch", "combine")).to_numpy() if n else np.zeros(0, bool)
    if wk == "moe":
        one = "moe-low-latency" if sc.workload.moe.mode == _LL_MODE else "moe-normal"  # type: ignore[union-attr]
        return np.full(n, one, dtype=object)
    if wk == "serving":
        w = sc.workload.serving
        assert w is not None
        per_node = int(trace.attrs["num_ranks"]) // w.num_nodes
        first_decode = w.prefill.instances * w.prefill.nodes * per_node
        src = trace["src_rank"].to_numpy()
        dst = trace["dst_rank"].to_numpy()
        exchange = np.where(src < first_decode, "moe-normal", "moe-low-latency")
        other = np.where((src < first_decode) & (dst >= first_decode), "kv-transfer", "collective")
        return np.where(moe_phase, exchange, other).astype(object)
    if wk == "synthetic":
        return np.full(n, "other", dtype=object)
    if wk == "training":
        return np.where(moe_phase, "moe-normal", "collective").astype(object)
    if wk == "trace":
        moe = "moe-low-latency" if trace.attrs.get("mode") == _LL_MODE else "moe-normal"
        return np.where(moe_phase, moe, "other").astype(object)
    return np.full(n, "collective", dtype=object)


def message_classes(sc: Scenario, trace: pd.DataFrame) -> np.ndarray | None:
    """Every trace row's class index (int64), or None without classes."""
    if fabric_classes(sc) is None:
        return None
    tcs = sc.cluster.traffic_classes
    assert tcs is not None
    of = tcs.class_of_kind()
    kinds = message_kinds(sc, trace)
    return np.fromiter((of[k] for k in kinds), dtype=np.int64, count=len(kinds))
