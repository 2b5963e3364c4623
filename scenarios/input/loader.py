"""Reading scenario files: YAML, ``include:`` inheritance, variants and ``--set`` overrides.

Resolution order (later wins):

1. every file named by ``include:`` (a path or a list of paths, relative to the including file;
   a bare name such as ``deepep-h800`` that is not a file is the built-in
   ``scenarios/library/NAME.yaml``), recursively and in order;
2. the file itself;
3. ``--set key.path=value`` overrides (values are YAML, so ``64`` is an int and ``[a, b]`` a list);
4. the selected variant: a file may define ``variants: {NAME: {key.path: value, ...}}`` and
   select one with ``variant: NAME`` (overridable with ``--set variant=NAME``); the variant's
   values land on top of 1-2, and the ``--set`` overrides are applied once more on top of it.

Merging is deep for mappings; lists and scalars replace. ``null`` replaces too, which is how a
child unsets an inherited key (``preset: null`` before giving ``topology:``). A relative file
path (trace, routing) is relative to the file that wrote it (a ``--set`` path: to the scenario
file's folder). Include cycles and duplicate keys in one mapping are errors. Every value
remembers the file and line it came from so that a validation error can point at it
(:mod:`podsim.scenarios.errors`).
"""

from __future__ import annotations

import copy
import difflib
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from podsim.scenarios.errors import (
    ScenarioError,
    _origin_of,
    dotted,
    from_validation_error,
    printable,
)
from podsim.scenarios.input.schema import Scenario
from podsim.scenarios.input.yamltext import (
    YamlRefused,
    check_yaml_text,
    load_yaml,
    read_text,
    read_yaml,
)
from pydantic import ValidationError

__all__ = [
    "LIBRARY",
    "Document",
    "file_description",
    "library_description",
    "library_names",
    "load_document",
    "load_scenario",
    "parse_override",
    "resolve_ref",
    "validate_document",
    "variant_names",
]

LIBRARY = Path(__file__).resolve().parent.parent / "library"
MAX_INCLUDE_DEPTH = 32
#: environment variable naming more folders (``os.pathsep``-separated) that ``include:`` may read
INCLUDE_PATH_ENV = "PODSIM_INCLUDE_PATH"
Key = tuple[Any, ...]


def library_names() -> list[str]:
    """Names of the built-in scenarios (``scenarios/library/*.yaml``)."""
    return sorted(p.stem for p in LIBRARY.glob("*.yaml"))


def library_description(name: str) -> str:
    """The built-in scenario's ``description`` (first line), read without validating it."""
    return file_description(LIBRARY / f"{name}.yaml")


def file_description(path: Path) -> str:
    """The first line of a YAML file's top-level ``description``, read without validating
    the file ("" when it has none or cannot be read)."""
    try:
        data = read_yaml(path)
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return ""
    text = str((data or {}).get("description", "") if isinstance(data, dict) else "").strip()
    return printable(text.splitlines()[0]) if text else ""


def resolve_ref(ref: str | Path, base_dir: Path | None = None) -> Path:
    """A scenario reference -> a file: an existing path (relative to ``base_dir`` when given),
    else a built-in name. Unknown references raise with a did-you-mean over the built-ins."""
    p = Path(ref)
    candidates = [p if p.is_absolute() or base_dir is None else base_dir / p]
    if base_dir is not None and not p.is_absolute():
        candidates.append(p)
    for c in candidates:
        if c.is_file():
            return c.resolve()
    name = p.stem if p.suffix in (".yaml", ".yml") and len(p.parts) == 1 else str(ref)
    lib = LIBRARY / f"{name}.yaml"
    if lib.is_file():
        return lib.resolve()
    names = library_names()
    close = difflib.get_close_matches(str(ref), names, n=3, cutoff=0.5)
    hint = f" Did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
    if candidates[0].is_dir():
        raise ScenarioError(
            f"{str(candidates[0])!r} is a folder, not a scenario file (a .yaml file or a "
            f"built-in name).{hint} Built-ins: {', '.join(names)}."
        )
    raise ScenarioError(
        f"no scenario file {str(candidates[0])!r} and no built-in scenario named {str(ref)!r}."
        f"{hint} Built-ins: {', '.join(names)}."
    )


