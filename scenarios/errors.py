"""Bad input, told as one paragraph a user can act on.

Every problem with a scenario (YAML syntax, unknown keys, wrong types, bad units, unknown names,
a build step that rejects a parameter) becomes a :class:`ScenarioError`: a ``ValueError`` whose
text names the file, the key path (``cluster.nic.cc.name``), the line when known, the bad value
and, for unknown keys and names, the closest valid ones. The command prints it and exits with
status 2 (:data:`EXIT_BAD_INPUT`); no traceback reaches the user.

Unexpected internal errors are a different matter: :func:`save_traceback` writes the traceback
to a file and the command prints a short message with its path (exit status 1).
"""

from __future__ import annotations

import difflib
import os
import re
import tempfile
import time
import traceback
import types
import typing
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

__all__ = [
    "EXIT_BAD_INPUT",
    "EXIT_INTERNAL",
    "EXIT_INTERRUPTED",
    "Origins",
    "ScenarioError",
    "check_run_name",
    "dotted",
    "from_validation_error",
    "is_model",
    "kind_tags",
    "save_traceback",
]

EXIT_BAD_INPUT = 2
EXIT_INTERNAL = 1
EXIT_INTERRUPTED = 130

#: key path (tuple of str/int) -> (file, 1-based line) where the value was written.
Origins = Mapping[tuple[Any, ...], tuple[str, int | None]]


class ScenarioError(ValueError):
    """A scenario that cannot be loaded, validated or built; ``str()`` is one paragraph."""

    exit_code = EXIT_BAD_INPUT

    def __init__(
        self,
        message: str,
        *,
        file: str | os.PathLike[str] | None = None,
        path: str | None = None,
        line: int | None = None,
        problems: Sequence[str] = (),
    ) -> None:
        self.message = message
        self.file = str(file) if file is not None else None
        self.path = path
        self.line = line
        self.problems = list(problems)
        super().__init__(self._render())

    def _render(self) -> str:
        where = []
        if self.file and self.file.startswith(("command line", "study ")):
            where.append(self.file)
        elif self.file:
            where.append(f"scenario file {self.file}")
        if self.path:
            where.append(f"key {self.path}")
        if self.line:
            where.append(f"line {self.line}")
        head = ", ".join(where)
        text = f"{head}: {self.message}" if head else self.message
        if self.problems:
            text += " " + " ".join(self.problems)
        # one paragraph: the message may carry the registry's own line breaks
        return " ".join(part.strip() for part in text.splitlines() if part.strip())

    def __str__(self) -> str:
        return self.args[0]


#: a result folder's name is one path component: most file systems allow 255 bytes
MAX_NAME_BYTES = 255


def check_run_name(name: str) -> str:
    """``name`` of a scenario or study: it names the result folder, so it must be non-empty
    and hold no path separator (or NUL); '.' and '..' would put the results in the parent;
    control characters (terminal escape sequences) and names longer than a folder name can
    be are refused too."""
    if not name or any(c in name for c in "/\\\0") or name in (".", ".."):
        raise ValueError("name must be non-empty, not '.' or '..', and contain no path separators")
    if any(unicodedata.category(c) == "Cc" for c in name):
        raise ValueError("name must not contain control characters (e.g. terminal escapes)")
    if len(name.encode("utf-8")) > MAX_NAME_BYTES:
        raise ValueError(f"name must be at most {MAX_NAME_BYTES} bytes (it names a folder)")
    return name


def printable(text: str) -> str:
    """``text`` with control characters other than newline and tab escaped (``\\x1b``), so
    that text read from a file cannot drive the terminal it is printed on."""
    return "".join(
        c if c in "\n\t" or unicodedata.category(c) != "Cc" else repr(c)[1:-1] for c in text
    )


