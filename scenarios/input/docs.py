"""The reference of every scenario key, generated from the pydantic models (``podsim docs``).

Each key of :class:`scenarios.input.schema.Scenario` (and of the sections below it) becomes one row:
its dotted path as written in a file or after ``--set`` (``cluster.nic.cc.name``), its type, its
default (in the human form ``podsim show`` prints), the SI unit the value is stored in, and the
field's ``description``. Quantity types say how they are written (``"400Gbps"``) through the
:class:`scenarios.input.schema.Quantity` marker; names checked against a registry say which ``podsim
list`` section holds the choices through :class:`scenarios.input.schema.NameOf`. Generated from the
code, the reference cannot drift from what the loader accepts.

``faults`` is a list of entries of several kinds; its rows read ``faults[].link (link_down,
link_degrade, ber)``: the key of one entry and the kinds that have it.
"""

from __future__ import annotations

import json
import types
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from annotated_types import Ge, Gt, Le, Lt, MaxLen, MinLen
from podsim.scenarios.errors import is_model, kind_tags
from podsim.scenarios.input.schema import NameOf, Quantity, Scenario
from pydantic import BaseModel, TypeAdapter
from pydantic.fields import FieldInfo

__all__ = [
    "TOP_LEVEL_EXTRAS",
    "KeyDoc",
    "md_cell",
    "missing_descriptions",
    "models",
    "preset_figures_markdown",
    "reference",
    "render",
]

#: Keys the loader reads before validation (scenarios/loader.py), not model fields.
TOP_LEVEL_EXTRAS = (
    (
        "include",
        "path or list of paths",
        "base scenario file(s) this one extends, relative to it; later files and this one win",
    ),
    (
        "variants",
        "mapping",
        "named override sets {NAME: {key.path: value}}; pick one with --set variant=NAME",
    ),
)

#: ``NameOf`` kind -> the ``podsim list`` section that lists the choices
_LIST_SECTION = {
    "topology": "topologies",
    "cluster preset": "topologies",
    "PHY profile": "phy",
    "NIC model": "nic",
    "node layout": "layouts",
    "congestion control": "cc",
    "path selector": "selectors",
    "expert popularity": "popularity",
    "model preset": "models",
    "dispatch mode": "dispatch",
    "expert placement": "placements",
    "synthetic pattern": "patterns",
    "engine": "engines",
    "rank mapping": "mappings",
}


@dataclass(frozen=True)
class KeyDoc:
    """One key of the reference."""

    path: str
    type: str
    default: str
    unit: str
    description: str
    section: bool = False  # a mapping of further keys (listed after it)


# --------------------------------------------------------------------------- types


def _alternatives(tp: Any, meta: tuple[Any, ...] = ()) -> list[tuple[Any, tuple[Any, ...]]]:
    """The concrete alternatives of an annotation, each with the metadata of the Annotated
    layers around it; unions flattened, ``None`` dropped."""
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        inner, *extra = typing.get_args(tp)
        return _alternatives(inner, (*meta, *extra))
    if origin is typing.Union or origin is types.UnionType:
        return [pair for arg in typing.get_args(tp) for pair in _alternatives(arg, meta)]
    if tp is type(None):
        return []
    return [(tp, meta)]


def _optional(tp: Any) -> bool:
    if typing.get_origin(tp) is typing.Annotated:
        return _optional(typing.get_args(tp)[0])
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        return any(_optional(a) for a in typing.get_args(tp))
    return tp is type(None)


def _full(info: FieldInfo) -> Any:
    """A field's annotation with the metadata pydantic moved off it put back."""
    if not info.metadata:
        return info.annotation
    return typing.Annotated[(info.annotation, *info.metadata)]


def _bounds(meta: tuple[Any, ...]) -> str:
    parts = []
    for m in meta:
        for cls, op, attr in ((Gt, ">", "gt"), (Ge, ">=", "ge"), (Lt, "<", "lt"), (Le, "<=", "le")):
            if isinstance(m, cls):
                parts.append(f"{op} {getattr(m, attr)}")
        if isinstance(m, MinLen):
            parts.append(f"at least {m.min_length} items")
        if isinstance(m, MaxLen):
            parts.append(f"at most {m.max_length} items")
    return ", ".join(dict.fromkeys(parts))


def _one_type(tp: Any, meta: tuple[Any, ...]) -> str:
    for m in meta:
        if isinstance(m, Quantity):
            return f"{m.kind} (e.g. {m.example})"
        if isinstance(m, NameOf):
            where = _LIST_SECTION.get(m.kind)
            text = f"{m.kind} name" + (f" (podsim list {where})" if where else "")
            return text + (" or module:Class" if m.plugin else "")
    origin = typing.get_origin(tp)
    if origin is typing.Literal:
        return "one of " + " | ".join(str(a) for a in typing.get_args(tp))
    if origin in (list, tuple):
        args = typing.get_args(tp)
        if args and all(is_model(a) for a, _ in _alternatives(args[0])):
            return "list of mappings"
        return f"list of {_type_text(args[0])}" if args else "list"
    if origin is dict or tp is dict:
        return "mapping"
    if is_model(tp):
        return "mapping (section)"
    names = {bool: "true/false", int: "integer", float: "number", str: "text", Path: "file path"}
    return names.get(tp, getattr(tp, "__name__", str(tp)))


