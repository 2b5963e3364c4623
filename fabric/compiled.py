"""The optional compiled packet engine: which modules may run compiled, and the switch back to
pure Python.

The packet engine's per-packet modules (:data:`MODULES`) are plain Python, and that is their
only source. An install with Cython available at build time (README, "Compiled packet engine")
also compiles them into extension modules beside the ``.py`` files, with C types taken from the
augmenting ``.pxd`` files beside them (packets, ports, switches, queue pairs, their reliability
state and the NIC as C structs); Python's
import system prefers an extension to the ``.py`` of the same name. Results are bit-identical
either way (tests/architecture/test_compiled.py, ``benchmarks/same_results.py``).

All or nothing: the extensions are used only when every one of them is present and newer than
every ``.py`` and ``.pxd`` of :data:`MODULES` (their C layouts depend on each other, and an
edited source must never be shadowed by an extension built from an older one: it then runs as
Python until the next build). ``PODSIM_PURE_PYTHON=1`` runs them all as Python (debugging,
profiling, the differential tests). :func:`install` (called by ``import podsim``) puts the finder
that enforces this first on ``sys.meta_path``; this module imports only the standard library.
"""

from __future__ import annotations

import os
import sys
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from importlib.machinery import ModuleSpec

__all__ = ["ENV_PURE", "MODULES", "compiled_modules", "install", "pure_forced", "usable"]

#: set to 1 (or true/yes/on) to run every module of :data:`MODULES` from its ``.py``
ENV_PURE = "PODSIM_PURE_PYTHON"

#: the modules pyproject.toml's ``ext-modules`` compile, as repository paths (the hottest
#: per-packet paths of a whole run: README, "whole packet-engine runs")
MODULES: tuple[str, ...] = (
    "fabric/packet.py",
    "fabric/port.py",
    "fabric/switch.py",
    "nic/transport/pipeline.py",
    "nic/transport/reliability.py",
    "nic/transport/qp.py",
    "nic/nic.py",
)

_ROOT = Path(__file__).resolve().parent.parent
_NAMES = {"podsim." + m[: -len(".py")].replace("/", ".") for m in MODULES}


def pure_forced() -> bool:
    """True when ``PODSIM_PURE_PYTHON`` asks for pure Python."""
    return os.environ.get(ENV_PURE, "").strip().lower() in {"1", "true", "yes", "on"}


def _extension(source: Path) -> Path | None:
    for suffix in EXTENSION_SUFFIXES:
        ext = source.with_name(source.stem + suffix)
        if ext.is_file():
            return ext
    return None


def _pxds(source: Path, root: Path = _ROOT) -> list[Path]:
    """The augmenting .pxd of ``source`` under ``root``, named by its module (Cython finds a
    module's .pxd by its qualified name, and the repository root is the package ``podsim``,
    so ``fabric/switch.pxd`` would be looked for as ``podsim/fabric/switch.pxd``: the .pxd is
    ``fabric/podsim.fabric.switch.pxd``, found through ``include-dirs``, pyproject.toml)."""
    name = "podsim." + source.relative_to(root).with_suffix("").as_posix().replace("/", ".")
    pxd = source.with_name(name + ".pxd")
    return [pxd] if pxd.is_file() else []


def usable(root: Path = _ROOT, modules: tuple[str, ...] = MODULES) -> bool:
    """Every module of ``modules`` under ``root`` has an extension, and the oldest extension
    is newer than the newest ``.py``/``.pxd`` among them (not :func:`pure_forced`)."""
    if pure_forced():
        return False
    oldest_ext = float("inf")
    newest_src = 0.0
    for m in modules:
        source = root / m
        ext = _extension(source)
        if ext is None:
            return False
        try:
            oldest_ext = min(oldest_ext, ext.stat().st_mtime)
            for src in [source, *_pxds(source, root)]:
                newest_src = max(newest_src, src.stat().st_mtime)
        except OSError:
            return False
    return oldest_ext >= newest_src


class _PureFinder:
    """Loads a module of :data:`MODULES` from its ``.py`` unless :func:`usable`; otherwise
    leaves the import to the normal finders (which prefer the extension)."""

    def __init__(self) -> None:
        self._use: bool | None = None  # decided once per process, at the first import

    def find_spec(
        self, fullname: str, path: list[str] | None = None, target: object = None
    ) -> ModuleSpec | None:
        if fullname not in _NAMES or path is None:
            return None
        if self._use is None:
            self._use = usable()
        if self._use:
            return None
        leaf = fullname.rpartition(".")[2]
        for entry in path:
            source = Path(entry) / (leaf + ".py")
            if source.is_file():
                if _extension(source) is None:
                    return None  # nothing to shadow: the normal import is the pure one
                import importlib.util  # here: ``import podsim`` stays cheap

                return importlib.util.spec_from_file_location(fullname, source)
        return None


def install() -> None:
    """Put the finder first on ``sys.meta_path`` (once)."""
    if not any(isinstance(f, _PureFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _PureFinder())


def compiled_modules() -> list[str]:
    """The modules of :data:`MODULES` that run compiled in this process (imports them)."""
    import importlib

    return [
        name
        for name in sorted(_NAMES)
        if not str(getattr(importlib.import_module(name), "__file__", "")).endswith(".py")
    ]
