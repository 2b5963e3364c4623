"""Study files: a base scenario plus a grid, a list or a seeded random sample of overrides.

A study YAML::

    name: cc-vs-paths
    description: congestion control x multipath paths on the quickstart cluster
    base: quickstart              # built-in scenario name, a path relative to this file,
                                  # or the scenario itself as an inline mapping
    set:                          # fixed overrides applied to every point
      workload.moe.layers: 1
    grid:                         # cross product of every value list
      cluster.nic.cc.name: [dcqcn, hpcc, nscc]
      cluster.nic.multipath.paths: [1, 4, 16]
    list:                         # explicit points (each a mapping of overrides)
      - {cluster.layout: external-switch}
      - {cluster.layout: on-card-switch}
    random:                       # n points drawn with numpy.random.default_rng(seed)
      n: 8
      seed: 1
      params:
        workload.moe.tokens_per_rank: {randint: [1024, 8192]}
        cluster.switch.buffer: {choice: [16MiB, 32MiB, 64MiB]}
        cost.usd_per_kwh: {uniform: [0.05, 0.2]}
    metric: phases.dispatch.completion_time_s   # the performance figure plots and Pareto use
    maximize: false
    cost_metric: capex_usd

Keys are the ``--set`` key paths of the scenario (``cluster.nic.cc.name``; prices under
``cost.prices.<item>.price_usd``). Every source given (grid, list, random) yields a list of
points; the study's points are their cross product (in that order), each merged over ``set``.
With no source the study is the base scenario alone.
"""

from __future__ import annotations

import difflib
import itertools
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from podsim.scenarios.errors import check_run_name
from podsim.scenarios.input.yamltext import read_yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_validator,
)

__all__ = [
    "LIBRARY",
    "RandomParam",
    "RandomSample",
    "Study",
    "StudyError",
    "load_study",
    "study_description",
    "study_names",
]

LIBRARY = Path(__file__).resolve().parent.parent / "library" / "studies"


class StudyError(ValueError):
    """A study file that cannot be read or does not validate; names the file and the key."""


class RandomParam(BaseModel):
    """One random parameter: exactly one of ``choice`` (list), ``uniform`` [lo, hi],
    ``loguniform`` [lo, hi] (lo > 0) or ``randint`` [lo, hi] (both inclusive)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    choice: list[Any] | None = None
    uniform: tuple[float, float] | None = None
    loguniform: tuple[float, float] | None = None
    randint: tuple[int, int] | None = None

    @model_validator(mode="after")
    def _one(self) -> RandomParam:
        given = [k for k in ("choice", "uniform", "loguniform", "randint") if getattr(self, k)]
        if len(given) != 1:
            raise ValueError(
                "give exactly one of choice: [...], uniform: [lo, hi], loguniform: [lo, hi] "
                f"or randint: [lo, hi] (got {', '.join(given) or 'none'})"
            )
        lo_hi = self.uniform or self.loguniform or self.randint
        if lo_hi is not None and lo_hi[0] > lo_hi[1]:
            raise ValueError(f"range {list(lo_hi)} must have lo <= hi")
        if self.loguniform is not None and self.loguniform[0] <= 0:
            raise ValueError("loguniform needs lo > 0")
        return self

    def draw(self, rng: np.random.Generator) -> Any:
        if self.choice is not None:
            return self.choice[int(rng.integers(len(self.choice)))]
        if self.uniform is not None:
            return float(rng.uniform(*self.uniform))
        if self.loguniform is not None:
            lo, hi = np.log(self.loguniform[0]), np.log(self.loguniform[1])
            return float(np.exp(rng.uniform(lo, hi)))
        assert self.randint is not None
        return int(rng.integers(self.randint[0], self.randint[1] + 1))


class RandomSample(BaseModel):
    """``n`` points, each parameter drawn in sorted key order from one seeded generator."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    n: int = Field(gt=0, description="points to draw")
    seed: int = Field(0, ge=0, description="seed of numpy.random.default_rng")
    params: dict[str, RandomParam] = Field(
        min_length=1,
        description="{key.path: {choice: [...]} | {uniform: [lo, hi]} | {loguniform: [lo, hi]} "
        "| {randint: [lo, hi]}}",
    )

    def points(self) -> list[dict[str, Any]]:
        rng = np.random.default_rng(self.seed)
        keys = sorted(self.params)
        return [{k: self.params[k].draw(rng) for k in keys} for _ in range(self.n)]


