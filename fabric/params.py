"""Device parameters declared once, where the model reads them.

A device's config is a frozen dataclass (``SwitchConfig``, ``NicConfig``, ``PhyProfile``); each
field that a scenario may set is declared with :func:`param`: its scenario key (dotted for a
nested section, e.g. ``ecn.kmin``), the kind of value (which fixes its unit and how a file writes
it), a description, and the source of its default (``[S]`` a cited source, ``[E]`` an estimate).
The scenario schema's device sections, ``podsim docs`` and the mapping from a scenario to the
device object are all generated from these declarations (podsim.scenarios.input.devices), so a
parameter exists once. Fields with ``key=None`` are set by the simulator itself (e.g. a PCIe DMA
cap that changes with the traffic) and say so in ``doc``.

This module is standard-library only, so every layer may use it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["KINDS", "ParamSpec", "from_mapping", "param", "params_of", "section"]

#: value kinds -> (SI unit, how a scenario file writes one)
KINDS: dict[str, tuple[str, str]] = {
    "size": ("bytes", "4KiB"),
    "time": ("s", "2us"),
    "rate": ("bit/s", "400Gbps"),
    "packet_rate": ("packets/s", "400Mpps"),
    "length": ("m", "5m"),
    "int": ("", "7"),
    "count": ("", "4096"),
    "float": ("", "0.5"),
    "fraction": ("", "0.2"),
    "bool": ("", "true"),
    "choice": ("", "a listed value"),
    "name": ("", "a registered name"),
    "params": ("", "{key: value}"),
    "section": ("", "{key: value} of another device config"),
}


@dataclass(frozen=True)
class ParamSpec:
    """One declared parameter of a device config (see the module docstring)."""

    field: str
    key: str | None
    kind: str
    doc: str
    source: str
    default: Any
    #: ``choice``: file value -> model value (e.g. ``{"go-back-n": "gbn"}``)
    choices: dict[str, Any] | None = None
    #: ``name``: the registry kind the name is checked against (podsim list)
    registry: str | None = None
    #: the value may be null (None)
    optional: bool = False
    #: lower bound (inclusive unless ``exclusive``) for numbers
    minimum: float | None = None
    exclusive: bool = False
    #: ``section``: the device config (a dataclass declared with :func:`param`) whose
    #: parameters the value holds, e.g. a node layout's ``nic_dma`` -> ``NicDma``
    section: type | None = None


def param(
    default: Any = dataclasses.MISSING,
    *,
    key: str | None,
    kind: str,
    doc: str,
    source: str = "",
    choices: dict[str, Any] | None = None,
    registry: str | None = None,
    optional: bool = False,
    minimum: float | None = None,
    exclusive: bool = False,
    default_factory: Any = dataclasses.MISSING,
    section: type | None = None,
) -> Any:
    """A dataclass field with its parameter declaration in ``metadata["param"]``."""
    if kind not in KINDS:
        raise ValueError(f"unknown parameter kind {kind!r}; expected one of {sorted(KINDS)}")
    if (kind == "section") != (section is not None):
        raise ValueError("a 'section' parameter names its device config (section=...), only it")
    meta = {
        "param": {
            "key": key, "kind": kind, "doc": doc, "source": source, "choices": choices,
            "registry": registry, "optional": optional, "minimum": minimum,
            "exclusive": exclusive, "section": section,
        }
    }  # fmt: skip
    if default_factory is not dataclasses.MISSING:
        return dataclasses.field(default_factory=default_factory, metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def section(cls: type, key: str, doc: str, source: str) -> Any:
    """A parameter whose value is device config ``cls`` (a mapping of its keys in a file; a
    fresh default ``cls()`` per instance), e.g. a node layout's ``nic_dma``."""
    return param(default_factory=cls, key=key, kind="section", section=cls, doc=doc, source=source)


def params_of(cls: type) -> list[ParamSpec]:
    """The declared parameters of dataclass ``cls``, in field order. Every field must be
    declared: an undeclared field is a ValueError (a parameter nobody could set or read about)."""
    out = []
    for f in dataclasses.fields(cls):
        meta = f.metadata.get("param")
        if meta is None:
            raise ValueError(f"{cls.__name__}.{f.name} has no parameter declaration (param())")
        if f.default is not dataclasses.MISSING:
            default = f.default
        elif f.default_factory is not dataclasses.MISSING:
            default = f.default_factory()
        else:
            default = dataclasses.MISSING
        out.append(ParamSpec(field=f.name, default=default, **meta))
    return out


def from_mapping(cls: type, values: Any, what: str) -> Any:
    """Build device config ``cls`` from a mapping of field names to values, where quantities
    may be human strings (``"150KB"``, ``"600ns"``, ``"400Mpps"``), parsed by each field's
    declared kind; a ``section`` parameter given as a mapping builds its device config the same
    way. An unknown field is a ValueError naming ``what`` and the fields."""
    from podsim.fabric import units

    specs = {p.field: p for p in params_of(cls)}
    if not isinstance(values, Mapping):
        raise ValueError(
            f"the {what} must be a mapping of its fields ({', '.join(specs)}); got {values!r}"
        )
    unknown = sorted(set(values) - set(specs))
    if unknown:
        raise ValueError(f"unknown {what} key(s) {unknown}; expected some of {sorted(specs)}")
    parse = {"size": lambda v: int(units.parse_size(v)), "time": units.parse_time,
             "rate": units.parse_rate, "packet_rate": units.parse_packet_rate,
             "length": units.parse_length}  # fmt: skip
    out: dict[str, Any] = {}
    for key, val in values.items():
        spec = specs[key]
        if spec.section is not None and isinstance(val, Mapping):
            out[key] = from_mapping(spec.section, val, f"{what} {key}")
            continue
        kind = spec.kind
        out[key] = parse[kind](val) if kind in parse and isinstance(val, str) else val
    return cls(**out)
