"""The optional compiled packet engine (podsim.fabric.compiled, pyproject.toml ext-modules): one
list of compiled modules, each with its augmenting .pxd; an extension is used only when all of
them are built from the current sources and pure Python is not forced; compiled and pure runs
give the same result files, bit for bit; every instance attribute of a compiled class is declared
in its .pxd."""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import re
import subprocess
import sys
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path

import pytest
from podsim.fabric import compiled

ROOT = Path(__file__).resolve().parents[2]

#: small packet runs through every compiled path: REPS spraying, selective repeat with SACKs
#: and NSCC on the UEC NIC (quickstart), DCQCN with ECN marking and CNPs on an incast, PFC
#: pauses, classic RoCE's go-back-N, InfiniBand credit flow control with sequence-error NAKs
#: (CX-7), a link failure (timeouts, retransmissions)
CASES = (
    "quickstart",
    "incast-dcqcn",
    "incast-pfc",
    "incast-roce",
    "incast-cx7",
    "link-failure-spray",
)


def test_pyproject_compiles_exactly_the_listed_modules_each_with_its_pxd() -> None:
    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
    doc = tomllib.loads((ROOT / "pyproject.toml").read_text())
    exts = doc["tool"]["setuptools"]["ext-modules"]
    assert [e["sources"] for e in exts] == [[m] for m in compiled.MODULES]
    for e, m in zip(exts, compiled.MODULES, strict=True):
        assert e["name"] == "podsim." + m[: -len(".py")].replace("/", ".")
        assert e["optional"] is True  # no Cython or no compiler: that module stays Python
        assert (ROOT / m).is_file()
        assert compiled._pxds(ROOT / m), f"{m} has no augmenting .pxd"


def _fake_tree(root: Path, *, built: bool, edited: bool = False) -> tuple[str, ...]:
    mods = ("fabric/a.py", "fabric/b.py")
    (root / "fabric").mkdir()
    for i, m in enumerate(mods):
        src = root / m
        src.write_text("x = 1\n")
        os.utime(src, (1000 + i, 1000 + i))
        if built:
            ext = src.with_name(src.stem + EXTENSION_SUFFIXES[0])
            ext.write_bytes(b"not loaded")
            os.utime(ext, (2000, 2000))
    if edited:
        os.utime(root / mods[1], (3000, 3000))
    return mods


