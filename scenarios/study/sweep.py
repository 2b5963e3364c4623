"""A study from file to table: resolve every point, run the new ones, keep the results.

``resolve`` turns the base scenario plus one point's overrides into the resolved scenario (a
plain dict, defaults filled in); by default the scenario layer does it
(:func:`scenarios.loader.load_scenario` with ``--set``-style overrides, then
``Scenario.resolved()``), so a bad key fails before anything runs, naming the point. The key of
a point is the hash of that resolved scenario (:func:`scenarios.study.store.point_key`).
"""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from scenarios.study.engine import Point, RunPoint, SweepReport, run_points
from scenarios.study.spec import Study, StudyError, load_study
from scenarios.study.store import point_key

__all__ = ["resolve_dict", "resolve_points", "resolve_scenario", "run_study"]

Resolver = Callable[[Any, dict[str, Any]], dict[str, Any]]


def resolve_scenario(base: str | dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """Base scenario (name, path or mapping) + ``{key.path: value}`` -> the resolved scenario
    as a dict."""
    from scenarios.cost.scenario import check_catalog
    from scenarios.loader import load_scenario

    sets = [f"{k}={json.dumps(v)}" for k, v in overrides.items()]
    scenario, _ = load_scenario(base, sets)
    check_catalog(scenario)  # a bad catalog or price fails now, not mid-sweep
    return scenario.resolved()


def resolve_dict(base: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """Overrides on a plain mapping (no validation): for engines and tests without scenarios."""
    out = copy.deepcopy(base)
    for key, value in overrides.items():
        node = out
        parts = key.split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise StudyError(f"override {key!r}: {part!r} is not a mapping")
        node[parts[-1]] = copy.deepcopy(value)
    return out


def resolve_points(study: Study, resolve: Resolver | None = None) -> list[Point]:
    """Every point of ``study`` resolved and keyed, in study order."""
    resolve = resolve or resolve_scenario
    base = study.base_ref()
    points = []
    for i, overrides in enumerate(study.points()):
        try:
            resolved = resolve(base, overrides)
        except ValueError as exc:
            shown = ", ".join(f"{k}={v!r}" for k, v in study.point_params(overrides).items())
            raise StudyError(f"study {study.name!r} point {i} ({shown or 'base'}): {exc}") from None
        params = study.point_params(overrides)
        points.append(Point(study.name, i, point_key(resolved), params, resolved))
    return points


def _default_run_point() -> RunPoint:
    from scenarios.study.point import run_scenario_point

    return run_scenario_point


def run_study(
    study: Study | str | Path,
    out_dir: str | os.PathLike[str] | None = None,
    *,
    run_point: RunPoint | None = None,
    resolve: Resolver | None = None,
    workers: int | None = None,
    dask: Any = None,
    dask_processes: bool = True,
    progress: bool = True,
    on_done: Callable[[Point, bool], None] | None = None,
) -> SweepReport:
    """Run a study into ``out_dir`` (default ``results/studies/<name>``); see
    :func:`scenarios.study.engine.run_points` for ``workers``/``dask``. Writes ``study.yaml``
    (the study as run) and ``points.json`` (key and parameters of every point) next to the
    table."""
    if not isinstance(study, Study):
        study = load_study(study)
    out = Path(out_dir) if out_dir is not None else Path("results") / "studies" / study.name
    points = resolve_points(study, resolve)
    out.mkdir(parents=True, exist_ok=True)
    (out / "study.yaml").write_text(
        yaml.safe_dump(study.model_dump(mode="json", by_alias=True), sort_keys=False)
    )
    index = [{"point": p.index, "key": p.key, "params": p.params} for p in points]
    (out / "points.json").write_text(json.dumps(index, indent=1, default=str) + "\n")
    return run_points(
        points,
        run_point or _default_run_point(),
        out,
        workers=workers,
        dask=dask,
        dask_processes=dask_processes,
        progress=progress,
        on_done=on_done,
    )
