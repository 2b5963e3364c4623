"""The `podsim run` progress display: after a second, simulated time and events per second on
stderr, then what the run does after the engine; nothing in quiet mode; Ctrl-C after the engine
keeps what was written."""

from __future__ import annotations

import io
import json
import time
from pathlib import Path

import podsim
import podsim.scenarios.cli.app as cli
import pytest
from podsim.scenarios.cli.app import app
from rich.console import Console
from typer.testing import CliRunner


@pytest.fixture
def screen(monkeypatch: pytest.MonkeyPatch) -> io.StringIO:
    """stderr as a terminal that records what the progress display draws."""
    buf = io.StringIO()
    monkeypatch.setattr(cli, "err_console", Console(file=buf, force_terminal=True, width=120))
    return buf


def test_display_shows_simulated_time_and_event_rate(
    screen: io.StringIO, monkeypatch: pytest.MonkeyPatch
) -> None:
    bar = cli._ProgressBar(True, "demo (packet)")
    bar(1e-6, 10)
    assert bar.progress is None  # younger than a second: nothing shown
    bar.t0 -= 2.0
    bar(1e-6, 0)
    assert bar.progress is not None
    # 50 000 events over the last second of wall time: 50 k events/s (the clock held still, so
    # that a loaded machine's delay between these lines does not change the rate)
    now = time.perf_counter()
    monkeypatch.setattr(cli.time, "perf_counter", lambda: now)
    bar._last = (now - 1.0, 0)
    bar(2.5e-6, 50_000)
    bar.progress.refresh()
    shown = screen.getvalue()
    assert "demo (packet)" in shown and "simulated 2.5us" in shown
    assert "50 k events/s" in shown or "49 k events/s" in shown
    bar.stage("drawing plots")
    bar.progress.refresh()
    assert "demo (packet): drawing plots" in screen.getvalue()
    bar.stop()


def test_rate_is_averaged_over_half_a_second(screen: io.StringIO) -> None:
    bar = cli._ProgressBar(True, "x")
    bar.t0 -= 2.0
    bar(0.0, 0)
    first = bar._last
    bar(1e-6, 10)  # a moment later: too short a window, the rate keeps its value
    assert bar._last == first and bar._rate == ""
    bar.stop()


def test_quiet_shows_nothing(screen: io.StringIO, scenario_dir: Path, tmp_path: Path) -> None:
    quiet = cli._ProgressBar(False, "x")
    quiet.t0 -= 2.0
    quiet(1.0, 1)
    quiet.stage("drawing plots")
    assert quiet.progress is None and screen.getvalue() == ""
    out = tmp_path / "out"  # a new folder (a non-empty non-result folder is refused)
    r = CliRunner().invoke(app, ["run", str(scenario_dir / "base.yaml"), "-o", str(out), "-q"])
    assert r.exit_code == 0 and r.output == "" and screen.getvalue() == ""


def test_engine_reports_simulated_time_and_events(scenario_dir: Path) -> None:
    calls: list[tuple[float, int | None]] = []
    stages: list[str] = []
    res = podsim.run(
        scenario_dir / "base.yaml",
        out=scenario_dir / "out",
        progress=lambda t, n: calls.append((t, n)),
        stage=stages.append,
    )
    assert calls, "the engine never reported progress"
    times = [t for t, _ in calls]
    events = [n for _, n in calls if n is not None]
    assert times == sorted(times) and times[-1] <= res.summary["sim_time_s"] + 1e-12
    assert events and events == sorted(events) and events[-1] <= res.summary["events"]
    assert stages == ["writing results", "writing the timeline"]  # base draws no plots


def test_ctrl_c_while_drawing_leaves_the_earlier_results_whole(
    scenario_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import podsim.scenarios.report.plots

    out = tmp_path / "out"
    args = ["run", str(scenario_dir / "base.yaml"), "-o", str(out), "--set", "outputs.plots=true"]
    first = CliRunner().invoke(app, [*args, "--seed", "1", "--set", "outputs.plots=false"])
    assert first.exit_code == 0, first.output
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}

    def interrupted(*a: object, **k: object) -> list[Path]:
        raise KeyboardInterrupt

    monkeypatch.setattr(podsim.scenarios.report.plots, "plot_all", interrupted)
    r = CliRunner().invoke(app, [*args, "--seed", "2"])
    assert r.exit_code == 130, r.output
    assert "earlier results" in r.output and "Traceback" not in r.output
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before
    assert json.loads((out / "summary.json").read_text())["seed"] == 1
    assert not [p for p in tmp_path.iterdir() if ".podsim-" in p.name]  # no staging folder left
