"""A sweep's worker processes end with it: SIGTERM stops the sweep like Ctrl-C, and a SIGKILL
of the sweep process ends its workers too (issue 20, item 6)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def slow_point(resolved: dict) -> dict:
    """A point that records its worker's pid and then simulates for a minute."""
    Path(resolved["pid_dir"], str(os.getpid())).touch()
    time.sleep(60)
    return {"metric": 1.0}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split(") ")[-1].startswith("Z"))


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads worker states from /proc")
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_workers_end_with_the_sweep(tmp_path: Path, sig: signal.Signals) -> None:
    pids = tmp_path / "pids"
    pids.mkdir()
    code = textwrap.dedent(
        f"""
        import sys
        sys.path.insert(0, {str(ROOT)!r})
        from podsim.scenarios.cli.app import terminate_like_interrupt
        from podsim.scenarios.study.engine import run_points
        from podsim.scenarios.study.spec import Study
        from podsim.scenarios.study.sweep import resolve_dict, resolve_points
        from tests.scenarios.test_sweep_signals import slow_point

        if __name__ == "__main__":
            terminate_like_interrupt()
            study = Study.model_validate({{"name": "s", "base": "x", "grid": {{"x": [1, 2]}}}})
            base = {{"x": 0, "pid_dir": {str(pids)!r}}}
            points = resolve_points(study, lambda _b, ov: resolve_dict(base, ov))
            report = run_points(points, slow_point, {str(tmp_path / "out")!r}, workers=2,
                                progress=False)
            sys.exit(130 if report.interrupted else 0)
        """
    )
    script = tmp_path / "sweep.py"
    script.write_text(code)
    proc = subprocess.Popen([sys.executable, str(script)], cwd=tmp_path)
    deadline = time.monotonic() + 120
    while len(list(pids.iterdir())) < 2 and time.monotonic() < deadline:
        time.sleep(0.2)
    workers = [int(p.name) for p in pids.iterdir()]
    assert len(workers) == 2, "the workers did not start"
    proc.send_signal(sig)
    rc = proc.wait(timeout=60)
    assert rc == (-signal.SIGKILL if sig == signal.SIGKILL else 130)
    deadline = time.monotonic() + 10
    while any(_alive(w) for w in workers) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [w for w in workers if _alive(w)], "workers outlived the sweep"
