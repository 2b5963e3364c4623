"""What-if studies: a base scenario swept over a grid, a list or a seeded random sample of
overrides, run in parallel (local processes or a Dask cluster) into one resumable Parquet table,
with Pareto, cost-breakdown and tornado plots.

- :mod:`podsim.scenarios.study.spec`: the study file (:class:`Study`, :func:`load_study`);
- :mod:`podsim.scenarios.study.sweep`: resolve points and run a study (:func:`run_study`);
- :mod:`podsim.scenarios.study.engine`: the executor-independent sweep engine (:func:`run_points`);
- :mod:`podsim.scenarios.study.store`: the results table, keyed by a hash of each resolved scenario;
- :mod:`podsim.scenarios.study.point`: the default point (simulate + price);
- :mod:`scenarios.study.plots`: the study figures; :mod:`scenarios.cli.study`: ``podsim
  cost`` and ``podsim sweep``.
"""

from __future__ import annotations

from podsim.scenarios.study.engine import Point, PointFailure, SweepReport, run_points
from podsim.scenarios.study.spec import (
    Study,
    StudyError,
    load_study,
    study_description,
    study_names,
)
from podsim.scenarios.study.store import ResultStore, point_key
from podsim.scenarios.study.sweep import resolve_points, run_study

__all__ = [
    "Point",
    "PointFailure",
    "ResultStore",
    "Study",
    "StudyError",
    "SweepReport",
    "load_study",
    "point_key",
    "resolve_points",
    "run_points",
    "run_study",
    "study_description",
    "study_names",
]