def dotted(loc: Iterable[Any]) -> str:
    """``('faults', 0, 'at')`` -> ``'faults[0].at'``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out or "(top level)"


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


# --------------------------------------------------------------------------- model walking


def _unwrap(tp: Any) -> list[Any]:
    """The concrete alternatives of an annotation (Annotated, Optional and unions flattened)."""
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        return _unwrap(typing.get_args(tp)[0])
    if origin is typing.Union or origin is types.UnionType:
        out: list[Any] = []
        for arg in typing.get_args(tp):
            out.extend(_unwrap(arg))
        return out
    return [tp]


def is_model(tp: Any) -> bool:
    """Whether an annotation alternative is a pydantic model (a section of the file)."""
    return isinstance(tp, type) and issubclass(tp, BaseModel)


#: ``union_tag`` -> model of a tagged section made after the schema was built (the parameters of
#: a node layout a plug-in registers later: ``podsim.scenarios.input.schema``), so that its
#: errors are located and explained like those of the built-in alternatives
LATE_TAGGED: dict[str, type[BaseModel]] = {}


def kind_tags(model: type[BaseModel]) -> list[str]:
    """The ``kind`` values that select ``model`` in a list of several entry types (faults), or
    the ``union_tag`` of a section whose model another key selects (``cluster.layout_params``
    by ``cluster.layout``): the label pydantic puts in an error's location."""
    tag = getattr(model, "union_tag", None)
    if isinstance(tag, str):
        return [tag]
    field = model.model_fields.get("kind")
    if field is None:
        return []
    alts = _unwrap(field.annotation)
    tags: list[str] = []
    for alt in alts:
        if typing.get_origin(alt) is typing.Literal:
            tags.extend(str(a) for a in typing.get_args(alt))
    return tags


def _walk(root: type[BaseModel], loc: Sequence[Any]) -> tuple[list[Any], list[Any]]:
    """Follow ``loc`` through the model tree.

    Returns the cleaned location (union tags removed) and the candidate types at its end.
    """
    current: list[Any] = [root]
    clean: list[Any] = []
    for part in loc:
        nxt: list[Any] = []
        matched = False
        for tp in current:
            for alt in _unwrap(tp):
                origin = typing.get_origin(alt)
                if is_model(alt) and isinstance(part, str) and part in alt.model_fields:
                    nxt.append(alt.model_fields[part].annotation)
                    matched = True
                elif origin in (list, tuple, Sequence) and isinstance(part, int):
                    args = typing.get_args(alt)
                    nxt.append(args[0] if args else Any)
                    matched = True
                elif origin in (dict, Mapping) and isinstance(part, str):
                    args = typing.get_args(alt)
                    nxt.append(args[1] if len(args) == 2 else Any)
                    matched = True
        if matched:
            clean.append(part)
            current = nxt
            continue
        # a discriminated-union tag or a pydantic union branch label: not a key of the file
        tagged = [
            alt
            for tp in current
            for alt in _unwrap(tp)
            if is_model(alt) and isinstance(part, str) and part in kind_tags(alt)
        ]
        if not tagged and isinstance(part, str) and part in LATE_TAGGED:
            tags = [getattr(alt, "union_tag", None) for tp in current for alt in _unwrap(tp)]
            tagged = [LATE_TAGGED[part]] if any(isinstance(t, str) for t in tags) else []
        if tagged:
            current = tagged
            continue
        if isinstance(part, str) and ("[" in part or part.startswith(("literal", "function"))):
            continue
        clean.append(part)
        current = [Any]
    return clean, current


def _fields_at(types_: list[Any]) -> list[str]:
    names: list[str] = []
    for tp in types_:
        for alt in _unwrap(tp):
            if is_model(alt):
                names.extend(n for n in alt.model_fields if n not in names)
    return names


# --------------------------------------------------------------------------- conversion


def _origin_of(origins: Origins | None, loc: Sequence[Any]) -> tuple[str | None, int | None]:
    if not origins:
        return None, None
    key = tuple(loc)
    if key:
        # a --set below the failing key (--set cluster.params.nodes=0 failing at
        # cluster.params) is the likelier culprit than the file that wrote the parent
        for k, hit in reversed(list(origins.items())):
            below = len(k) > len(key) and k[: len(key)] == key
            if below and str(hit[0]).startswith("command line"):
                return hit
    for n in range(len(loc), -1, -1):
        hit = origins.get(tuple(loc[:n]))
        if hit is not None:
            return hit
    return None, None