# --------------------------------------------------------------------------- YAML with marks


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate keys (PyYAML silently keeps the last one)."""


def _mapping(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
    loader.flatten_mapping(node)
    out: dict[Any, Any] = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=deep)
        try:
            hash(key)
        except TypeError:
            raise yaml.constructor.ConstructorError(
                "while constructing a mapping",
                node.start_mark,
                "found an unhashable key",
                key_node.start_mark,
            ) from None
        if key in out:
            raise yaml.constructor.ConstructorError(
                "while constructing a mapping",
                node.start_mark,
                f"found duplicate key {key!r}",
                key_node.start_mark,
            )
        out[key] = loader.construct_object(value_node, deep=deep)
    return out


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)


def _no_binary(loader: _StrictLoader, node: yaml.Node) -> Any:
    # !!binary gives bytes, which pydantic would quietly turn into text
    raise yaml.constructor.ConstructorError(
        None, None, "binary values (!!binary) are not accepted in a scenario", node.start_mark
    )


_StrictLoader.add_constructor("tag:yaml.org,2002:binary", _no_binary)


def _marks(node: yaml.Node, file: str, prefix: Key, out: dict[Key, tuple[str, int | None]]) -> None:
    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            key = k.value if isinstance(k, yaml.ScalarNode) else None
            if key is None:
                continue
            path = (*prefix, key)
            out[path] = (file, k.start_mark.line + 1)
            _marks(v, file, path, out)
    elif isinstance(node, yaml.SequenceNode):
        for i, v in enumerate(node.value):
            path = (*prefix, i)
            out[path] = (file, v.start_mark.line + 1)
            _marks(v, file, path, out)


def _read_yaml(path: Path) -> tuple[Any, dict[Key, tuple[str, int | None]]]:
    try:
        text = read_text(path)
    except (OSError, UnicodeDecodeError) as exc:
        raise ScenarioError(f"cannot read the file: {exc}.", file=path) from None
    loader = None
    try:
        check_yaml_text(text, str(path))
        loader = _StrictLoader(text)
        node = loader.get_single_node()
        data = loader.construct_document(node) if node is not None else None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc)
        context = getattr(exc, "context", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        ctx = f" ({context})" if context else ""
        kind = "refused" if isinstance(exc, YamlRefused) else "YAML syntax error"
        raise ScenarioError(f"{kind}{where}: {problem}{ctx}.", file=path, line=None) from None
    finally:
        if loader is not None:
            loader.dispose()
    origins: dict[Key, tuple[str, int | None]] = {}
    if node is not None:
        _marks(node, str(path), (), origins)
    return data, origins


# --------------------------------------------------------------------------- merging


def _merge(
    base: dict[str, Any],
    top: Mapping[str, Any],
    origins: dict[Key, tuple[str, int | None]],
    top_origins: Mapping[Key, tuple[str, int | None]],
    prefix: Key = (),
) -> None:
    """Deep-merge ``top`` into ``base`` in place (mappings merge, everything else replaces)."""
    for key, value in top.items():
        path = (*prefix, key)
        if isinstance(value, Mapping) and isinstance(base.get(key), dict):
            if path in top_origins:
                origins[path] = top_origins[path]
            _merge(base[key], value, origins, top_origins, path)
        else:
            # a replaced subtree forgets where its old children came from
            for old in [k for k in origins if k[: len(path)] == path]:
                del origins[old]
            base[key] = copy.deepcopy(value)
            origins.update({k: v for k, v in top_origins.items() if k[: len(path)] == path})


@dataclass
class Document:
    """A merged scenario document before validation, with where each value came from."""

    data: dict[str, Any]
    origins: dict[Key, tuple[str, int | None]] = field(default_factory=dict)
    file: Path | None = None
    files: list[Path] = field(default_factory=list)

    @property
    def base_dir(self) -> Path:
        return self.file.parent if self.file is not None else Path.cwd()

    def locate(self, exc: ScenarioError) -> ScenarioError:
        """``exc`` with the file and line where its key was written (for errors raised after
        validation, e.g. by the build step, that know only the key path)."""
        if exc.file is not None or not exc.path:
            return exc
        try:
            key, _ = parse_override(f"{exc.path}=")
        except ScenarioError:
            return exc
        src, line = _origin_of(self.origins, key)
        if src is not None:
            return ScenarioError(exc.message, file=src, path=exc.path, line=line)
        return ScenarioError(exc.message, file=self.file, path=exc.path)


def include_roots(scenario_dir: Path) -> list[Path]:
    """The folders ``include:`` may read from: the top scenario file's folder, the built-in
    library and the folders named by ``$PODSIM_INCLUDE_PATH``."""
    extra = [Path(p) for p in os.environ.get(INCLUDE_PATH_ENV, "").split(os.pathsep) if p]
    return [p.resolve() for p in (scenario_dir, LIBRARY, *extra)]


def _check_include(target: Path, scenario_dir: Path) -> None:
    """Refuse an include that is not a scenario file: ``include:`` reads YAML files (after
    following symlinks) under :func:`include_roots` only, so that a scenario cannot make
    podsim read ``/proc/self/environ`` or another user's files."""
    real = target.resolve()
    if real.suffix not in (".yaml", ".yml"):
        raise ScenarioError(
            f"include {str(target)!r} is not a scenario file (.yaml or .yml)"
            + (f"; it points to {str(real)!r}." if real != target else ".")
        )
    roots = include_roots(scenario_dir)
    if not any(real.is_relative_to(root) for root in roots):
        raise ScenarioError(
            f"include {str(real)!r} is outside the scenario's folder and the built-in "
            f"library ({', '.join(str(r) for r in roots)}); add its folder to "
            f"${INCLUDE_PATH_ENV} to allow it."
        )