def _type_text(tp: Any) -> str:
    texts = []
    for alt, meta in _alternatives(tp):
        text = _one_type(alt, meta)
        bounds = _bounds(meta)
        text += f", {bounds}" if bounds else ""
        if text not in texts:
            texts.append(text)
    text = " or ".join(texts) or "null"
    return text + (" or null" if _optional(tp) else "")


def _unit(tp: Any) -> str:
    units = [m.unit for _, meta in _alternatives(tp) for m in meta if isinstance(m, Quantity)]
    return units[0] if units else ""


def _shown(value: Any) -> str:
    """A default as ``podsim show`` prints it (JSON mode of the model)."""
    if value is None:
        return "null"
    if isinstance(value, str):
        return value or '""'
    return json.dumps(value)


def _default(info: FieldInfo, given: dict[str, Any] | None, name: str) -> str:
    """The default of a key: from ``given`` (the dump of the section's own default, which
    holds what a model validator fills in, e.g. the NIC preset's keys) when there is one."""
    if info.is_required():
        return "required"
    value = info.get_default(call_default_factory=True)
    if isinstance(value, BaseModel):
        return "(section)"
    if given is not None and name in given:
        return _shown(given[name])
    try:
        return _shown(TypeAdapter(_full(info)).dump_python(value, mode="json"))
    except Exception:  # a default the adapter cannot print (never expected): show it raw
        return _shown(value)


# --------------------------------------------------------------------------- walking


def _submodels(tp: Any) -> tuple[str, list[type[BaseModel]]]:
    """('', [models]) for a section, ('[]', [models]) for a list of entries, ('<name>',
    [model]) for a mapping of names to sections, else ('', [])."""
    alts = [a for a, _ in _alternatives(tp)]
    models = [a for a in alts if is_model(a)]
    if models:
        return "", models
    for alt in alts:
        if typing.get_origin(alt) is dict:
            value = typing.get_args(alt)[1]
            # a mapping of names to documented sections (e.g. cluster.phys)
            if is_model(value) and all(f.description for f in value.model_fields.values()):
                return "<name>", [value]
    for alt in alts:
        args = typing.get_args(alt) if typing.get_origin(alt) is list else ()
        entries = [a for a, _ in _alternatives(args[0]) if is_model(a)] if args else []
        if entries:
            return "[]", entries
    return "", []


def _rows(
    model: type[BaseModel], prefix: str, given: dict[str, Any] | None = None
) -> Iterator[KeyDoc]:
    """Rows of ``model``'s keys; ``given`` is the JSON dump of the section's default."""
    for name, info in model.model_fields.items():
        path = f"{prefix}{name}"
        suffix, subs = _submodels(info.annotation)
        yield KeyDoc(
            path=path,
            type=_type_text(_full(info)),
            default=_default(info, given, name),
            unit=_unit(_full(info)),
            description=info.description or "",
            section=bool(subs),
        )
        if len(subs) == 1 and not suffix:
            sub_given = (given or {}).get(name)
            if not isinstance(sub_given, dict):
                value = None if info.is_required() else info.get_default(call_default_factory=True)
                sub_given = value.model_dump(mode="json") if isinstance(value, BaseModel) else None
            yield from _rows(subs[0], f"{path}.", sub_given)
        elif suffix == "<name>":
            yield from _rows(subs[0], f"{path}.<name>.")
        elif subs:
            yield from _entry_rows(subs, f"{path}{suffix}.")


def _entry_rows(models: list[type[BaseModel]], prefix: str) -> Iterator[KeyDoc]:
    """A list whose entries are one of several models (told apart by ``kind``), or a section
    whose model another key selects: one row per key (and default, where they differ), with
    the kinds that have it."""
    seen: dict[tuple[str, str], tuple[KeyDoc, list[str]]] = {}
    for model in models:
        tags = kind_tags(model) or [model.__name__]
        for row in _rows(model, prefix):
            key = (row.path, row.default)
            if key in seen:
                seen[key][1].extend(t for t in tags if t not in seen[key][1])
            else:
                seen[key] = (row, list(tags))
    all_tags = [t for m in models for t in (kind_tags(m) or [m.__name__])]
    for row, tags in seen.values():
        if row.path.endswith(".kind"):
            yield KeyDoc(row.path, "one of " + " | ".join(all_tags), row.default, row.unit,
                         "what the entry is: " + ", ".join(all_tags))  # fmt: skip
        elif len(tags) == len(all_tags):
            yield row
        else:
            path = f"{row.path} ({', '.join(tags)})"
            yield KeyDoc(path, row.type, row.default, row.unit, row.description, row.section)


