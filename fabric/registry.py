"""Named registries: the one extension mechanism of podsim.

Every extension point (congestion-control algorithms, path selectors, topologies, workloads,
cost items, engines) is a :class:`Registry`. Built-ins register with a decorator and a one-line
description; scenarios refer to entries by name; ``podsim list`` prints :meth:`Registry.describe`.

A registry names the modules that hold its built-ins (``builtins``) and imports them on its first
lookup, so that defining a registry never imports what registers into it (no import cycles), and
a built-in that fails to import fails loudly at that lookup instead of silently going missing.
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")


class UnknownNameError(KeyError, ValueError):
    """A name that is not in a registry; the message lists close matches and all choices."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


class ParamError(ValueError):
    """A bad parameter of a model, named by its key relative to the model's parameters (``key``
    None: the parameters as a whole). The scenario layer prefixes the scenario path."""

    def __init__(self, message: str, key: str | None = None) -> None:
        super().__init__(message)
        self.key = key


@dataclass(frozen=True)
class Entry(Generic[T]):
    name: str
    obj: T
    description: str


class Registry(Generic[T]):
    """A name -> object map with descriptions and did-you-mean errors.

    ``builtins``: modules (dotted names) whose import registers built-in entries; they are
    imported on the first lookup (:meth:`get`, ``in``, iteration, :meth:`names`,
    :meth:`describe`), not when the registry is defined."""

    def __init__(self, kind: str, builtins: Sequence[str] = ()) -> None:
        self.kind = kind
        self.builtins = tuple(builtins)
        self._entries: dict[str, Entry[T]] = {}
        self._loaded = not self.builtins

    def _load(self) -> dict[str, Entry[T]]:
        if not self._loaded:
            self._loaded = True  # first, so that a built-in module may look itself up on import
            for module in self.builtins:
                importlib.import_module(module)
        return self._entries

    def register(self, name: str, description: str = "") -> Callable[[T], T]:
        """Decorator: register ``obj`` under ``name`` (names are unique per registry)."""

        def deco(obj: T) -> T:
            self.add(name, obj, description)
            return obj

        return deco

    def add(self, name: str, obj: T, description: str = "") -> None:
        if name in self._entries:
            raise ValueError(f"{self.kind} {name!r} is already registered")
        if not description:
            doc = getattr(obj, "__doc__", None) or ""
            description = doc.strip().splitlines()[0] if doc.strip() else ""
        self._entries[name] = Entry(name, obj, description)

    def get(self, name: str) -> T:
        """The object registered as ``name``; unknown names raise :class:`UnknownNameError`."""
        try:
            return self._load()[name].obj
        except KeyError:
            raise UnknownNameError(self.unknown_message(name)) from None

    def unknown_message(self, name: str) -> str:
        close = difflib.get_close_matches(str(name), list(self._load()), n=3, cutoff=0.5)
        hint = f" Did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
        return f"unknown {self.kind} {name!r}.{hint} Choices: {', '.join(sorted(self._entries))}."

    def __contains__(self, name: object) -> bool:
        return name in self._load()

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._load()))

    def __len__(self) -> int:
        return len(self._load())

    def names(self) -> list[str]:
        return sorted(self._load())

    def describe(self) -> list[tuple[str, str]]:
        """(name, one-line description) for every entry, sorted by name."""
        entries = self._load()
        return [(n, entries[n].description) for n in sorted(entries)]
