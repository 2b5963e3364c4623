"""A study from file to table: resolve every point, run the new ones, keep the results.

``resolve`` turns the base scenario plus one point's overrides into the resolved scenario (a
plain dict, defaults filled in); by default the scenario layer does it
(:func:`podsim.scenarios.input.loader.load_scenario` with ``--set``-style overrides, then
``Scenario.resolved()``), so a bad key fails before anything runs, naming the point. The key of
a point is the hash of that resolved scenario (:func:`podsim.scenarios.study.store.point_key`).
"""

from __future__ import annotations

import copy
import difflib
import functools
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from podsim.scenarios.errors import ScenarioError
from podsim.scenarios.study.engine import Point, RunPoint, SweepReport, run_points
from podsim.scenarios.study.spec import Study, StudyError, load_study
from podsim.scenarios.study.store import META_COLUMNS, PARAM_PREFIX, ResultStore, point_key

__all__ = ["check_metrics", "resolve_dict", "resolve_points", "resolve_scenario", "run_study"]

Resolver = Callable[[Any, dict[str, Any]], dict[str, Any]]


def resolve_scenario(base: str | dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """Base scenario (name, path or mapping) + ``{key.path: value}`` -> the resolved scenario
    as a dict."""
    from podsim.scenarios.cost.scenario import check_catalog
    from podsim.scenarios.input.loader import load_scenario

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


def _from_study(
    study: Study, index: int, overrides: dict[str, Any], exc: ScenarioError
) -> ScenarioError:
    """``exc`` blamed on the study key that set the bad value (``grid.KEY`` of the study file,
    point ``index``) instead of the ``--set`` the resolver made of it; errors of the base
    scenario's own file keep their file and line."""
    src = exc.file or ""
    if not src.startswith("command line (--set "):
        # the base scenario's own file is at fault: keep its file and line, name the point
        return ScenarioError(
            f"(study {study.file or repr(study.name)}, point {index}) {exc.message}",
            file=exc.file,
            path=exc.path,
            line=exc.line,
            problems=exc.problems,
        )
    key = src[len("command line (--set ") :].split("=", 1)[0]
    section = study.source_of(key)
    value = overrides.get(key)
    label = f"study {study.file or repr(study.name)}, {section} key {key}={value!r} (point {index})"
    return ScenarioError(exc.message, file=label, path=exc.path, problems=exc.problems)


def resolve_points(study: Study, resolve: Resolver | None = None) -> list[Point]:
    """Every point of ``study`` resolved and keyed, in study order."""
    resolve = resolve or resolve_scenario
    base = study.base_ref()
    points = []
    for i, overrides in enumerate(study.points()):
        try:
            resolved = resolve(base, overrides)
        except ScenarioError as exc:
            raise _from_study(study, i, overrides, exc) from None
        except ValueError as exc:
            shown = ", ".join(f"{k}={v!r}" for k, v in study.point_params(overrides).items())
            raise StudyError(f"study {study.name!r} point {i} ({shown or 'base'}): {exc}") from None
        params = study.point_params(overrides)
        points.append(Point(study.name, i, point_key(resolved), params, resolved))
    return points


def check_metrics(study: Study, columns: list[str] | set[str], where: str = "") -> None:
    """Raise a StudyError when the study's ``metric`` or ``cost_metric`` is not a column of its
    results (``columns``: what a point returns), with a did-you-mean over the metric names.
    A misspelt metric would otherwise give a column of nothing and plots without a point."""
    names = sorted(c for c in columns if c not in META_COLUMNS and not c.startswith(PARAM_PREFIX))
    if not names:
        return
    for key in ("metric", "cost_metric"):
        value = getattr(study, key)
        if value in names:
            continue
        close = difflib.get_close_matches(value, names, n=3, cutoff=0.5)
        hint = f" Did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
        top = [n for n in names if "." not in n]
        raise StudyError(
            f"study {study.file or repr(study.name)}{where}: {key} {value!r} is not a figure a "
            f"point reports.{hint} "
            f"Figures without a dot: {', '.join(top)}; dotted ones follow the run's summary "
            "(phases.dispatch.completion_time_s, link_utilisation.leaf-spine.max_utilisation, "
            "...). Finished points are kept: fix the study and run it again."
        )


def _default_run_point() -> RunPoint:
    from podsim.scenarios.study.point import run_scenario_point

    return run_scenario_point


def _plugins_allowed(run_point: RunPoint, allow: bool) -> RunPoint:
    # a partial of a module-level function pickles to pool workers
    return functools.partial(run_point, allow_plugins=True) if allow else run_point


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
    allow_plugins: bool = False,
) -> SweepReport:
    """Run a study into ``out_dir`` (default ``results/studies/<name>``); see
    :func:`podsim.scenarios.study.engine.run_points` for ``workers``/``dask``. Writes ``study.yaml``
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
    store = ResultStore(out)
    table = store.read()
    if len(table):  # a resumed study: its metrics are known before anything runs
        check_metrics(study, list(table.columns), f" (results in {out})")
    bad: list[StudyError] = []

    def first_row(point: Point, ok: bool) -> None:
        # the first finished point tells which figures exist: stop at once on a misspelt metric
        if ok and not bad and not first_row.checked:  # type: ignore[attr-defined]
            first_row.checked = True  # type: ignore[attr-defined]
            try:
                check_metrics(study, list(store.read().columns))
            except StudyError as exc:
                bad.append(exc)
                raise KeyboardInterrupt from None
        if on_done is not None:
            on_done(point, ok)

    first_row.checked = False  # type: ignore[attr-defined]
    report = run_points(
        points,
        run_point or _plugins_allowed(_default_run_point(), allow_plugins),
        out,
        workers=workers,
        dask=dask,
        dask_processes=dask_processes,
        progress=progress,
        on_done=first_row,
    )
    if bad:
        raise bad[0]
    return report