def reference(model: type[BaseModel] = Scenario) -> list[KeyDoc]:
    """Every key of ``model`` and its sections, in declaration order."""
    return list(_rows(model, ""))


def models(root: type[BaseModel] = Scenario) -> list[type[BaseModel]]:
    """Every model reachable from ``root`` (sections and list entries), root first."""
    found: list[type[BaseModel]] = []
    todo = [root]
    while todo:
        m = todo.pop(0)
        if m in found:
            continue
        found.append(m)
        for info in m.model_fields.values():
            todo += _submodels(info.annotation)[1]
    return found


def missing_descriptions(root: type[BaseModel] = Scenario) -> list[str]:
    """``Model.field`` of every field without a ``description`` (the test keeps this empty)."""
    return [
        f"{m.__name__}.{name}"
        for m in models(root)
        for name, info in m.model_fields.items()
        if not (info.description or "").strip()
    ]


# --------------------------------------------------------------------------- rendering


def md_cell(text: str) -> str:
    """``text`` as one Markdown table cell: ``|`` escaped, line breaks as spaces."""
    return text.replace("|", "\\|").replace("\n", " ")


def preset_figures_markdown() -> str:
    """The SuperPoD preset figures (:data:`podsim.fabric.superpod_presets.SUPERPOD_PRESETS`) as
    one Markdown table, one row per figure with its value and source; docs/physics.md
    ("SuperPoD presets") holds this table verbatim (a test keeps them equal)."""
    from podsim.fabric.superpod_presets import SUPERPOD_PRESETS

    lines = ["| preset | figure | value | source |", "|---|---|---|---|"]
    for name, spec in SUPERPOD_PRESETS.items():
        rows = [(spec.size_key, spec.size), *spec.figures.items()]
        rows += [("accelerator", spec.accelerator)]
        rows += [(f"{key} (vendor, not built)", fig) for key, fig in spec.reference.items()]
        for key, fig in rows:
            cells = (name, key, str(fig.value), fig.source)
            lines.append("| " + " | ".join(md_cell(c) for c in cells) + " |")
    return "\n".join(lines)


def study_rows(prefix: str = "") -> list[KeyDoc]:
    """The keys of a study file (:class:`podsim.scenarios.study.spec.Study`), as written in it."""
    from dataclasses import replace

    from podsim.scenarios.study.spec import Study

    out = []
    for r in reference(Study):
        if r.path == "base_dir":  # set by the loader, not written in a file
            continue
        path = "list" if r.path == "list_" else r.path
        out.append(replace(r, path=prefix + path))
    return out


def render(rows: list[KeyDoc] | None = None, fmt: str = "md") -> str:
    """The reference as a Markdown table (``md``) or plain text (``text``: one block per
    key)."""
    rows = reference() if rows is None else rows
    extras = [KeyDoc(k, t, "", "", d) for k, t, d in TOP_LEVEL_EXTRAS]
    if fmt == "md":
        out = [
            "# Scenario keys",
            "",
            "Every key of a scenario file (`podsim docs`, generated from scenarios/schema.py). "
            "Quantities are written with units and stored in the SI unit shown; `--set "
            "key.path=value` overrides any key.",
            "",
            "| key | type | default | unit | description |",
            "|---|---|---|---|---|",
        ]
        study = [
            "",
            "# Study keys",
            "",
            "Every key of a study file (`podsim sweep STUDY`; examples in "
            "scenarios/library/studies). Points override the base scenario by `--set` key path.",
            "",
            "| key | type | default | unit | description |",
            "|---|---|---|---|---|",
        ]
        for table, items in ((out, [*extras, *rows]), (study, study_rows())):
            for r in items:
                key = f"**`{r.path}`**" if r.section else f"`{r.path}`"
                table.append(
                    f"| {key} | {md_cell(r.type)} | "
                    f"{md_cell(r.default and f'`{r.default}`')} | "
                    f"{md_cell(r.unit)} | {md_cell(r.description)} |"
                )
        return "\n".join(out + study) + "\n"
    if fmt == "text":
        out = []
        for r in [*extras, *rows, *study_rows("study: ")]:
            head = r.path + (f"  [{r.unit}]" if r.unit else "")
            out.append(head)
            out.append(f"    {r.description}")
            out.append(f"    type: {r.type}" + (f"; default: {r.default}" if r.default else ""))
        return "\n".join(out) + "\n"
    raise ValueError(f"docs format {fmt!r}: use 'md' or 'text'")