def _load_file(path: Path, stack: list[Path], files: list[Path]) -> Document:
    if path in stack:
        chain = " -> ".join(str(p) for p in [*stack, path])
        raise ScenarioError(f"include cycle: {chain}.", file=stack[0], path="include")
    if len(stack) >= MAX_INCLUDE_DEPTH:
        raise ScenarioError(f"includes nest deeper than {MAX_INCLUDE_DEPTH} files.", file=path)
    data, origins = _read_yaml(path)
    files.append(path)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ScenarioError(
            f"the file must hold a mapping of keys (cluster:, workload:, ...), "
            f"not a {type(data).__name__}.",
            file=path,
        )
    inc = data.pop("include", None)
    if inc is None:
        refs: list[Any] = []
    elif isinstance(inc, str):
        refs = [inc]
    elif isinstance(inc, list) and all(isinstance(r, str) for r in inc):
        refs = list(inc)
    else:
        raise ScenarioError(
            f"include must be a file path or a list of paths, got {inc!r}.",
            file=path,
            path="include",
            line=origins.get(("include",), (None, None))[1],
        )
    merged: dict[str, Any] = {}
    merged_origins: dict[Key, tuple[str, int | None]] = {}
    for i, ref in enumerate(refs):
        try:
            target = resolve_ref(ref, path.parent)
        except ScenarioError as exc:
            line = origins.get(("include", i), origins.get(("include",), (None, None)))[1]
            raise ScenarioError(exc.message, file=path, path="include", line=line) from None
        try:
            _check_include(target, (stack or [path])[0].parent)
        except ScenarioError as exc:
            line = origins.get(("include", i), origins.get(("include",), (None, None)))[1]
            raise ScenarioError(exc.message, file=path, path="include", line=line) from None
        sub = _load_file(target, [*stack, path], files)
        _merge(merged, sub.data, merged_origins, sub.origins)
    own_origins = {k: v for k, v in origins.items() if k[:1] != ("include",)}
    _merge(merged, data, merged_origins, own_origins)
    return Document(merged, merged_origins, path, files)


# --------------------------------------------------------------------------- overrides

