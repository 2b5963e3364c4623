"""The optional compiled packet engine: which modules are compiled, and the switch back to
pure Python.

The packet engine's hot modules (:data:`MODULES`: the event loop, packets, ports, switches, the
NIC's per-packet paths) are plain Python; ``setup.py`` can also compile them with Cython 3 in
pure-Python mode (the ``.py`` files are the source; optional C types live in ``.pxd`` files
beside them) into extension modules that sit next to the ``.py`` files and that Python's import
system prefers. The results are bit-identical either way (tests/architecture/test_compiled.py
runs a packet scenario both ways and compares every table).

A compiled module is used only when it was built from the ``.py`` beside it: the build writes the
SHA-256 of each source next to its extension (``<module>.pysha``), and :class:`_PureFinder`
loads the ``.py`` instead when the hashes differ (an edited source in an editable checkout never
runs stale compiled code). Set ``PODSIM_PURE_PYTHON=1`` to load every one of them from its
``.py`` (debugging, profiling, the differential test). Installed by :mod:`podsim` at import;
nothing here imports anything but the standard library.
"""

from __future__ import annotations

import os
import sys
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from importlib.machinery import ModuleSpec

__all__ = ["ENV_PURE", "MODULES", "install", "pure_forced", "status"]

#: set to 1 (or true/yes/on) to run every module of :data:`MODULES` from its ``.py``
ENV_PURE = "PODSIM_PURE_PYTHON"

#: the modules setup.py compiles (the packet engine's per-event and per-packet paths: the
#: profile in README "whole packet-engine runs"), as repository paths
MODULES: tuple[str, ...] = (
    "fabric/kernel.py",
    "fabric/invariants.py",
    "fabric/packet.py",
    "fabric/port.py",
    "fabric/switch.py",
    "nic/nic.py",
    "nic/transport/qp.py",
    "nic/transport/reliability.py",
    "nic/transport/selectors.py",
    "nic/transport/pipeline.py",
    "nic/congestion/api.py",
    "nic/congestion/nscc.py",
)

#: suffix of the file holding the SHA-256 of the source an extension was built from
HASH_SUFFIX = ".pysha"

_NAMES = {"podsim." + m[: -len(".py")].replace("/", ".") for m in MODULES}


def pure_forced() -> bool:
    """True when ``PODSIM_PURE_PYTHON`` asks for pure Python."""
    return os.environ.get(ENV_PURE, "").strip().lower() in {"1", "true", "yes", "on"}


def source_hash(path: Path) -> str:
    """SHA-256 (hex) of a source file's bytes: what the build records beside an extension."""
    import hashlib  # here: ``import podsim`` stays cheap (hashlib is a few ms)

    return hashlib.sha256(path.read_bytes()).hexdigest()


def _extension(folder: Path, leaf: str) -> Path | None:
    for suffix in EXTENSION_SUFFIXES:
        ext = folder / (leaf + suffix)
        if ext.is_file():
            return ext
    return None


def _fresh(folder: Path, leaf: str) -> bool:
    """An extension for ``leaf`` sits in ``folder`` and was built from the ``.py`` there."""
    if _extension(folder, leaf) is None:
        return False
    recorded = folder / (leaf + HASH_SUFFIX)
    source = folder / (leaf + ".py")
    try:
        return recorded.read_text().strip() == source_hash(source)
    except OSError:
        return False


class _PureFinder:
    """Loads a module of :data:`MODULES` from its ``.py`` when pure Python is forced or its
    extension is missing or stale; otherwise leaves the import to the normal finders (which
    prefer the extension)."""

    def find_spec(
        self, fullname: str, path: list[str] | None = None, target: object = None
    ) -> ModuleSpec | None:
        if fullname not in _NAMES or path is None:
            return None
        leaf = fullname.rpartition(".")[2]
        for entry in path:
            folder = Path(entry)
            source = folder / (leaf + ".py")
            if not source.is_file():
                continue
            if not pure_forced() and _fresh(folder, leaf):
                return None
            if _extension(folder, leaf) is None:
                return None  # nothing to shadow: the normal import is the pure one
            import importlib.util

            return importlib.util.spec_from_file_location(fullname, source)
        return None


def install() -> None:
    """Put the finder first on ``sys.meta_path`` (once)."""
    if not any(isinstance(f, _PureFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _PureFinder())


def status() -> dict[str, bool]:
    """Module name -> whether it runs compiled (imports each module of :data:`MODULES`)."""
    import importlib

    out = {}
    for name in sorted(_NAMES):
        mod = importlib.import_module(name)
        out[name] = not str(getattr(mod, "__file__", "")).endswith(".py")
    return out
