"""Bounded YAML: every YAML text podsim reads passes these limits before it is built.

A scenario, study or cost-catalog file is small text written by a person; a hostile one (an
alias bomb of a few hundred bytes that expands to billions of nodes, a mapping nested ten
thousand deep, a multi-megabyte string, a NUL byte) must be refused before any expansion
happens, with the file, the line and the limit, rather than hang the machine or end in a
Python ``RecursionError``.

How: one pass over the parser's *events* (libyaml's C parser when built in). The event stream
is produced iteratively, so the pass itself cannot recurse or expand anything: it counts the
nesting depth, the length of each scalar, and the number of nodes the document would have once
every alias is expanded (an alias counts as the whole subtree of its anchor), and it refuses an
alias to an anchor that is still open (a recursive structure). Only a text that passes is handed
to a loader. The limits are far above what any real scenario uses (the largest built-in
scenario has a few hundred nodes and a depth of 6); see :data:`LIMITS`.

Errors are :class:`yaml.MarkedYAMLError` subclasses, so every caller that already reports
YAML syntax errors with their line and column reports these the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

__all__ = [
    "LIMITS",
    "YamlLimits",
    "YamlRefused",
    "check_yaml_text",
    "load_yaml",
    "read_text",
    "read_yaml",
]

_EventLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@dataclass(frozen=True)
class YamlLimits:
    """What a YAML text may hold (each limit is refused with its value in the message)."""

    #: file size in bytes (UTF-8)
    max_bytes: int = 4 * 1024 * 1024
    #: nesting depth of mappings and sequences
    max_depth: int = 64
    #: nodes once every alias is expanded (scalars, mappings and sequences)
    max_nodes: int = 200_000
    #: characters in one scalar (a key or a value)
    max_scalar_chars: int = 100_000


LIMITS = YamlLimits()


class YamlRefused(yaml.MarkedYAMLError):
    """A YAML text refused before loading: over a limit, recursive, or not text."""

    def __init__(self, problem: str, mark: yaml.Mark | None) -> None:
        super().__init__(problem=problem, problem_mark=mark)


def _mark(text: str, position: int, name: str) -> yaml.Mark:
    """A mark (0-based line and column, printed 1-based) for a character offset."""
    line = text.count("\n", 0, position)
    column = position - (text.rfind("\n", 0, position) + 1)
    return yaml.Mark(name, position, line, column, None, None)


def check_yaml_text(text: str, name: str = "<text>", limits: YamlLimits = LIMITS) -> None:
    """Raise :class:`YamlRefused` (or a YAML syntax error) if ``text`` breaks a limit.

    Runs in time linear in the text, whatever its aliases would expand to.
    """
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > limits.max_bytes:
        raise YamlRefused(
            f"the file is {size:,} bytes; the limit for a YAML file is {limits.max_bytes:,} "
            "bytes (data such as traces and routing belong in their own CSV or Parquet files)",
            None,
        )
    sizes: dict[str, int] = {}  # anchor -> expanded node count of its subtree
    open_anchors: set[str] = set()
    stack: list[tuple[str | None, int]] = []  # (anchor, total when the collection started)
    total = 0
    try:
        for event in yaml.parse(text, Loader=_EventLoader):
            mark = event.start_mark
            if isinstance(event, yaml.CollectionStartEvent):
                if len(stack) >= limits.max_depth:
                    raise YamlRefused(
                        f"mappings and lists nest deeper than {limits.max_depth} levels", mark
                    )
                total += 1
                stack.append((event.anchor, total))
                if event.anchor is not None:
                    open_anchors.add(event.anchor)
            elif isinstance(event, yaml.CollectionEndEvent):
                anchor, started = stack.pop()
                if anchor is not None:
                    open_anchors.discard(anchor)
                    sizes[anchor] = total - started + 1
            elif isinstance(event, yaml.ScalarEvent):
                if len(event.value) > limits.max_scalar_chars:
                    raise YamlRefused(
                        f"a value of {len(event.value):,} characters; the limit is "
                        f"{limits.max_scalar_chars:,}",
                        mark,
                    )
                total += 1
                if event.anchor is not None:
                    sizes[event.anchor] = 1
            elif isinstance(event, yaml.AliasEvent):
                if event.anchor in open_anchors:
                    raise YamlRefused(
                        f"the alias *{event.anchor} refers to its own enclosing anchor "
                        f"&{event.anchor} (a recursive structure)",
                        mark,
                    )
                total += sizes.get(event.anchor, 1)  # undefined: the loader reports it
            else:
                continue
            if total > limits.max_nodes:
                raise YamlRefused(
                    f"the document expands to more than {limits.max_nodes:,} values once its "
                    "aliases (*name) are expanded",
                    mark,
                )
    except yaml.reader.ReaderError as exc:
        code = (
            exc.character if isinstance(exc.character, int) else ord(str(exc.character)[:1] or " ")
        )
        what = "a NUL byte" if code == 0 else f"the control character #x{code:04x}"
        raise YamlRefused(
            f"the file is not valid YAML text: {what} is not allowed",
            _mark(text, exc.position, name),
        ) from None


def load_yaml(text: str, name: str = "<text>", loader: type[Any] | None = None) -> Any:
    """``text`` checked by :func:`check_yaml_text`, then loaded (safe loader by default)."""
    check_yaml_text(text, name)
    return yaml.load(text, Loader=loader or _EventLoader)


def read_yaml(path: str | Path, loader: type[Any] | None = None) -> Any:
    """A YAML file read within :data:`LIMITS` (never more than the size limit is read).

    Raises ``OSError`` when the file cannot be read, ``UnicodeDecodeError`` when it is not
    UTF-8 and :class:`yaml.YAMLError` (a :class:`YamlRefused` for a limit) otherwise.
    """
    return load_yaml(read_text(path), str(path), loader)


def read_text(path: str | Path) -> str:
    """A text file's contents, reading at most one byte past :data:`LIMITS` ``.max_bytes``
    (so that a huge file, a FIFO or ``/dev/zero`` cannot exhaust memory; the size check in
    :func:`check_yaml_text` then refuses it)."""
    with open(path, "rb") as fh:
        raw = fh.read(LIMITS.max_bytes + 1)
    return raw.decode("utf-8")
