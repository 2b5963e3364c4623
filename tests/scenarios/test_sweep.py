"""Sweep engine: resume after interruption, each point once, same table on every executor."""

from __future__ import annotations

import uuid
from pathlib import Path

import pandas as pd
import pytest
from podsim.scenarios.cli.app import app
from podsim.scenarios.study.engine import run_points
from podsim.scenarios.study.spec import Study, load_study
from podsim.scenarios.study.store import ResultStore, point_key
from podsim.scenarios.study.sweep import resolve_dict, resolve_points
from typer.testing import CliRunner


def cheap_point(resolved: dict) -> dict:
    """A stand-in for a simulation: records each call as a file, returns closed-form metrics."""
    marker = Path(resolved["counter_dir"]) / f"{point_key(resolved)}.{uuid.uuid4().hex}"
    marker.touch()
    x, y = resolved["x"], resolved["net"]["y"]
    return {"metric": x * y, "capex_usd": 1000.0 + x + y, "label": f"{x}/{y}"}


def failing_point(resolved: dict) -> dict:
    if resolved["x"] == 2:
        raise RuntimeError("boom at x=2")
    return cheap_point(resolved)


def _points(counter: Path, extra: dict | None = None):
    study = Study.model_validate(
        {
            "name": "toy",
            "base": "inline",
            "grid": {"x": [1, 2, 3], "net.y": [10, 20]},
            **(extra or {}),
        }
    )
    base = {"x": 0, "net": {"y": 0}, "counter_dir": str(counter)}
    return resolve_points(study, lambda _b, ov: resolve_dict(base, ov))


def _calls(counter: Path) -> dict[str, int]:
    out: dict[str, int] = {}
    for f in counter.iterdir():
        k = f.name.split(".")[0]
        out[k] = out.get(k, 0) + 1
    return out


@pytest.fixture()
def importable_tests(monkeypatch: pytest.MonkeyPatch) -> None:
    """Spawned pool workers unpickle ``cheap_point`` by its module name (``tests.scenarios...``):
    they need the checkout's root on the path they inherit."""
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[2]))


@pytest.fixture()
def counter(tmp_path: Path) -> Path:
    d = tmp_path / "calls"
    d.mkdir()
    return d


def test_grid_points_and_keys(counter: Path) -> None:
    pts = _points(counter)
    assert [p.params for p in pts][:2] == [{"net.y": 10, "x": 1}, {"net.y": 20, "x": 1}]
    assert len({p.key for p in pts}) == 6
    # the key is a hash of the resolved scenario: stable, and equal for equal scenarios
    assert [p.key for p in pts] == [p.key for p in _points(counter)]


def test_interrupted_sweep_resumes_each_point_once(tmp_path: Path, counter: Path) -> None:
    pts = _points(counter)
    out = tmp_path / "interrupted"
    seen = []

    def stop_after_two(point, ok):
        seen.append(point.key)
        if len(seen) == 2:
            raise KeyboardInterrupt

    first = run_points(pts, cheap_point, out, workers=0, progress=False, on_done=stop_after_two)
    assert first.interrupted and len(first.table) == 2
    assert set(ResultStore(out).done_keys()) == set(seen)
    second = run_points(pts, cheap_point, out, workers=0, progress=False)
    assert not second.interrupted
    assert sorted(second.skipped) == sorted(seen) and len(second.ran) == 4
    calls = _calls(counter)
    assert calls == {p.key: 1 for p in pts}  # every point ran exactly once overall

    clean_counter = tmp_path / "calls2"
    clean_counter.mkdir()
    pts2 = _points(clean_counter)
    clean = run_points(pts2, cheap_point, tmp_path / "clean", workers=0, progress=False)
    a = second.table.drop(columns=[])
    b = clean.table
    # resolved scenarios differ only in counter_dir: compare everything but the key
    pd.testing.assert_frame_equal(a.drop(columns="key"), b.drop(columns="key"))
    assert list(a["metric"]) == [x * y for x in (1, 2, 3) for y in (10, 20)]
    pd.testing.assert_frame_equal(pd.read_parquet(out / "results.parquet"), second.table)
    assert not (out / "parts").exists()


def test_finished_parts_survive_a_crash_before_compaction(tmp_path: Path, counter: Path) -> None:
    pts = _points(counter)
    out = tmp_path / "crash"
    store = ResultStore(out)
    for p in pts[:3]:  # written point by point, never compacted (the process "died")
        store.write_point({**cheap_point(p.resolved), **p.meta()})
    report = run_points(pts, cheap_point, out, workers=0, progress=False)
    assert len(report.skipped) == 3 and len(report.ran) == 3 and len(report.table) == 6
    assert _calls(counter) == {p.key: 1 for p in pts}


