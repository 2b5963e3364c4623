"""podsim: scenarios package - scenario files, the runner, results, plots, report, the CLI.

Python API (what notebooks use)::

    import podsim.scenarios
    res = scenarios.run("quickstart")            # a file path, built-in name, dict or Scenario
    res.messages, res.phases, res.links, res.qps, res.queues, res.summary
    res.cost, res.bom, res.cost_table()          # the cluster's price (cost.json, bom.csv)
    res.performance()                            # one flat row of figures (what a study keeps)
    sc, _ = podsim.scenarios.load_scenario("deepep-h800", ["variant=ep32"])

Attributes load lazily so that ``podsim --help`` does not import pandas.
"""

from __future__ import annotations

from typing import Any

__all__ = ["Results", "Scenario", "ScenarioError", "load_scenario", "run"]

_LAZY = {
    "run": ("podsim.scenarios.runner", "run"),
    "Results": ("podsim.scenarios.results", "Results"),
    "Scenario": ("podsim.scenarios.schema", "Scenario"),
    "ScenarioError": ("podsim.scenarios.errors", "ScenarioError"),
    "load_scenario": ("podsim.scenarios.loader", "load_scenario"),
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        return getattr(importlib.import_module(module), attr)
    raise AttributeError(f"module 'scenarios' has no attribute {name!r}")
