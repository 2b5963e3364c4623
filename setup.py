"""Build script: the package itself is declared in pyproject.toml; this file only adds the
optional compiled packet engine (Cython 3, pure-Python mode) and keeps itself out of the wheel.

The modules listed in compiled.py (``MODULES``) are compiled when Cython >= 3.1 and a C compiler
are available and ``PODSIM_COMPILE`` is not ``0``; any failure (no Cython, no compiler, a
compile error) leaves that module, or all of them, pure Python, which gives identical results.
Each extension gets a ``.pysha`` file beside it: the SHA-256 of the source it was built from, so
that an edited ``.py`` is never shadowed by a stale extension (podsim/compiled.py).
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("_podsim_compiled", ROOT / "compiled.py")
compiled = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(compiled)

#: Cython directives: Python semantics everywhere (annotations are not C types; division,
#: bounds and wrap-around behave as in Python); C types come only from the .pxd files
DIRECTIVES = {
    "language_level": 3,
    "annotation_typing": False,
    "binding": True,
    "embedsignature": False,
}


def _note(msg: str) -> None:
    print(f"podsim build: {msg}", file=sys.stderr)


def _extensions() -> list[Extension]:
    if os.environ.get("PODSIM_COMPILE", "1").strip().lower() in {"0", "false", "no", "off"}:
        _note("PODSIM_COMPILE=0: pure Python")
        return []
    try:
        import Cython
        from Cython.Build import cythonize
    except ImportError:
        _note("Cython not installed: pure Python")
        return []
    if tuple(int(p) for p in Cython.__version__.split(".")[:2]) < (3, 1):
        _note(f"Cython {Cython.__version__} < 3.1: pure Python")
        return []
    exts = [
        Extension("podsim." + m[: -len(".py")].replace("/", "."), [m], extra_compile_args=["-O2"])
        for m in compiled.MODULES
    ]
    try:
        return cythonize(
            exts,
            compiler_directives=DIRECTIVES,
            build_dir="build/cython",
            quiet=True,
            nthreads=0,
        )
    except Exception as exc:  # a Cython error must not break the install
        _note(f"Cython failed ({exc}): pure Python")
        return []


class OptionalBuildExt(build_ext):
    """build_ext that skips what it cannot build and records each extension's source hash
    beside it (in the build folder, and in the source tree for an editable install)."""

    def run(self) -> None:
        self._built: list[Extension] = []
        try:
            super().run()
        except Exception as exc:  # no compiler at all
            _note(f"no extension built ({exc}): pure Python")
        build_py = self.get_finalized_command("build_py")
        for ext in self._built:
            source = ROOT / (ext.name.split(".", 1)[1].replace(".", "/") + ".py")
            digest = compiled.source_hash(source)
            leaf = ext.name.rpartition(".")[2] + compiled.HASH_SUFFIX
            inplace_file, regular_file = self._get_inplace_equivalent(build_py, ext)
            places = [regular_file, inplace_file] if self.inplace else [regular_file]
            for place in places:
                if Path(place).is_file():
                    (Path(place).parent / leaf).write_text(digest)

    def build_extension(self, ext: Extension) -> None:
        try:
            super().build_extension(ext)
        except Exception as exc:
            _note(f"{ext.name} not built ({exc}): pure Python for it")
            return
        self._built.append(ext)


class BuildPy(build_py):
    """build_py without this script (the root folder is the package ``podsim``)."""

    def find_package_modules(self, package: str, package_dir: str) -> list[tuple[str, str, str]]:
        mods = super().find_package_modules(package, package_dir)
        return [m for m in mods if not (package == "podsim" and m[1] == "setup")]


setup(
    ext_modules=_extensions(),
    cmdclass={"build_ext": OptionalBuildExt, "build_py": BuildPy},
)
