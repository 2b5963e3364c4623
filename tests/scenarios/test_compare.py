"""podsim compare: result folders side by side, with the differences against the first run
taken from the runs' own summaries."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from podsim.scenarios.cli.app import app
from podsim.scenarios.report.compare import compare
from podsim.scenarios.results.tables import Results
from typer.testing import CliRunner

from tests.scenarios.conftest import SMALL


@pytest.fixture(scope="module")
def root_complex_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """quickstart (small) with the GPUs' traffic through the CPU root complex: slower."""
    out = tmp_path_factory.mktemp("cmp") / "rc"
    sets = ["--set", "cluster.layout=root-complex", "--set", "outputs.plots=false"]
    r = CliRunner().invoke(app, ["run", "--out", str(out), *SMALL, *sets])
    assert r.exit_code == 0, r.output
    return out


def test_changes_and_verdicts_follow_the_summaries(quickstart_dir, root_complex_dir) -> None:
    a, b = Results.read(quickstart_dir), Results.read(root_complex_dir)
    df = compare([a, b], ["base", "rc"], threshold=0.05).set_index("figure")
    ta = a.summary["phases"]["dispatch"]["completion_time_s"]
    tb = b.summary["phases"]["dispatch"]["completion_time_s"]
    row = df.loc["dispatch: completion time"]
    assert row["base"] == ta and row["rc"] == tb
    assert row["change vs base: rc"] == pytest.approx((tb - ta) / ta)
    assert row["verdict"] == ("worse" if tb > 1.05 * ta else "better" if tb < 0.95 * ta else "same")
    assert tb > 1.05 * ta  # the root complex slows dispatch (README: 38.8 -> 49.1 us)
    bw = df.loc["dispatch: algbw per GPU"]
    assert bw["verdict"] == "worse"  # lower bandwidth is worse, higher time is worse
    assert df.loc["drops", "verdict"] == "same"
    # a threshold above every change calls everything the same
    assert set(compare([a, b], ["base", "rc"], threshold=5.0)["verdict"]) <= {"same", "-"}


def test_cli_prints_the_table_and_writes_html(quickstart_dir, root_complex_dir, tmp_path):
    page = tmp_path / "cmp.html"
    r = CliRunner().invoke(
        app, ["compare", str(quickstart_dir), str(root_complex_dir), "--html", str(page)]
    )
    assert r.exit_code == 0, r.output
    assert "completion" in r.output and "worse" in r.output
    text = page.read_text()
    assert "<table>" in text and "data:image/png;base64," in text and "worse" in text
    s = json.loads((root_complex_dir / "summary.json").read_text())
    assert s["scenario"] == "quickstart"


@pytest.mark.parametrize(
    ("case", "words"),
    [("one", "at least two"), ("threshold", "threshold"), ("not-a-result", "not a podsim result")],
)
def test_bad_input_is_refused_with_exit_2(quickstart_dir, tmp_path, case, words) -> None:
    qs = str(quickstart_dir)
    args = {
        "one": [qs],
        "threshold": [qs, qs, "--threshold", "-1"],
        "not-a-result": [qs, str(tmp_path)],
    }[case]
    r = CliRunner().invoke(app, ["compare", *args])
    assert r.exit_code == 2, r.output
    assert words in r.output


def test_report_findings_say_what_changed_against_a_baseline(
    quickstart_dir, root_complex_dir, tmp_path
) -> None:
    from podsim.scenarios.report.findings import findings

    a, b = Results.read(quickstart_dir), Results.read(root_complex_dir)
    ta = a.summary["phases"]["dispatch"]["completion_time_s"]
    tb = b.summary["phases"]["dispatch"]["completion_time_s"]
    against = [t for t in findings(b, a, baseline_name="base") if t.startswith("Against base:")]
    assert len(against) == 1
    assert f"dispatch: completion time {(tb - ta) / ta:+.1%} (worse)" in against[0]
    assert not any(t.startswith("Against") for t in findings(b))
    page = tmp_path / "r.html"
    r = CliRunner().invoke(
        app, ["report", str(root_complex_dir), "--baseline", str(quickstart_dir), "-o", str(page)]
    )
    assert r.exit_code == 0, r.output
    assert f"Against {quickstart_dir.name}:" in page.read_text()
