"""Opt-in loading of user classes named ``"package.module:ClassName"`` in a scenario.

A scenario file alone never runs code: :func:`load_class` refuses unless the caller passes
``allow=True``, which the scenario layer does only for ``--allow-plugins`` (docs/design.md,
"Extending"). Every extension point that accepts user code (congestion control, path selectors)
loads it here, checked to subclass the extension point's base class.
"""

from __future__ import annotations

import importlib
from typing import Any, TypeVar

__all__ = ["PluginError", "is_plugin_spec", "load_class"]

T = TypeVar("T")


class PluginError(ValueError):
    """A plug-in spec that cannot be loaded (not allowed, bad form, missing, wrong type)."""


def is_plugin_spec(name: str) -> bool:
    """Whether a configured name refers to user code (``module:Class``)."""
    return isinstance(name, str) and ":" in name


def load_class(spec: str, base: type[T], kind: str, allow: bool = False) -> type[T]:
    """The class named by ``spec`` (``"package.module:ClassName"``), checked to subclass
    ``base``; ``kind`` names the extension point in messages. Raises :class:`PluginError`
    unless ``allow`` is True."""
    form = f"{kind} plug-in {spec!r} must have the form 'package.module:ClassName'"
    if not isinstance(spec, str) or spec.count(":") != 1:
        raise PluginError(form)
    if not allow:
        raise PluginError(
            f"{kind} plug-in {spec!r} names user code; it is loaded only with an "
            "explicit opt-in (pass --allow-plugins to podsim, or allow=True)"
        )
    module_name, _, class_name = spec.partition(":")
    if not module_name or not class_name:
        raise PluginError(form)
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise PluginError(
            f"cannot import module {module_name!r} of plug-in {spec!r}: {exc}"
        ) from exc
    obj: Any = module
    for part in class_name.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise PluginError(
                f"module {module_name!r} has no attribute {class_name!r} (plug-in {spec!r})"
            ) from None
    if not (isinstance(obj, type) and issubclass(obj, base)):
        raise PluginError(
            f"plug-in {spec!r} is {obj!r}, not a subclass of {base.__module__}.{base.__qualname__}"
        )
    return obj
