"""podsim installs under one import root, ``podsim``, and nothing else.

The repository's top-level folders (fabric/, nic/, workloads/, scenarios/) are the packages
``podsim.fabric`` and so on (pyproject.toml ``package-dir``). A generic top-level name would
clash with other distributions: PyPI's ``fabric`` (the SSH library) imports as ``fabric``. The
slow test installs the built wheel next to PyPI's ``fabric`` in a fresh virtual environment and
runs both.
"""

from __future__ import annotations

import os
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TOP = ("fabric", "nic", "workloads", "scenarios")


def _declared_packages() -> list[str]:
    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
    with open(ROOT / "pyproject.toml", "rb") as fh:
        return tomllib.load(fh)["tool"]["setuptools"]["packages"]


def _folder_packages() -> list[str]:
    found = ["podsim"]
    for top in TOP:
        for init in sorted((ROOT / top).rglob("__init__.py")):
            rel = init.parent.relative_to(ROOT)
            found.append("podsim." + ".".join(rel.parts))
    return found


def test_the_packages_list_matches_the_folders() -> None:
    # a subpackage missing from the list would be absent from the wheel (and from a user's
    # install) while the editable checkout still imports it
    assert sorted(_declared_packages()) == sorted(_folder_packages())


def test_every_package_imports_under_podsim() -> None:
    import importlib

    for name in _folder_packages():
        mod = importlib.import_module(name)
        assert Path(mod.__file__).resolve().is_relative_to(ROOT), name


def test_the_installed_distribution_has_one_top_level_name() -> None:
    from importlib.metadata import distribution

    top_level = distribution("podsim").read_text("top_level.txt")
    assert top_level is not None and top_level.split() == ["podsim"]


@pytest.mark.slow
def test_wheel_installs_beside_pypi_fabric_and_runs(tmp_path: Path) -> None:
    """Build the wheel, install it with PyPI's ``fabric`` into a fresh venv (dependencies from
    the package index), import both, and run ``podsim run`` on the default scenario."""
    wheels = tmp_path / "wheels"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(wheels), str(ROOT)],
        check=True,
        timeout=600,
    )
    (wheel,) = wheels.glob("podsim-*.whl")
    tops = {n.split("/")[0] for n in zipfile.ZipFile(wheel).namelist()}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"podsim"}, tops

    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    py = env_dir / "bin" / "python"
    subprocess.run([py, "-m", "pip", "install", "-q", str(wheel), "fabric"], check=True,
                   timeout=1800)  # fmt: skip
    probe = (
        "import fabric, podsim, podsim.fabric; "
        "assert hasattr(fabric, 'Connection'), 'PyPI fabric'; "
        "assert podsim.fabric.__name__ == 'podsim.fabric'; "
        "print(podsim.__version__)"
    )
    # outside the checkout, whose folders would shadow the installed packages on ``-c``'s path
    out = subprocess.run([py, "-c", probe], capture_output=True, text=True, check=True,
                         cwd=tmp_path)  # fmt: skip
    assert out.stdout.strip()
    env = {**os.environ, "MPLBACKEND": "Agg"}
    run = subprocess.run(
        [env_dir / "bin" / "podsim", "run", "--quiet", "--out", str(tmp_path / "res")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=900,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert (tmp_path / "res" / "summary.json").is_file()
