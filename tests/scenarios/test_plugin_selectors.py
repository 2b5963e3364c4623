"""Path-selector plug-ins load with --allow-plugins, like congestion-control plug-ins, on
run, validate and sweep; without the flag they are refused (issue 20, item 8)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import yaml
from podsim.fabric.plugins import PluginError
from podsim.nic.transport.selectors import PathSelector, selector_class
from podsim.scenarios.cli.app import app
from podsim.scenarios.results.tables import Results
from typer.testing import CliRunner

SMALL = ["--set", "workload.moe.tokens_per_rank=16", "--set", "outputs.plots=false"]


@pytest.fixture()
def plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    mod = tmp_path / "my_selectors.py"
    mod.write_text(
        textwrap.dedent(
            """
            from podsim.nic.transport.selectors import PATH_SELECTORS

            class EveryOther(PATH_SELECTORS.get("spray")):
                '''Spray, written by a user.'''

            class NotASelector:
                pass
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))  # for sweep's worker processes
    return "my_selectors:EveryOther"


def test_selector_class_loads_only_with_the_opt_in(plugin: str) -> None:
    with pytest.raises(PluginError, match="--allow-plugins"):
        selector_class(plugin)
    assert issubclass(selector_class(plugin, allow_plugins=True), PathSelector)
    with pytest.raises(PluginError, match="not a subclass"):
        selector_class("my_selectors:NotASelector", allow_plugins=True)


def test_run_with_a_plugin_selector(plugin: str, tmp_path: Path) -> None:
    sel = ["--set", f"cluster.nic.multipath.selector={plugin}"]
    refused = CliRunner().invoke(app, ["validate", "quickstart", *sel])
    assert refused.exit_code == 2 and "--allow-plugins" in refused.output
    ok = CliRunner().invoke(app, ["validate", "quickstart", *sel, "--allow-plugins"])
    assert ok.exit_code == 0, ok.output
    out = tmp_path / "out"
    args = ["run", "quickstart", "-q", "-o", str(out), *sel, *SMALL, "--allow-plugins"]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    summary = Results.read(out).summary
    assert summary["status"] == "complete"


def test_sweep_takes_allow_plugins(plugin: str, tmp_path: Path) -> None:
    study = tmp_path / "study.yaml"
    study.write_text(
        yaml.safe_dump(
            {
                "name": "plug",
                "base": "quickstart",
                "set": {"workload.moe.tokens_per_rank": 16, "outputs.plots": False},
                "grid": {"cluster.nic.multipath.selector": ["spray", plugin]},
            }
        )
    )
    base = ["sweep", str(study), "--workers", "0", "--quiet", "--no-plots"]
    refused = CliRunner().invoke(app, [*base, "--out", str(tmp_path / "a")])
    assert refused.exit_code != 0 and "--allow-plugins" in refused.output
    ok = CliRunner().invoke(app, [*base, "--out", str(tmp_path / "b"), "--allow-plugins"])
    assert ok.exit_code == 0, ok.output
