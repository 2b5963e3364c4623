"""benchmarks/bench_scale.py --training hands the issue-17 training step to bench_training.py
(the script that measures it) with the hierarchical data-parallel reduction."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_training_mode_runs_bench_training_with_the_hierarchical_reduction() -> None:
    cmd = _load("bench_scale").training_command([1024, 10240])
    assert cmd[0] == sys.executable
    assert Path(cmd[1]) == BENCH / "bench_training.py" and Path(cmd[1]).is_file()
    assert cmd[2:] == ["--gpus", "1024", "10240", "--dp-algorithm", "hierarchical"]
    # the command line is one bench_training accepts (its parser stops at --help after it)
    out = subprocess.run([*cmd, "--help"], capture_output=True, text=True, check=True).stdout
    assert "--dp-algorithm" in out
    assert _load("bench_training").TARGET_GPUS == 10_240