_SEG = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def parse_override(text: str) -> tuple[Key, Any]:
    """``"cluster.nic.cc.name=hpcc"`` -> ``(("cluster", "nic", "cc", "name"), "hpcc")``.

    The value is parsed as YAML (``64`` -> int, ``true`` -> bool, ``[1, 2]`` -> list);
    list elements are addressed as ``faults.0.at`` or ``faults[0].at``.
    """
    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ScenarioError(
            f"--set {text!r} must have the form key.path=value (e.g. cluster.nic.mtu=2048)."
        )
    parts: list[Any] = []
    for piece in key.split("."):
        if not piece:
            raise ScenarioError(f"--set {text!r}: empty segment in key path {key!r}.")
        pos = 0
        for m in _SEG.finditer(piece):
            if m.start() != pos:
                break
            pos = m.end()
            if m.group(1) is not None:
                parts.append(int(m.group(1)) if m.group(1).isdigit() else m.group(1))
            else:
                parts.append(int(m.group(2)))
        if pos != len(piece):
            raise ScenarioError(f"--set {text!r}: cannot read key path {key!r}.")
    try:
        value = load_yaml(raw, "--set") if raw.strip() else None
    except yaml.YAMLError as exc:
        problem = getattr(exc, "problem", None) or str(exc)
        raise ScenarioError(
            f"--set {text!r}: the value is not valid YAML ({problem}).", path=dotted(parts)
        ) from None
    return tuple(parts), value


def _apply_one(data: dict[str, Any], path: Key, value: Any, label: str) -> None:
    node: Any = data
    for i, part in enumerate(path[:-1]):
        nxt = path[i + 1]
        if isinstance(node, dict):
            if not isinstance(node.get(part), dict | list):
                node[part] = [] if isinstance(nxt, int) else {}
            node = node[part]
        elif isinstance(node, list) and isinstance(part, int):
            if part >= len(node):
                raise ScenarioError(
                    f"{label}: index {part} is past the end of {dotted(path[:i])} "
                    f"({len(node)} items).",
                    path=dotted(path),
                )
            node = node[part]
        else:
            raise ScenarioError(
                f"{label}: {dotted(path[:i])} is not a mapping or list.", path=dotted(path)
            )
    last = path[-1]
    if isinstance(node, list):
        if not isinstance(last, int) or last > len(node):
            raise ScenarioError(f"{label}: bad list index {last!r}.", path=dotted(path))
        if last == len(node):
            node.append(value)
        else:
            node[last] = value
    elif isinstance(node, dict):
        node[last] = value
    else:
        raise ScenarioError(f"{label}: cannot set a key inside a scalar.", path=dotted(path))


def _apply_overrides(doc: Document, overrides: Sequence[tuple[Key, Any, str]]) -> None:
    for path, value, label in overrides:
        _apply_one(doc.data, path, copy.deepcopy(value), label)
        for old in [k for k in doc.origins if k[: len(path)] == path]:
            del doc.origins[old]
        doc.origins[path] = (f"command line ({label})", None)


def _apply_variant(doc: Document, overrides: Sequence[tuple[Key, Any, str]]) -> None:
    variants = doc.data.pop("variants", None)
    chosen = doc.data.get("variant")
    if variants is None:
        # a resolved scenario keeps its variant's name as a label, with no variants left;
        # but a variant asked for on the command line must not be silently ignored
        src, _ = doc.origins.get(("variant",), (None, None))
        if chosen is not None and src is not None and src.startswith("command line"):
            raise ScenarioError(
                f"unknown variant {chosen!r}: this scenario defines no variants "
                "(variants: {NAME: {key.path: value}}).",
                file=src,
                path="variant",
            )
        return
    if not isinstance(variants, dict) or not all(
        isinstance(v, dict | type(None)) for v in variants.values()
    ):
        raise ScenarioError(
            "variants must map each variant name to a mapping of overrides "
            "(e.g. variants: {ep64: {workload.moe.ep_size: 64}}).",
            file=doc.file,
            path="variants",
        )
    if chosen is None:
        return
    if chosen not in variants:
        close = difflib.get_close_matches(str(chosen), [str(v) for v in variants], n=2, cutoff=0.4)
        hint = f" Did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
        src, line = doc.origins.get(("variant",), (None, None))
        raise ScenarioError(
            f"unknown variant {chosen!r}.{hint} Variants: {', '.join(map(str, variants))}.",
            file=src or doc.file,
            path="variant",
            line=line,
        )
    vfile, vline = doc.origins.get(("variants", chosen), (str(doc.file), None))
    for key, value in (variants[chosen] or {}).items():
        path, _ = parse_override(f"{key}=")
        _apply_one(doc.data, path, copy.deepcopy(value), f"variant {chosen}")
        for old in [k for k in doc.origins if k[: len(path)] == path]:
            del doc.origins[old]
        doc.origins[path] = (vfile, vline)
    _apply_overrides(doc, overrides)  # the command line beats the variant


