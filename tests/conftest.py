"""Suite-wide hook: tests marked ``pure_python`` (they patch packet-engine classes, which the
optional compiled build makes C types that cannot be patched) run in a child pytest with
``PODSIM_PURE_PYTHON=1`` when the compiled packet engine is loaded (podsim.fabric.compiled);
otherwise they run here as usual."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

_ROOT = Path(__file__).resolve().parent.parent


def _compiled() -> bool:
    from podsim.fabric.compiled import compiled_modules

    return bool(compiled_modules())


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    if pyfuncitem.get_closest_marker("pure_python") is None or not _compiled():
        return None
    from podsim.fabric.compiled import ENV_PURE

    env = {**os.environ, ENV_PURE: "1"}
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", pyfuncitem.nodeid]
    r = subprocess.run(cmd, cwd=_ROOT, env=env, capture_output=True, text=True)
    if r.returncode != 0:
        pytest.fail(f"in a pure-Python child ({ENV_PURE}=1):\n{r.stdout[-4000:]}{r.stderr[-2000:]}")
    return True