def _describe(err: Mapping[str, Any], root: type[BaseModel]) -> tuple[list[Any], str]:
    loc = list(err.get("loc", ()))
    kind = err.get("type", "")
    value = err.get("input")
    if kind == "extra_forbidden":
        parent, types_ = _walk(root, loc[:-1])
        key = loc[-1]
        valid = _fields_at(types_)
        close = difflib.get_close_matches(str(key), valid, n=2, cutoff=0.5)
        hint = f" Did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
        where = dotted(parent) if parent else "the top level"
        picked = [t for tp in types_ for alt in _unwrap(tp) if is_model(alt)
                  for t in [getattr(alt, "union_tag", None)] if isinstance(t, str)]  # fmt: skip
        if len(set(picked)) == 1:  # a section another key picks: say which one
            where += f" ({picked[0]})"
        choices = f" Valid keys here: {', '.join(valid)}." if valid else ""
        return [*parent, key], f"unknown key {key!r} in {where}.{hint}{choices}"
    clean, _ = _walk(root, loc)
    msg = str(err.get("msg", "invalid value"))
    if kind == "missing":
        return clean, "this required key is missing."
    if kind == "union_tag_not_found":
        field = str((err.get("ctx") or {}).get("discriminator") or "kind").strip("'")
        return [*clean, field], f"this required key is missing: the {field} of the entry."
    if kind == "union_tag_invalid":
        # pydantic's "Input tag ... does not match any of the expected tags" names no key
        tag, field = (err.get("ctx") or {}).get("tag"), (err.get("ctx") or {}).get("discriminator")
        tags = re.findall(r"'([^']+)'", str((err.get("ctx") or {}).get("expected_tags", "")))
        field = str(field or "kind").strip("'")
        close = difflib.get_close_matches(str(tag), tags, n=2, cutoff=0.5)
        hint = f" Did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
        return [*clean, field], f"unknown {field} {tag!r}.{hint} Choices: {', '.join(tags)}."
    for prefix in ("Value error, ", "Assertion failed, "):
        if msg.startswith(prefix):
            msg = msg[len(prefix) :]
    # pydantic speaks of Python types; the file has YAML mappings
    msg = re.sub(r" or instance of \w+", "", msg).replace("valid dictionary", "mapping")
    if isinstance(value, Mapping) and kind == "value_error":
        return clean, msg.rstrip(".") + "."
    return clean, f"{msg.rstrip('.')} (got {_short(value)})."


def from_validation_error(
    exc: ValidationError,
    *,
    root: type[BaseModel],
    file: str | os.PathLike[str] | None = None,
    origins: Origins | None = None,
) -> ScenarioError:
    """One :class:`ScenarioError` for all of a pydantic error's problems, each with its key
    path, line (from ``origins``) and bad value."""
    problems: list[tuple[list[Any], str]] = []
    seen: set[str] = set()
    for err in exc.errors(include_url=False):
        loc, text = _describe(err, root)
        key = dotted(loc) + text
        if key not in seen:
            seen.add(key)
            problems.append((loc, text))
    if len(problems) == 1:
        loc, text = problems[0]
        src, line = _origin_of(origins, loc)
        return ScenarioError(text, file=src or file, path=dotted(loc), line=line)
    parts = []
    for i, (loc, text) in enumerate(problems, 1):
        src, line = _origin_of(origins, loc)
        at = f" ({src}, line {line})" if src and line else ""
        parts.append(f"({i}) {dotted(loc)}{at}: {text}")
    first = dotted(problems[0][0])
    return ScenarioError(
        f"{len(problems)} problems, first at {first}:",
        file=file,
        problems=parts,
    )


def save_traceback(exc: BaseException, directory: str | os.PathLike[str] | None = None) -> Path:
    """Write ``exc``'s traceback to a file (for internal errors) and return its path."""
    folder = Path(directory) if directory else Path(tempfile.gettempdir()) / "podsim-crashes"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"crash-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.txt"
    path.write_text("".join(traceback.format_exception(type(exc), exc, exc.__traceback__)))
    return path
