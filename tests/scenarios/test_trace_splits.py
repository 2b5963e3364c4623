"""workload.trace reads an all-to-all split matrix (podsim.workloads.splits): .npy by its
extension, CSV with format: splits; bytes are conserved and bad settings name their key."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import podsim
import pytest
import yaml
from podsim.scenarios.cli.app import app
from typer.testing import CliRunner

M = np.array([[0, 40_000, 0, 8_000], [1_000, 0, 2_000, 0], [0, 0, 0, 64_000], [5, 6, 7, 0]])


def _scenario(tmp_path: Path, trace: dict) -> Path:
    f = tmp_path / "s.yaml"
    sc = {
        "name": "splits",
        "engine": "flow",
        "cluster": {"topology": {"name": "star", "params": {"hosts": 4}}},
        "workload": {"trace": trace},
        "outputs": {"plots": False},
    }
    f.write_text(yaml.safe_dump(sc))
    return f


@pytest.mark.parametrize("kind", ["npy", "csv"])
def test_a_split_matrix_runs_and_conserves_its_bytes(tmp_path: Path, kind: str) -> None:
    if kind == "npy":
        np.save(tmp_path / "m.npy", M)
        f = _scenario(tmp_path, {"path": "m.npy"})
    else:
        (tmp_path / "m.csv").write_text("\n".join(",".join(map(str, r)) for r in M))
        f = _scenario(tmp_path, {"path": "m.csv", "format": "splits"})
    res = podsim.run(f)
    assert res.summary["status"] == "complete"
    msgs = res.messages
    assert int(msgs["bytes"].sum()) == int(M.sum())
    assert len(msgs) == int((M > 0).sum())
    assert set(msgs["hop"]) == {"rdma"}  # one NIC per host on a star: no scale-up


def test_tokens_need_bytes_per_token_and_the_error_names_the_key(tmp_path: Path) -> None:
    np.save(tmp_path / "m.npy", M)
    f = _scenario(tmp_path, {"path": "m.npy", "unit": "tokens"})
    r = CliRunner().invoke(app, ["run", str(f)])
    assert r.exit_code == 2
    assert "workload.trace" in r.output and "bytes_per_token" in r.output
    f = _scenario(tmp_path, {"path": "m.npy", "unit": "tokens", "bytes_per_token": 7392})
    res = podsim.run(f)
    assert int(res.messages["bytes"].sum()) == int(M.sum()) * 7392
