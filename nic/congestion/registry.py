"""The congestion-control registry and the one factory the NIC and scenarios use.

Built-ins register into :data:`CC_ALGORITHMS` by name (``podsim list`` prints
``CC_ALGORITHMS.describe()``); :func:`make_cc` builds an instance from a name or, with the
explicit opt-in, a ``"module:Class"`` plug-in spec.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

from podsim.fabric.registry import Registry
from podsim.nic.congestion.api import CongestionControl
from podsim.nic.congestion.plugin import GuardedCC, load_plugin

__all__ = ["CC_ALGORITHMS", "cc_parameters", "make_cc"]

#: the built-ins register on the registry's first lookup
CC_ALGORITHMS: Registry[type[CongestionControl]] = Registry(
    "congestion control",
    builtins=tuple(
        f"podsim.nic.congestion.{m}"
        for m in ("none", "dcqcn", "hpcc", "timely", "swift", "nscc", "rccc")
    ),
)


def cc_parameters(cls: type[CongestionControl]) -> dict[str, Any]:
    """The keyword parameters of an algorithm class and their defaults."""
    sig = inspect.signature(cls.__init__)
    out: dict[str, Any] = {}
    for p in list(sig.parameters.values())[1:]:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        out[p.name] = None if p.default is p.empty else p.default
    return out


def make_cc(
    spec: str,
    params: Mapping[str, Any] | None = None,
    *,
    allow_plugins: bool = False,
    guard: bool | None = None,
) -> CongestionControl:
    """An algorithm instance from a registered name (``"dcqcn"``) or a plug-in spec
    (``"pkg.mod:Class"``, only with ``allow_plugins``), built with ``params``.

    Plug-ins always run inside :class:`~podsim.nic.congestion.plugin.GuardedCC`; built-ins only when
    ``guard=True`` (useful while debugging, it costs a check per event).
    """
    params = dict(params or {})
    if ":" in spec:
        cls = load_plugin(spec, allow=allow_plugins)
        label = spec
        guard = True if guard is None else guard
    else:
        cls = CC_ALGORITHMS.get(spec)
        label = spec
        guard = bool(guard)
    accepted = cc_parameters(cls)
    has_kwargs = any(
        p.kind is p.VAR_KEYWORD for p in inspect.signature(cls.__init__).parameters.values()
    )
    unknown = sorted(set(params) - set(accepted))
    if unknown and not has_kwargs:
        raise ValueError(
            f"unknown parameter(s) {', '.join(map(repr, unknown))} for congestion control "
            f"{label!r}; accepted: {', '.join(sorted(accepted)) or '(none)'}"
        )
    try:
        cc = cls(**params)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"bad parameters for congestion control {label!r}: {exc}") from exc
    return GuardedCC(cc, label) if guard else cc