class Study(BaseModel):
    """A validated study (see the module docstring for the file format)."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    name: str = Field(description="name of the study (its output folder results/studies/NAME)")
    description: str = Field("", description="what the study shows (podsim list)")
    base: str | dict[str, Any] = Field(
        description="the base scenario: a built-in name, a file relative to the study, or a "
        "scenario mapping"
    )
    set: dict[str, Any] = Field(
        default_factory=dict, description="{key.path: value} applied to every point"
    )
    grid: dict[str, list[Any]] = Field(
        default_factory=dict, description="{key.path: [values]}: the cross product of the lists"
    )
    list_: list[dict[str, Any]] = Field(
        default_factory=list, alias="list", description="explicit points, each {key.path: value}"
    )
    random: RandomSample | None = Field(None, description="n points drawn at random")
    metric: str = Field(
        "layer_time_s",
        description="the figure the plots and the Pareto front use (a summary key, dotted: "
        "phases.dispatch.completion_time_s)",
    )
    maximize: bool = Field(False, description="true when a larger metric is better")
    cost_metric: str = Field("capex_usd", description="the cost figure of the Pareto front")
    savings_threshold: float | None = Field(
        None,
        gt=0.0,
        lt=1.0,
        description="the claim to test: the study's second point saves at least this fraction "
        "of its first point's capex (0.30 = 30 %; list the baseline design first, the claimed "
        "one second, other points add cases), answered at every scope of system cost, with "
        "the prices that decide it (scenarios/cost/sensitivity.py)",
    )
    base_dir: str | None = Field(None, exclude=True)
    #: the study file it was loaded from (None for a mapping), for error messages
    _file: str | None = PrivateAttr(None)

    @property
    def file(self) -> str | None:
        return self._file

    def source_of(self, key: str) -> str:
        """Where the study sets override ``key``: ``grid``, ``list``, ``random.params`` or
        ``set`` (the first that has it), for error messages."""
        for label, keys in (
            ("grid", set(self.grid)),
            ("list", {k for p in self.list_ for k in p}),
            ("random.params", set(self.random.params) if self.random else set()),
            ("set", set(self.set)),
        ):
            if key in keys:
                return label
        return "set"

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        return check_run_name(v)

    @field_validator("grid")
    @classmethod
    def _grid(cls, v: dict[str, list[Any]]) -> dict[str, list[Any]]:
        for key, values in v.items():
            if not values:
                raise ValueError(f"grid.{key} has no values")
        return v

    @property
    def params(self) -> list[str]:
        """The swept key paths (grid, list and random; not ``set``), sorted."""
        keys = set(self.grid)
        for p in self.list_:
            keys |= set(p)
        if self.random is not None:
            keys |= set(self.random.params)
        return sorted(keys)

    def points(self) -> list[dict[str, Any]]:
        """Every point's overrides (``set`` merged under the point's own), in study order."""
        sources: list[list[dict[str, Any]]] = []
        if self.grid:
            keys = list(self.grid)
            combos = itertools.product(*(self.grid[k] for k in keys))
            sources.append([dict(zip(keys, combo, strict=True)) for combo in combos])
        if self.list_:
            sources.append([dict(p) for p in self.list_])
        if self.random is not None:
            sources.append(self.random.points())
        out = []
        for combo in itertools.product(*sources):
            point: dict[str, Any] = dict(self.set)
            for part in combo:
                point.update(part)
            out.append(point)
        return out

    def point_params(self, point: dict[str, Any]) -> dict[str, Any]:
        """The swept parameters of ``point`` (what tells points apart)."""
        return {k: point[k] for k in self.params if k in point}

    def base_ref(self) -> str | dict[str, Any]:
        """The base scenario: an inline mapping as it is; a path (relative to the study file)
        if that file exists; else the name as given (a built-in scenario)."""
        if isinstance(self.base, dict):
            return self.base
        if self.base_dir is not None:
            p = Path(self.base_dir) / self.base
            if p.is_file():
                return str(p)
        return self.base


def study_names() -> list[str]:
    """Built-in studies (``scenarios/library/studies/*.yaml``)."""
    return sorted(p.stem for p in LIBRARY.glob("*.yaml"))


def study_description(name: str) -> str:
    """A built-in study's ``description`` (first line), read without validating it."""
    from podsim.scenarios.input.loader import file_description

    return file_description(LIBRARY / f"{name}.yaml")


def _resolve_study_path(ref: str | Path) -> Path:
    p = Path(ref)
    if p.is_file():
        return p
    if isinstance(ref, str) and (LIBRARY / f"{ref}.yaml").is_file():
        return LIBRARY / f"{ref}.yaml"
    names = study_names()
    close = difflib.get_close_matches(str(ref), names, n=3, cutoff=0.4)
    hint = f" Did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
    raise StudyError(
        f"study {str(ref)!r} is neither a file nor a built-in study.{hint} "
        f"Built-in studies: {', '.join(names) or '(none)'}."
    )


def load_study(ref: str | Path | dict[str, Any]) -> Study:
    """A validated study from a file, a built-in study name or a mapping."""
    if isinstance(ref, dict):
        raw, where, base_dir = dict(ref), "study", None
    else:
        path = _resolve_study_path(ref)
        where, base_dir = str(path), str(path.resolve().parent)
        try:
            raw = read_yaml(path)
        except OSError as exc:
            raise StudyError(f"cannot read study {where!r}: {exc.strerror}") from None
        except (yaml.YAMLError, UnicodeDecodeError) as exc:
            raise StudyError(f"study {where!r} is not valid YAML: {exc}") from None
        if not isinstance(raw, dict):
            raise StudyError(f"study {where!r} must be a mapping (name, base, grid, ...)")
    if base_dir is not None:
        raw.setdefault("base_dir", base_dir)
    try:
        study = Study.model_validate(raw)
        study._file = None if isinstance(ref, dict) else where
        return study
    except ValidationError as exc:
        lines = []
        fields = [*Study.model_fields, "list"]
        for err in exc.errors():
            loc = ".".join(str(p) for p in err["loc"])
            msg = err["msg"]
            if err["type"] == "extra_forbidden":
                close = difflib.get_close_matches(str(err["loc"][-1]), fields, n=1, cutoff=0.5)
                msg += f"; did you mean {close[0]!r}?" if close else ""
            lines.append(f"{loc}: {msg} (got {err.get('input')!r})")
        raise StudyError(f"invalid study {where}:\n  " + "\n  ".join(lines)) from None
