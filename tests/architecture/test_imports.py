"""The packages import one way, and no module-level import cycle exists.

Layers, bottom up (README "Layout"): ``fabric`` and ``workloads`` import no other podsim package
(the one exception: ``workloads`` uses the stdlib-only :mod:`podsim.fabric.registry`), ``nic``
imports ``fabric``, ``scenarios`` imports all of them. Every import counts for the layering, those
inside functions too. For cycles only module-level imports count (an import inside a function
runs after both modules are loaded, which is how an upward call is deferred on purpose).
The tests read the source with :mod:`ast`; nothing is imported.
"""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx
import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("fabric", "nic", "workloads", "scenarios")

#: package -> the podsim packages it may import (itself always)
ALLOWED = {
    "fabric": set(),
    "workloads": set(),
    "nic": {"fabric"},
    "scenarios": {"fabric", "nic", "workloads"},
}
#: the documented exception: module -> what it may import across the layers
EXCEPTIONS = {("workloads", "podsim.fabric.registry")}


def _modules() -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            rel = path.relative_to(ROOT).with_suffix("")
            parts = list(rel.parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out["podsim." + ".".join(parts)] = path
    return out


MODULES = _modules()


def _resolve(name: str) -> str | None:
    """The podsim module ``name`` refers to (a module, else its package), or None."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _imports(module: str, path: Path, *, top_level_only: bool) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    nodes = _top_level(tree) if top_level_only else ast.walk(tree)
    is_pkg = path.name == "__init__.py"
    out: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = module.split(".")
                anchor = anchor if is_pkg else anchor[:-1]
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            # ``from pkg import sub`` imports the submodule ``pkg.sub``
            names = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base
                     for a in node.names]  # fmt: skip
        else:
            continue
        for name in names:
            if name.startswith("podsim."):
                target = _resolve(name)
                if target and target != module:
                    out.add(target)
    return out


def _top_level(tree: ast.Module):
    """Statements run at import time: the module body, including inside if/try blocks
    (but not ``if TYPE_CHECKING:``), never inside functions or classes' methods."""
    stack = list(tree.body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            stack.extend(node.orelse)
            continue
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            continue
        yield node
        if isinstance(node, ast.If | ast.Try | ast.With | ast.For | ast.While | ast.ClassDef):
            for field in ("body", "orelse", "finalbody", "handlers"):
                stack.extend(getattr(node, field, []))


def _package(module: str) -> str:
    return module.split(".")[1]


def test_the_source_tree_is_found() -> None:
    assert {"podsim.fabric.switch", "podsim.nic.nic", "podsim.scenarios.runner"} <= set(MODULES)


@pytest.mark.parametrize("package", PACKAGES)
def test_a_package_imports_only_the_layers_below_it(package: str) -> None:
    bad = []
    for module, path in MODULES.items():
        if _package(module) != package:
            continue
        for target in _imports(module, path, top_level_only=False):
            other = _package(target)
            if other == package or other in ALLOWED[package]:
                continue
            if (package, target) in EXCEPTIONS:
                continue
            bad.append(f"{module} imports {target}")
    assert not bad, "imports against the layering:\n" + "\n".join(sorted(bad))


def test_no_module_level_import_cycle() -> None:
    g = nx.DiGraph()
    for module, path in MODULES.items():
        g.add_node(module)
        for target in _imports(module, path, top_level_only=True):
            # a package's __init__ importing its own submodules is how a package re-exports;
            # a submodule importing names from its package's __init__ is the other half of it
            if target.startswith(module + ".") or module.startswith(target + "."):
                continue
            g.add_edge(module, target)
    cycles = [c for c in nx.simple_cycles(g) if len(c) > 1]
    assert not cycles, "module-level import cycles:\n" + "\n".join(
        " -> ".join([*c, c[0]]) for c in cycles[:10]
    )


def test_the_checker_sees_a_violation(tmp_path: Path) -> None:
    """The checker itself can fail: an upward import and a cycle written to a scratch file."""
    upward = tmp_path / "up.py"
    upward.write_text("from podsim.scenarios.runner import run\n")
    assert "podsim.scenarios.runner" in _imports("podsim.fabric.up", upward, top_level_only=False)
    lazy = tmp_path / "lazy.py"
    lazy.write_text("def f():\n    from podsim.nic.nic import RdmaNetwork\n")
    assert _imports("podsim.fabric.lazy", lazy, top_level_only=True) == set()
    assert _imports("podsim.fabric.lazy", lazy, top_level_only=False) == {"podsim.nic.nic"}
