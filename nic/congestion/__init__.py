"""Programmable congestion control: the DOCA-PCC-style plug-in API, built-ins and plug-ins.

Import from here: ``make_cc``, ``CC_ALGORITHMS``, ``CCEvent``, ``FlowCC``, ``CongestionControl``,
the receiver helpers ``CnpGenerator`` (DCQCN) and ``ReceiverCredit`` (RCCC), and ``load_plugin``.
Importing the package registers the built-ins: none, dcqcn, hpcc, timely, swift, nscc, rccc.
"""

from __future__ import annotations

from podsim.nic.congestion.api import (
    REQ_PATH_CHANGE,
    REQ_PROBE,
    CCEvent,
    CongestionControl,
    CongestionControlError,
    FlowCC,
    IntHop,
)
from podsim.nic.congestion.dcqcn import DCQCN, CnpGenerator
from podsim.nic.congestion.hpcc import HPCC
from podsim.nic.congestion.none import NoCC
from podsim.nic.congestion.nscc import NSCC
from podsim.nic.congestion.plugin import GuardedCC, PluginError, check_flow, load_plugin
from podsim.nic.congestion.rccc import RCCC, ReceiverCredit
from podsim.nic.congestion.registry import CC_ALGORITHMS, cc_parameters, make_cc
from podsim.nic.congestion.swift import Swift
from podsim.nic.congestion.timely import Timely

__all__ = [
    "CC_ALGORITHMS",
    "DCQCN",
    "HPCC",
    "NSCC",
    "RCCC",
    "REQ_PATH_CHANGE",
    "REQ_PROBE",
    "CCEvent",
    "CnpGenerator",
    "CongestionControl",
    "CongestionControlError",
    "FlowCC",
    "GuardedCC",
    "IntHop",
    "NoCC",
    "PluginError",
    "ReceiverCredit",
    "Swift",
    "Timely",
    "cc_parameters",
    "check_flow",
    "load_plugin",
    "make_cc",
]