#: keys holding file paths: a relative path is relative to the file that wrote it
PATH_KEYS: tuple[Key, ...] = (
    ("workload", "trace", "path"),
    ("workload", "moe", "routing"),
    ("workload", "serving", "csv"),
)


def _anchor_paths(doc: Document) -> None:
    for key in PATH_KEYS:
        node: Any = doc.data
        for part in key[:-1]:
            node = node.get(part) if isinstance(node, dict) else None
        if not isinstance(node, dict) or not isinstance(node.get(key[-1]), str):
            continue
        value = Path(node[key[-1]])
        src = doc.origins.get(key, (None, None))[0]
        if value.is_absolute() or src is None or src.startswith("command line"):
            continue
        node[key[-1]] = str(Path(src).parent / value)


def load_document(
    ref: str | Path | Mapping[str, Any],
    overrides: Iterable[str] = (),
    *,
    seed: int | None = None,
) -> Document:
    """Read, include, override and select the variant: the document ready for validation."""
    parsed: list[tuple[Key, Any, str]] = []
    for text in overrides:
        path, value = parse_override(text)
        parsed.append((path, value, f"--set {text}"))
    if seed is not None:
        parsed.append((("seed",), seed, f"--seed {seed}"))
    if isinstance(ref, Mapping):
        data = copy.deepcopy(dict(ref))
        if "include" in data:
            base = Document({}, {})
            refs = data.pop("include")
            for r in [refs] if isinstance(refs, str) else list(refs):
                target = resolve_ref(r)
                _check_include(target, Path.cwd())
                sub = _load_file(target, [], base.files)
                _merge(base.data, sub.data, base.origins, sub.origins)
            _merge(base.data, data, base.origins, {})
            doc = base
        else:
            doc = Document(data, {})
    else:
        path = resolve_ref(ref)
        doc = _load_file(path, [], [])
    _apply_overrides(doc, parsed)
    _apply_variant(doc, parsed)
    _anchor_paths(doc)
    return doc


def variant_names(ref: str | Path) -> list[str]:
    """The variants a scenario file (with its includes) defines, in file order."""
    doc = _load_file(resolve_ref(ref), [], [])
    found = doc.data.get("variants")
    return [str(v) for v in found] if isinstance(found, dict) else []


def validate_document(doc: Document) -> Scenario:
    """Validate a document into a :class:`Scenario`, turning pydantic errors into one
    :class:`ScenarioError` with file, key path, line and value."""
    try:
        return Scenario.model_validate(doc.data, context={"base_dir": str(doc.base_dir)})
    except ValidationError as exc:
        raise from_validation_error(
            exc, root=Scenario, file=doc.file, origins=doc.origins
        ) from None


def load_scenario(
    ref: str | Path | Mapping[str, Any] | Scenario,
    overrides: Iterable[str] = (),
    *,
    seed: int | None = None,
) -> tuple[Scenario, Document]:
    """A validated scenario from a file, a built-in name, a mapping or a Scenario."""
    if isinstance(ref, Scenario):
        ref = ref.resolved()
    overrides = list(overrides)
    doc = load_document(ref, overrides, seed=seed)
    scenario = validate_document(doc)
    if not isinstance(ref, Mapping):
        _check_other_variants(ref, overrides, seed, scenario.variant)
    return scenario, doc


def _check_other_variants(
    ref: str | Path, overrides: list[str], seed: int | None, chosen: str | None
) -> None:
    """Validate every variant the file defines, not only the selected one: a typo in a
    variant must be found when the file is checked, not when someone selects it later."""
    for name in variant_names(ref):
        if name == chosen:
            continue
        doc = load_document(ref, [*overrides, f"variant={name}"], seed=seed)
        try:
            validate_document(doc)
        except ScenarioError as exc:
            raise ScenarioError(
                f"variant {name!r} (not the selected one) is invalid: {exc.message}",
                file=exc.file,
                path=exc.path,
                line=exc.line,
            ) from None
