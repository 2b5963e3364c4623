"""Where the scenario layer finds the other packages' registries.

Scenario names (topology builders, cluster presets, PHY profiles, congestion-control algorithms,
path selectors, node layouts, model presets, workload patterns, engines) are checked against the
:class:`podsim.fabric.registry.Registry` objects that the packages below ``scenarios`` expose. This
module is the one place that knows which module holds which registry, so that a registry that
moves or is renamed costs one line here.
"""

from __future__ import annotations

import importlib

from podsim.fabric.registry import Registry

__all__ = ["KINDS", "available", "check_name", "get_registry"]

#: kind -> (module, attribute) of its registry.
KINDS: dict[str, tuple[str, str]] = {
    "topology": ("podsim.fabric.topology", "TOPOLOGIES"),
    # presets are TOPOLOGIES entries (described "preset: ...")
    "cluster preset": ("podsim.fabric.topology", "TOPOLOGIES"),
    "PHY profile": ("podsim.fabric.phy", "PHYS"),
    "rank mapping": ("podsim.fabric.rankmap", "RANK_MAPS"),
    "congestion control": ("podsim.nic.congestion", "CC_ALGORITHMS"),
    "path selector": ("podsim.nic.transport.selectors", "PATH_SELECTORS"),
    "node layout": ("podsim.nic.pcie", "NODE_LAYOUTS"),
    "NIC model": ("podsim.nic", "NIC_MODELS"),
    "model preset": ("podsim.workloads.models", "MODELS"),
    "dispatch mode": ("podsim.workloads.dispatch", "MODES"),
    "expert placement": ("podsim.workloads.placement", "PLACEMENTS"),
    "expert popularity": ("podsim.workloads.gating", "POPULARITY"),
    "workload": ("podsim.workloads.catalog", "WORKLOADS"),
    # the WORKLOADS entries defined in podsim.workloads.synthetic (see _synthetic_patterns)
    "synthetic pattern": ("podsim.workloads.catalog", "WORKLOADS"),
    "engine": ("podsim.scenarios.engines", "ENGINES"),
    "collective": ("podsim.workloads.collectives", "COLLECTIVES"),
    "pipeline schedule": ("podsim.workloads.training.schedule", "SCHEDULES"),
    "GPU": ("podsim.workloads.training.gpu", "GPUS"),
    "serving model": ("podsim.workloads.serving.models", "SERVING_MODELS"),
}

_PATTERNS: Registry | None = None


def _synthetic_patterns() -> Registry:
    """The WORKLOADS entries defined in ``workloads.synthetic`` (uniform, permutation, incast,
    ring all-reduce): the names ``workload.synthetic.pattern`` accepts."""
    global _PATTERNS
    if _PATTERNS is None:
        workloads = get_registry("workload")
        reg: Registry = Registry("synthetic pattern")
        for name, desc in workloads.describe():
            fn = workloads.get(name)
            if getattr(fn, "__module__", "") == "podsim.workloads.synthetic":
                reg.add(name, fn, desc)
        _PATTERNS = reg
    return _PATTERNS


def get_registry(kind: str) -> Registry:
    """The registry of ``kind`` (a key of :data:`KINDS`)."""
    if kind == "synthetic pattern":
        return _synthetic_patterns()
    module, attr = KINDS[kind]
    return getattr(importlib.import_module(module), attr)


def available() -> dict[str, Registry]:
    """Every kind with its registry."""
    return {kind: get_registry(kind) for kind in KINDS}


def check_name(kind: str, name: str) -> str:
    """``name`` if the ``kind`` registry knows it.

    Raises :class:`podsim.fabric.registry.UnknownNameError` (a ``ValueError``) with a did-you-mean.
    """
    reg = get_registry(kind)
    if name not in reg:
        reg.get(name)  # raises with the registry's did-you-mean message
    return name
