"""Shared helpers for the scenario-layer tests."""

from __future__ import annotations

import itertools
from pathlib import Path

import pandas as pd
import pytest
import yaml


def write_trace_csv(
    path: Path, ranks: int = 4, size: int = 65536, phases=("dispatch", "combine")
) -> Path:
    """A small uniform all-to-all trace (the brief's columns), one layer."""
    rows = [
        {
            "step": 0,
            "layer": 0,
            "phase": ph,
            "src_rank": s,
            "dst_rank": d,
            "bytes": size,
            "tokens": 8,
            "start_s": 0.0,
            "hop": "local" if s == d else "rdma",
        }
        for ph in phases
        for s, d in itertools.product(range(ranks), range(ranks))
    ]
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def base_doc() -> dict:
    """A small valid scenario: 4 NICs on one switch replaying a trace file."""
    return {
        "name": "base",
        "seed": 1,
        "engine": "packet",
        "cluster": {
            "topology": {"name": "star", "params": {"hosts": 4}},
            "nic": {
                "mtu": "4KiB",
                "rate": "400Gbps",
                "cc": {"name": "dcqcn"},
                "multipath": {"selector": "spray", "paths": 4},
            },
            "switch": {
                "buffer": "16MiB",
                "latency": "600ns",
                "ecn": {"kmin": "150KB", "kmax": "1500KB"},
            },
        },
        "workload": {"trace": {"path": "trace.csv", "compute_time": "1us"}},
        "sim": {"sample_interval": "1us"},
        "outputs": {"formats": ["parquet"], "plots": False},
    }


@pytest.fixture
def scenario_dir(tmp_path: Path) -> Path:
    """A folder with trace.csv and base.yaml (the base_doc scenario)."""
    write_trace_csv(tmp_path / "trace.csv")
    (tmp_path / "base.yaml").write_text(yaml.safe_dump(base_doc(), sort_keys=False))
    return tmp_path


#: command-line overrides that make quickstart small enough for the default suite
SMALL = ["--set", "workload.moe.tokens_per_rank=16"]


@pytest.fixture(scope="session")
def quickstart_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``podsim run`` with no scenario file (quickstart, small), run once per session."""
    from podsim.scenarios.cli.app import app
    from typer.testing import CliRunner

    out = tmp_path_factory.mktemp("qs") / "out"
    result = CliRunner().invoke(app, ["run", "--out", str(out), *SMALL])
    assert result.exit_code == 0, result.output
    assert "all-to-all completion time" in result.output and "results in" in result.output
    return out
