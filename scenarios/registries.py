"""Where the scenario layer finds the other packages' registries.

Scenario names (topology builders, cluster presets, PHY profiles, congestion-control algorithms,
path selectors, node layouts, model presets, workload patterns, engines) are checked against the
:class:`fabric.registry.Registry` objects that the packages below ``scenarios`` expose. This
module is the one place that knows which module holds which registry, so that a registry that
moves or is renamed costs one line here. A registry whose module has not landed yet is reported
as absent (``None``): the schema then accepts any name of that kind and the build step fails with
a clear message if the name is really needed.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any

from fabric.registry import Registry

__all__ = ["KINDS", "PRELOAD", "available", "check_name", "get_registry"]

#: kind -> candidate (module, attribute) locations, first found wins.
KINDS: dict[str, list[tuple[str, str]]] = {
    "topology": [("fabric.topology", "TOPOLOGIES")],
    # presets are TOPOLOGIES entries (described "preset: ..."); a separate CLUSTERS wins if any
    "cluster preset": [("fabric.topology", "CLUSTERS"), ("fabric.topology", "TOPOLOGIES")],
    "PHY profile": [("fabric.phy", "PHYS")],
    "rank mapping": [("fabric.rankmap", "RANK_MAPS")],
    "congestion control": [
        ("nic.congestion", "CC_ALGORITHMS"),
        ("nic.congestion.registry", "CC_ALGORITHMS"),
        ("nic", "CC_ALGORITHMS"),
    ],
    "path selector": [
        ("nic.transport.selectors", "PATH_SELECTORS"),
        ("nic", "PATH_SELECTORS"),
    ],
    "node layout": [("nic.pcie", "NODE_LAYOUTS"), ("nic", "NODE_LAYOUTS")],
    "NIC model": [("nic", "NIC_MODELS"), ("nic.models", "NIC_MODELS")],
    "model preset": [("workloads.models", "MODELS"), ("workloads", "MODELS")],
    "dispatch mode": [("workloads.dispatch", "MODES"), ("workloads", "DISPATCH_MODES")],
    "expert placement": [("workloads.placement", "PLACEMENTS"), ("workloads", "PLACEMENTS")],
    "expert popularity": [("workloads.gating", "POPULARITY"), ("workloads", "POPULARITY")],
    "workload": [("workloads.catalog", "WORKLOADS"), ("workloads", "WORKLOADS")],
    # the synthetic fabric patterns of WORKLOADS (see _synthetic_patterns)
    "synthetic pattern": [("workloads.synthetic", "PATTERNS"), ("workloads", "PATTERNS")],
    "engine": [("scenarios.engines", "ENGINES")],
}

#: Packages whose modules register built-ins on import; imported whole before a lookup, so a
#: registry found in ``pkg.registry`` also lists the algorithms defined in its siblings.
PRELOAD: dict[str, list[str]] = {
    "congestion control": ["nic.congestion"],
    "path selector": ["nic.transport.selectors"],
    "topology": ["fabric.superpod"],
    "cluster preset": ["fabric.superpod"],
}


def _import(module: str) -> Any | None:
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        # Only "this module has not landed yet" means absent; a missing dependency *inside*
        # an existing module is a real error and must surface.
        if exc.name and (module == exc.name or module.startswith(exc.name + ".")):
            return None
        raise


def _preload(package: str) -> None:
    mod = _import(package)
    if mod is None or not hasattr(mod, "__path__"):
        return
    for info in pkgutil.iter_modules(mod.__path__):
        if not info.name.startswith("_"):
            _import(f"{package}.{info.name}")


_PATTERNS: Registry | None = None


def _synthetic_patterns() -> Registry | None:
    """The WORKLOADS entries defined in ``workloads.synthetic`` (uniform, permutation, incast,
    ring all-reduce): the names ``workload.synthetic.pattern`` accepts."""
    global _PATTERNS
    if _PATTERNS is None:
        workloads = get_registry("workload")
        if workloads is None:
            return None
        reg: Registry = Registry("synthetic pattern")
        for name, desc in workloads.describe():
            fn = workloads.get(name)
            if getattr(fn, "__module__", "") == "workloads.synthetic":
                reg.add(name, fn, desc)
        _PATTERNS = reg
    return _PATTERNS


def get_registry(kind: str) -> Registry | None:
    """The registry of ``kind`` (a key of :data:`KINDS`), or ``None`` if not available yet."""
    for package in PRELOAD.get(kind, ()):
        _preload(package)
    if kind == "synthetic pattern":
        found = _first(kind)
        return found if found is not None else _synthetic_patterns()
    return _first(kind)


def _first(kind: str) -> Registry | None:
    for module, attr in KINDS[kind]:
        mod = _import(module)
        if mod is None:
            continue
        reg = getattr(mod, attr, None)
        if isinstance(reg, Registry):
            return reg
    return None


def available() -> dict[str, Registry | None]:
    """Every kind with its registry (``None`` where the owning module has not landed)."""
    return {kind: get_registry(kind) for kind in KINDS}


def check_name(kind: str, name: str) -> str:
    """``name`` if the ``kind`` registry knows it (or no such registry exists yet).

    Raises :class:`fabric.registry.UnknownNameError` (a ``ValueError``) with a did-you-mean.
    """
    reg = get_registry(kind)
    if reg is not None and name not in reg:
        reg.get(name)  # raises with the registry's did-you-mean message
    return name