def test_extensions_newer_than_every_source_are_used(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv(compiled.ENV_PURE, raising=False)
    assert compiled.usable(tmp_path, _fake_tree(tmp_path, built=True))


def test_one_edited_source_makes_every_extension_unusable(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv(compiled.ENV_PURE, raising=False)
    assert not compiled.usable(tmp_path, _fake_tree(tmp_path, built=True, edited=True))


def test_a_missing_extension_means_pure_python(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv(compiled.ENV_PURE, raising=False)
    assert not compiled.usable(tmp_path, _fake_tree(tmp_path, built=False))


def test_the_environment_variable_forces_pure_python(tmp_path, monkeypatch) -> None:
    mods = _fake_tree(tmp_path, built=True)
    monkeypatch.setenv(compiled.ENV_PURE, "1")
    assert not compiled.usable(tmp_path, mods)


def test_the_finder_shadows_an_unused_extension_with_its_source(tmp_path) -> None:
    _fake_tree(tmp_path, built=True)
    finder = compiled._PureFinder()
    finder._use = False
    spec = finder.find_spec("podsim.fabric.packet", [str(tmp_path / "fabric")])
    assert spec is None  # no packet.py there: nothing to shadow
    (tmp_path / "fabric" / "packet.py").write_text("x = 1\n")
    (tmp_path / "fabric" / f"packet{EXTENSION_SUFFIXES[0]}").write_bytes(b"not loaded")
    spec = finder.find_spec("podsim.fabric.packet", [str(tmp_path / "fabric")])
    assert spec is not None and spec.origin == str(tmp_path / "fabric" / "packet.py")
    assert finder.find_spec("podsim.fabric.routing", [str(tmp_path / "fabric")]) is None
    finder._use = True
    assert finder.find_spec("podsim.fabric.packet", [str(tmp_path / "fabric")]) is None


def _loaded(pure: bool) -> list[str]:
    env = {**os.environ, compiled.ENV_PURE: "1" if pure else ""}
    code = "import json, podsim.fabric.compiled as c; print(json.dumps(c.compiled_modules()))"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    )
    return json.loads(out.stdout)


def test_forcing_pure_python_loads_every_module_from_its_source() -> None:
    assert _loaded(pure=True) == []


def _same_results():
    spec = importlib.util.spec_from_file_location(
        "same_results", ROOT / "benchmarks" / "same_results.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_compiled_and_pure_python_runs_are_identical(tmp_path, monkeypatch) -> None:
    if _loaded(pure=False) == []:
        pytest.skip(
            "the compiled packet engine is not built in this install (README, 'Compiled "
            "packet engine')"
        )
    same = _same_results()
    cases = [c for c in CASES if c in same.CASES]
    assert cases == list(CASES)
    monkeypatch.delenv(compiled.ENV_PURE, raising=False)
    same.capture(tmp_path / "compiled", cases, bench=False)
    monkeypatch.setenv(compiled.ENV_PURE, "1")
    same.capture(tmp_path / "pure", cases, bench=False)
    for case in cases:
        assert (tmp_path / "pure" / case / "summary.json").is_file(), case
        assert same.compare_case(tmp_path / "compiled" / case, tmp_path / "pure" / case) == []


# A C class has exactly the fields its augmenting .pxd declares: an attribute the .py gives an
# instance (``__slots__``, ``self.name = ...``) without declaring it there fails only in the
# compiled build, at run time. Checked statically, so it holds whichever way the suite runs.

_CLASS = re.compile(r"^cdef class (\w+)(?:\((\w+)\))?:")
_FIELD = re.compile(r"^\s+cdef (?:public |readonly )?(.+)$")


def _pxd_classes() -> dict[str, tuple[str | None, set[str], bool]]:
    """Every C class of the compiled modules' .pxd files: name -> (C base, declared fields,
    has a ``__dict__``)."""
    out: dict[str, tuple[str | None, set[str], bool]] = {}
    for m in compiled.MODULES:
        for pxd in compiled._pxds(ROOT / m):
            cls = None
            for line in pxd.read_text().splitlines():
                c = _CLASS.match(line)
                if c:
                    cls = c.group(1)
                    out[cls] = (c.group(2), set(), False)
                    continue
                f = _FIELD.match(line)
                if cls is None or not f or line.strip().startswith(("cdef class", "cpdef")):
                    continue
                decl = f.group(1)
                if "(" in decl:  # a cdef method, not a field
                    continue
                first, *rest = (part.strip() for part in decl.split(","))
                names = [first.split()[-1], *rest]
                base, fields, has_dict = out[cls]
                out[cls] = (base, fields | set(names), has_dict or "__dict__" in names)
    return out


def _declared(classes: dict[str, tuple[str | None, set[str], bool]], name: str) -> tuple[set, bool]:
    fields: set[str] = set()
    has_dict = False
    while name in classes:
        base, own, d = classes[name]
        fields |= own
        has_dict = has_dict or d
        name = base
    return fields, has_dict


def _instance_attributes(cls: ast.ClassDef) -> set[str]:
    """``__slots__`` names and every ``self.name`` assigned in the class's methods (names the
    class body defines itself, properties for instance, are not instance fields)."""
    own = {n.name for n in cls.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
    names: set[str] = set()
    for node in cls.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__slots__" for t in node.targets
        ):
            names |= {e.value for e in ast.walk(node.value) if isinstance(e, ast.Constant)}
    for node in ast.walk(cls):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AnnAssign | ast.AugAssign):
            targets = [node.target]
        for t in targets:
            for e in ast.walk(t):
                if (
                    isinstance(e, ast.Attribute)
                    and isinstance(e.value, ast.Name)
                    and e.value.id == "self"
                ):
                    names.add(e.attr)
    return names - own


def test_every_instance_attribute_of_a_c_class_is_declared_in_its_pxd() -> None:
    classes = _pxd_classes()
    assert {"Packet", "Port", "RdmaPacket", "QueuePair", "SmartNic"} <= set(classes)
    missing = []
    seen = set()
    for m in compiled.MODULES:
        tree = ast.parse((ROOT / m).read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and node.name in classes:
                seen.add(node.name)
                fields, has_dict = _declared(classes, node.name)
                if has_dict:
                    continue
                missing += [
                    f"{m}: {node.name}.{a}" for a in sorted(_instance_attributes(node) - fields)
                ]
    assert seen == set(classes), "a .pxd declares a class its module does not define"
    assert missing == [], "declare these in the module's .pxd (README, 'Compiled packet engine')"


def test_the_check_finds_an_undeclared_field() -> None:
    src = "class A:\n    __slots__ = ('x', 'y')\n\n    def f(self):\n        self.z = 1\n"
    cls = ast.parse(src).body[0]
    assert _instance_attributes(cls) == {"x", "y", "z"}
