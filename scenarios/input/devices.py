"""Scenario sections generated from the device configs, and the way back.

A device config (``podsim.nic.nic.NicConfig``, ``podsim.fabric.switch.SwitchConfig``) declares
each parameter once with :func:`podsim.fabric.params.param`. :func:`section_model` turns those
declarations into the pydantic model of the scenario section (``cluster.nic``,
``cluster.switch``): one field per declared scenario key, nested sections for dotted keys
(``ecn.kmin``) and for parameters that hold another device config (kind ``section``, e.g. a
node layout's ``nic_dma``), the value type from the parameter's kind (so quantities take
``"150KB"``), the default from the dataclass and a description that ends with the default's
source. After
parsing, the section builds the device config itself, so the device's own checks are the
section's checks and their messages name the scenario key. :func:`device_config` maps a parsed
section to the device object; :func:`section_values` maps a device object (e.g. a NIC preset)
back to the file's keys and values.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any, Literal

from podsim.fabric.params import ParamSpec, params_of
from pydantic import BaseModel, Field, ValidationError, create_model, model_validator

__all__ = ["device_config", "section_model", "section_values", "settable"]


def settable(cls: type) -> list[ParamSpec]:
    """The parameters of ``cls`` a scenario sets (those with a scenario key)."""
    return [p for p in params_of(cls) if p.key is not None]


def _description(p: ParamSpec) -> str:
    return f"{p.doc} (source: {p.source})" if p.source else p.doc


def _field_default(p: ParamSpec) -> Any:
    if p.kind == "choice" and p.choices:
        return next(k for k, v in p.choices.items() if v == p.default)
    if isinstance(p.default, Mapping):
        return Field(default_factory=dict, description=_description(p))
    return p.default


def _to_file(p: ParamSpec, value: Any) -> Any:
    """A model value as the file writes it (choices map back; mappings copied)."""
    if p.kind == "choice" and p.choices:
        return next(k for k, v in p.choices.items() if v == value)
    return dict(value) if isinstance(value, Mapping) else value


def section_model(
    cls: type,
    name: str,
    doc: str,
    *,
    types: Callable[[ParamSpec], Any],
    base: type[BaseModel],
    groups: Mapping[str, tuple[str, str]] = {},
    extra: Mapping[str, tuple[Any, Any]] = {},
    validators: Mapping[str, Any] = {},
    group_validators: Mapping[str, Mapping[str, Any]] = {},
    partial: bool = False,
) -> type[BaseModel]:
    """The pydantic model of the scenario section of device config ``cls``.

    ``types(spec)`` gives the annotated value type of a parameter; ``groups`` names the nested
    sections (``"ecn" -> ("EcnConfig", doc)``); ``extra`` adds section fields that are not device
    parameters (e.g. a preset name); ``validators`` / ``group_validators`` add pydantic
    validators (kept for their messages). The model checks a parsed section by building
    ``cls`` from it (:func:`device_config`). ``partial``: overrides of an existing device (every
    field optional, null keeps the device's value; no device built)."""
    specs = settable(cls)
    if partial:
        fields = {p.key: (types(p) | None, Field(None, description=_description(p)))
                  for p in specs}  # fmt: skip
        return create_model(  # type: ignore[call-overload]
            name, __base__=base, __doc__=doc, __validators__=dict(validators), **fields
        )
    top: dict[str, Any] = dict(extra)
    for group, (model_name, group_doc) in groups.items():
        fields = {}
        for p in specs:
            if p.key.startswith(group + "."):
                fields[p.key.split(".", 1)[1]] = (
                    types(p), Field(_field_default(p), description=_description(p))
                    if not isinstance(p.default, Mapping) else _field_default(p),
                )  # fmt: skip
        sub = create_model(  # type: ignore[call-overload]
            model_name, __base__=base, __doc__=group_doc,
            __validators__=dict(group_validators.get(group, {})), **fields,
        )  # fmt: skip
        top[group] = (sub, Field(default_factory=sub, description=group_doc.splitlines()[0]))
    for p in specs:
        if p.section is not None:  # a nested device config: its own generated section
            sub_name = name.removesuffix("Config") + "".join(w.title() for w in p.key.split("_"))
            sub = section_model(p.section, sub_name, p.doc, types=types, base=base)
            top[p.key] = (sub, Field(default_factory=sub, description=_description(p)))
            continue
        if "." in p.key:
            if p.key.split(".", 1)[0] not in groups:
                raise ValueError(f"{cls.__name__}.{p.field}: no group for key {p.key!r}")
            continue
        default = _field_default(p)
        if isinstance(default, type(Field())):
            top[p.key] = (types(p), default)
        else:
            top[p.key] = (types(p), Field(default, description=_description(p)))

    def _builds(self: BaseModel) -> BaseModel:
        try:
            device_config(cls, self)  # the device's own checks, messages naming scenario keys
        except ValueError as exc:
            raise _at_key(exc, self, [p.key for p in specs]) from None
        return self

    vals = {**validators, "_device_builds": model_validator(mode="after")(_builds)}
    return create_model(  # type: ignore[call-overload]
        name, __base__=base, __doc__=doc, __validators__=vals, **top
    )


def _at_key(exc: ValueError, section: BaseModel, keys: list[str]) -> ValueError:
    """A device check's error located at the one key its message names (so the scenario error
    names ``cluster.layout_params.nic_dma.read_tags``, not the section), else as it is."""
    text = str(exc)
    named = [k for k in keys if re.search(rf"(?<![\w.]){re.escape(k)}(?![\w.])", text)]
    if len(named) != 1:
        return exc
    key = named[0]
    return ValidationError.from_exception_data(
        type(section).__name__,
        [{"type": "value_error", "loc": tuple(key.split(".")), "input": _value(section, key),
          "ctx": {"error": text}}],
    )  # fmt: skip


def _value(section: Any, key: str) -> Any:
    for part in key.split("."):
        section = getattr(section, part)
    return section


def device_config(cls: type, section: Any, **runtime: Any) -> Any:
    """The device config ``cls`` of a parsed scenario section; ``runtime`` sets the fields a
    scenario does not (e.g. ``allow_plugins``). A device check that fails is a ValueError whose
    message names the scenario key."""
    kwargs: dict[str, Any] = dict(runtime)
    specs = settable(cls)
    for p in specs:
        v = _value(section, p.key)
        if p.section is not None:
            v = device_config(p.section, v)
        elif p.kind == "choice" and p.choices:
            v = p.choices[v]
        elif isinstance(v, Mapping):
            v = dict(v)
        kwargs[p.field] = v
    try:
        return cls(**kwargs)
    except ValueError as exc:
        text = str(exc)
        for p in specs:  # "NIC config n_evs=70000: ..." -> "multipath.paths=70000: ..."
            text = re.sub(rf"^[\w ]*config {p.field}=", f"{p.key}=", text)
            text = re.sub(rf"\b{p.field}\b", p.key, text)
        raise ValueError(text) from None


def section_values(cls: type, config: Any) -> dict[str, Any]:
    """The scenario keys and file values of device config ``config`` (nested for dotted
    keys): what a preset fills into a section."""
    out: dict[str, Any] = {}
    for p in settable(cls):
        node = out
        *parents, leaf = p.key.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        value = getattr(config, p.field)
        node[leaf] = section_values(p.section, value) if p.section else _to_file(p, value)
    return out


def kind_literal(choices: Mapping[str, Any]) -> Any:
    """``Literal`` of a choice parameter's file values."""
    return Literal[tuple(choices)]  # type: ignore[valid-type]
