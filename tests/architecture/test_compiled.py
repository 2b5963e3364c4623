"""The optional compiled packet engine (podsim/compiled.py, setup.py): the compiled modules give
the same results as the pure-Python ones, bit for bit, and pure Python runs whenever it is asked
for or the compiled module is not from the source beside it."""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest
from podsim import compiled

ROOT = Path(__file__).resolve().parents[2]

#: small packet runs through every compiled module: REPS spraying, selective repeat, NSCC on the
#: UEC NIC (quickstart), DCQCN with ECN on an incast
CASES = ("quickstart", "incast-dcqcn")


def _same_results():
    spec = importlib.util.spec_from_file_location(
        "same_results", ROOT / "benchmarks" / "same_results.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_every_listed_module_exists_and_is_a_module_name() -> None:
    for path in compiled.MODULES:
        assert (ROOT / path).is_file(), path
    assert len(compiled._NAMES) == len(compiled.MODULES)
    assert all(n.startswith("podsim.") and n.count("/") == 0 for n in compiled._NAMES)


def _fake_module(folder: Path, leaf: str, *, built_from: bytes, source: bytes) -> None:
    (folder / f"{leaf}.py").write_bytes(source)
    (folder / f"{leaf}{importlib.machinery.EXTENSION_SUFFIXES[0]}").write_bytes(b"not loaded")
    digest = hashlib.sha256(built_from).hexdigest()
    (folder / f"{leaf}{compiled.HASH_SUFFIX}").write_text(digest)


def test_a_fresh_extension_is_left_to_the_normal_import(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv(compiled.ENV_PURE, raising=False)
    _fake_module(tmp_path, "kernel", built_from=b"x = 1\n", source=b"x = 1\n")
    finder = compiled._PureFinder()
    assert compiled._fresh(tmp_path, "kernel")
    assert finder.find_spec("podsim.fabric.kernel", [str(tmp_path)]) is None


def test_a_stale_extension_is_shadowed_by_its_source(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv(compiled.ENV_PURE, raising=False)
    _fake_module(tmp_path, "kernel", built_from=b"x = 1\n", source=b"x = 2\n")
    spec = compiled._PureFinder().find_spec("podsim.fabric.kernel", [str(tmp_path)])
    assert spec is not None and spec.origin == str(tmp_path / "kernel.py")


def test_the_environment_variable_forces_the_source(tmp_path, monkeypatch) -> None:
    _fake_module(tmp_path, "kernel", built_from=b"x = 1\n", source=b"x = 1\n")
    monkeypatch.setenv(compiled.ENV_PURE, "1")
    spec = compiled._PureFinder().find_spec("podsim.fabric.kernel", [str(tmp_path)])
    assert spec is not None and spec.origin == str(tmp_path / "kernel.py")
    # modules outside the list are never touched
    assert compiled._PureFinder().find_spec("podsim.fabric.routing", [str(tmp_path)]) is None


def _status(pure: bool) -> dict[str, bool]:
    env_set = f"import os; os.environ[{compiled.ENV_PURE!r}] = '1'; " if pure else ""
    code = f"{env_set}import json, podsim.compiled as c; print(json.dumps(c.status()))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    import json

    return json.loads(out.stdout)


def test_forcing_pure_python_loads_every_module_from_its_source() -> None:
    assert not any(_status(pure=True).values())


def test_compiled_and_pure_python_runs_are_identical(tmp_path, monkeypatch) -> None:
    status = _status(pure=False)
    if not any(status.values()):
        pytest.skip(
            "no compiled module in this install (pure Python only): build them with "
            "`pip install 'cython>=3.1' wheel && pip install --no-build-isolation -e .`"
        )
    same = _same_results()
    monkeypatch.delenv(compiled.ENV_PURE, raising=False)
    same.capture(tmp_path / "compiled", list(CASES), bench=False)
    monkeypatch.setenv(compiled.ENV_PURE, "1")
    same.capture(tmp_path / "pure", list(CASES), bench=False)
    for case in CASES:
        assert (tmp_path / "pure" / case / "summary.json").is_file(), case
        assert same.compare_case(tmp_path / "compiled" / case, tmp_path / "pure" / case) == []
