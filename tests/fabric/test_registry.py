"""Registry: built-ins load on the first lookup, and a built-in that fails to import is loud."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from podsim.fabric.registry import Registry, UnknownNameError


def test_builtins_register_on_first_lookup_not_at_definition(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "reg_builtins_demo.py").write_text(
        "from tests_registry_holder import REG\nREG.add('alpha', 1, 'the first')\n"
    )
    (tmp_path / "tests_registry_holder.py").write_text(
        "from podsim.fabric.registry import Registry\n"
        "REG = Registry('demo', builtins=('reg_builtins_demo',))\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    import tests_registry_holder as holder

    assert "reg_builtins_demo" not in sys.modules  # defining the registry imported nothing
    assert holder.REG.get("alpha") == 1
    assert holder.REG.describe() == [("alpha", "the first")]
    with pytest.raises(UnknownNameError, match="Did you mean 'alpha'"):
        holder.REG.get("alpah")


def test_a_builtin_that_cannot_import_fails_the_lookup() -> None:
    reg: Registry[int] = Registry("demo", builtins=("podsim.no_such_module_here",))
    with pytest.raises(ModuleNotFoundError, match="no_such_module_here"):
        reg.names()


def test_engines_and_topologies_list_their_builtins() -> None:
    from podsim.fabric.topology import TOPOLOGIES
    from podsim.scenarios.engines import ENGINES

    assert {"packet", "flow", "bound"} <= set(ENGINES.names())
    assert "superpod-128" in TOPOLOGIES  # registered by podsim.fabric.superpod on first lookup