def test_failed_points_are_reported_and_retried(tmp_path: Path, counter: Path) -> None:
    pts = _points(counter)
    out = tmp_path / "fail"
    rep = run_points(pts, failing_point, out, workers=0, progress=False)
    assert len(rep.failures) == 2 and "boom at x=2" in rep.failures[0].error
    assert len(rep.table) == 4
    rep2 = run_points(pts, cheap_point, out, workers=0, progress=False)
    assert len(rep2.ran) == 2 and len(rep2.table) == 6


@pytest.mark.usefixtures("importable_tests")
def test_process_pool_matches_in_process(tmp_path: Path, counter: Path) -> None:
    pts = _points(counter)
    serial = run_points(pts, cheap_point, tmp_path / "serial", workers=0, progress=False)
    for f in counter.iterdir():
        f.unlink()
    pool = run_points(pts, cheap_point, tmp_path / "pool", workers=2, progress=False)
    pd.testing.assert_frame_equal(serial.table, pool.table)
    assert _calls(counter) == {p.key: 1 for p in pts}


@pytest.mark.usefixtures("importable_tests")
def test_process_pool_interrupted_then_resumed(tmp_path: Path, counter: Path) -> None:
    pts = _points(counter)
    out = tmp_path / "pool-int"
    done = []

    def stop(point, ok):
        done.append(point.key)
        if len(done) == 2:
            raise KeyboardInterrupt

    first = run_points(pts, cheap_point, out, workers=2, progress=False, on_done=stop)
    assert first.interrupted and 2 <= len(first.table) < 6
    kept = set(first.table["key"])
    second = run_points(pts, cheap_point, out, workers=2, progress=False)
    assert set(second.skipped) == kept and len(second.table) == 6
    serial = run_points(pts, cheap_point, tmp_path / "ref", workers=0, progress=False)
    pd.testing.assert_frame_equal(second.table, serial.table)


def test_dask_local_cluster_matches_local_processes(tmp_path: Path, counter: Path) -> None:
    pytest.importorskip("dask.distributed")
    pts = _points(counter)
    local = run_points(pts, cheap_point, tmp_path / "local", workers=0, progress=False)
    for f in counter.iterdir():
        f.unlink()
    dask = run_points(
        pts,
        cheap_point,
        tmp_path / "dask",
        dask="local",
        workers=2,
        dask_processes=False,
        progress=False,
    )
    pd.testing.assert_frame_equal(local.table, dask.table)
    assert _calls(counter) == {p.key: 1 for p in pts}


def test_study_sources_combine(counter: Path) -> None:
    study = Study.model_validate(
        {
            "name": "mix",
            "base": "inline",
            "set": {"net.y": 5},
            "list": [{"x": 1}, {"x": 2}],
            "random": {"n": 3, "seed": 7, "params": {"z": {"randint": [0, 100]}}},
        }
    )
    pts = study.points()
    assert len(pts) == 6 and all(p["net.y"] == 5 for p in pts)
    assert study.params == ["x", "z"]
    again = Study.model_validate(study.model_dump(by_alias=True)).points()
    assert pts == again  # seeded: the same sample every time


def test_study_errors_name_the_key(tmp_path: Path) -> None:
    bad = tmp_path / "s.yaml"
    bad.write_text("name: s\nbase: quickstart\ngrdi: {x: [1]}\n")
    with pytest.raises(ValueError, match="did you mean 'grid'"):
        load_study(bad)
    with pytest.raises(ValueError, match="exactly one of choice"):
        Study.model_validate({"name": "s", "base": "b", "random": {"n": 1, "params": {"x": {}}}})
    with pytest.raises(ValueError, match="neither a file nor a built-in study"):
        load_study("no-such-study")


def test_dask_without_the_optional_extra_is_a_clear_error(
    tmp_path: Path, counter: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    # as if `pip install podsim` had not installed the [dask] extra: the import fails
    monkeypatch.setitem(sys.modules, "dask.distributed", None)
    with pytest.raises(ValueError, match=r"pip install 'podsim\[dask\]'"):
        run_points(_points(counter), cheap_point, tmp_path / "d", dask="local", progress=False)
    assert _calls(counter) == {}  # refused before any point ran
    r = CliRunner().invoke(app, ["sweep", "on-card-switch-savings", "--dask", "local", "--out",
                                 str(tmp_path / "cli")])  # fmt: skip
    assert r.exit_code == 2 and "podsim[dask]" in r.output, r.output
