"""The flow-level engine core: constraints and routes of a topology (:mod:`fabric.flow.paths`),
wire framing (:mod:`fabric.flow.wire`), the fluid simulator (:mod:`fabric.flow.sim`) and the
congestion-control efficiency table (:mod:`fabric.flow.cc`) and link faults as capacity changes
(:mod:`podsim.fabric.flow.faults`)."""

from __future__ import annotations

from podsim.fabric.flow.cc import CC_EFFICIENCY, cc_efficiency
from podsim.fabric.flow.faults import FLOW_FAULT_KINDS, FlowFaults
from podsim.fabric.flow.paths import FlowPaths, FlowRouteError, Route, canonical_name
from podsim.fabric.flow.sim import FlowSim
from podsim.fabric.flow.wire import goodput_fraction, packets, wire_bytes

__all__ = [
    "CC_EFFICIENCY",
    "FLOW_FAULT_KINDS",
    "FlowFaults",
    "FlowPaths",
    "FlowRouteError",
    "FlowSim",
    "Route",
    "canonical_name",
    "cc_efficiency",
    "goodput_fraction",
    "packets",
    "wire_bytes",
]
