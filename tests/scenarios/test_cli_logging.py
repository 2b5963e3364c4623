"""Standard logging on stderr (-v steps, -vv debug, -q errors only) and shell completion."""

from __future__ import annotations

import logging

from podsim.scenarios.cli.app import _complete_scenario, app
from typer.testing import CliRunner

RUN = ["run", "quickstart", "-q", "--set", "workload.moe.tokens_per_rank=8", "--set",
       "outputs.plots=false"]  # fmt: skip


def _invoke(*args: str):
    return CliRunner().invoke(app, list(args))


def test_verbose_logs_the_steps_of_a_run_and_default_does_not(tmp_path) -> None:
    r = _invoke("-v", *RUN, "-o", str(tmp_path / "a"))
    assert r.exit_code == 0, r.output
    for step in ("building the cluster", "trace: ", "running the packet engine", "engine done",
                 "results written"):  # fmt: skip
        assert step in r.output, step
    r = _invoke(*RUN, "-o", str(tmp_path / "b"))
    assert r.exit_code == 0 and "INFO" not in r.output, r.output


def test_quiet_keeps_errors_and_drops_warnings() -> None:
    r = _invoke("-q", "list", "engines")
    assert r.exit_code == 0
    log = logging.getLogger("podsim")
    assert log.getEffectiveLevel() == logging.ERROR
    _invoke("-vv", "list", "engines")
    assert log.getEffectiveLevel() == logging.DEBUG


def test_scenario_names_complete() -> None:
    assert _complete_scenario("deep") == ["deepep-h800"]
    assert "quickstart" in _complete_scenario("")
    r = _invoke("--show-completion", "bash")
    assert r.exit_code == 0 and "complete" in r.output
