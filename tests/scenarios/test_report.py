"""The HTML report is self-contained and shows every figure, in a real browser when one is
installed (headless Chromium)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from podsim.scenarios.report.html import FIGURE_TITLES, render_report, write_report

CHROMIUM = "/usr/bin/chromium"


def test_report_is_self_contained(quickstart_dir: Path) -> None:
    html = render_report(quickstart_dir)
    pngs = sorted(p.stem for p in (quickstart_dir / "plots").glob("*.png"))
    assert pngs
    for name in pngs:
        assert f'id="fig-{name}"' in html
    # nothing is fetched from outside the file
    assert not re.search(r'(src|href)="(?!data:)', html)
    for title in ("Summary", "Hottest links", "Scenario (resolved)"):
        assert f"<h2>{title}</h2>" in html
    assert set(FIGURE_TITLES) <= {*pngs}


def test_report_draws_missing_plots(quickstart_dir: Path, tmp_path: Path) -> None:
    d = tmp_path / "copy"
    shutil.copytree(quickstart_dir, d)
    shutil.rmtree(d / "plots")
    path = write_report(d)
    assert path == d / "report.html"
    assert path.read_text().count("data:image/png;base64,") == len(FIGURE_TITLES)


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="no /usr/bin/chromium in this environment")
def test_report_renders_in_headless_chromium(quickstart_dir: Path, tmp_path: Path) -> None:
    path = write_report(quickstart_dir, tmp_path / "report.html")
    cmd = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--no-first-run",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={tmp_path / 'profile'}",
        "--virtual-time-budget=5000",
        "--dump-dom",
        path.as_uri(),
    ]
    dom = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=True).stdout
    total = len(list((quickstart_dir / "plots").glob("*.png")))
    assert f'data-figures-total="{total}"' in dom
    assert f'data-figures-loaded="{total}"' in dom


def test_report_shows_the_cost_breakdown_and_bom(quickstart_dir: Path) -> None:
    import json

    import pandas as pd
    from podsim.scenarios.cost.tables import usd

    html = render_report(quickstart_dir)
    assert "<h2>Cost</h2>" in html and "<h3>Bill of materials</h3>" in html
    doc = json.loads((quickstart_dir / "cost.json").read_text())
    bom = pd.read_csv(quickstart_dir / "bom.csv")
    cost_part = html[html.index("<h2>Cost</h2>") : html.index("<h2>Hottest links</h2>")]
    assert usd(doc["summary"]["capex_usd"]) in cost_part
    assert usd(doc["efficiency"]["usd_per_GBps_per_gpu"]) in cost_part
    bom_part = cost_part[
        cost_part.index("Bill of materials") : cost_part.index("Capex by price confidence")
    ]
    assert bom_part.count("<tr>") == len(bom) + 1  # header + one row per BOM line
    for item in bom["item"]:
        assert item in bom_part


def _study_folder(d: Path) -> Path:
    """A sweep output folder: four points of layout x paths with their cost columns."""
    import pandas as pd
    import yaml

    rows = []
    grid = [(layout, paths) for layout in ("external-switch", "on-card-switch") for paths in (1, 4)]
    for i, (layout, paths) in enumerate(grid):
        pcie = 8000.0 if layout == "external-switch" else 2000.0
        rows.append(
            {
                "key": f"k{i}",
                "study": "toy",
                "point": i,
                "param:cluster.layout": layout,
                "param:cluster.nic.multipath.paths": paths,
                "layer_time_s": (1e-3 if pcie > 5000 else 1.1e-3) / paths,
                "capex.gpu": 400000.0,
                "capex.pcie": pcie,
                "capex.switch": 100000.0,
                "capex.scaleup": 0.0,
                "capex_usd": 500000.0 + pcie,
            }
        )
    d.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_parquet(d / "results.parquet", index=False)
    study = {"name": "toy", "description": "layout x paths", "base": "quickstart",
             "metric": "layer_time_s", "cost_metric": "capex_usd", "maximize": False}  # fmt: skip
    (d / "study.yaml").write_text(yaml.safe_dump(study))
    return d


def test_study_folder_gets_a_study_report(tmp_path: Path) -> None:
    from podsim.scenarios.report.html import STUDY_FIGURE_TITLES
    from podsim.scenarios.study.plots import pareto_front

    d = _study_folder(tmp_path / "study")
    path = write_report(d)
    html = path.read_text()
    assert "podsim study report: toy" in html and "layout x paths" in html
    for name in STUDY_FIGURE_TITLES:  # drawn because the folder had no plots yet
        assert f'id="fig-{name}"' in html and (d / "plots" / f"{name}.png").is_file()
    assert html.count("data:image/png;base64,") == len(STUDY_FIGURE_TITLES)
    assert not re.search(r'(src|href)="(?!data:)', html)
    import pandas as pd

    df = pd.read_parquet(d / "results.parquet")
    points = html[html.index("<h2>Points</h2>") : html.index("<h2>Study</h2>")]
    front = pareto_front(df["capex_usd"], df["layer_time_s"])
    # 4 paths beat 1 at the same cost; external is faster, on-card cheaper: both on the front
    assert front.tolist() == [False, True, False, True]
    assert points.count(">yes</td>") == 2
    assert "scaleup" not in points  # an all-zero category is left out
    assert "$502,000" in points and "250us" in points


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="no /usr/bin/chromium in this environment")
def test_study_report_renders_in_headless_chromium(tmp_path: Path) -> None:
    d = _study_folder(tmp_path / "study")
    path = write_report(d)
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=5000",
           "--dump-dom", path.as_uri()]  # fmt: skip
    dom = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=True).stdout
    assert 'data-figures-total="3"' in dom and 'data-figures-loaded="3"' in dom


def test_plot_command_redraws_a_study_folder(tmp_path: Path) -> None:
    from podsim.scenarios.cli.app import app
    from podsim.scenarios.report.html import STUDY_FIGURE_TITLES
    from typer.testing import CliRunner

    d = _study_folder(tmp_path / "study")
    r = CliRunner().invoke(app, ["plot", str(d)])
    assert r.exit_code == 0, r.output
    for name in STUDY_FIGURE_TITLES:
        assert (d / "plots" / f"{name}.png").is_file() and (d / "plots" / f"{name}.svg").is_file()
    assert f"wrote {2 * len(STUDY_FIGURE_TITLES)} plot files" in r.output


def test_small_dollar_amounts_print_without_an_exponent() -> None:
    from podsim.scenarios.report.html import _num

    assert _num(1.59e-06, "usd") == "$0.00000159"  # the cost of one MoE layer
    assert _num(0.0123, "usd") == "$0.0123" and _num(5.5, "usd") == "$5.50"
    assert _num(1234.5, "usd").startswith("$1,23") and _num(0.0, "usd") == "$0"


def test_markdown_table_of_a_frame() -> None:
    """frame_to_markdown: header, alignment row (numbers right-aligned), formatted cells; NaN
    shown as '-', '|' escaped, one line per row."""
    import math

    import pandas as pd
    from podsim.scenarios.report.markdown import frame_to_markdown

    df = pd.DataFrame({"row": ["a|b", "c"], "n": [1200, 3], "x": [1.25, math.nan]})
    text = frame_to_markdown(df, digits=1)
    assert text.splitlines() == [
        "| row | n | x |",
        "| --- | ---: | ---: |",
        "| a\\|b | 1,200 | 1.2 |",
        "| c | 3 | - |",
    ]


def test_findings_open_the_report_and_read_the_run(quickstart_dir) -> None:
    """The report opens with findings generated from the run: each phase's time and fraction
    of the bound with the tier that sets the bound (as summary.json has them), the compute
    share, loss, and the cost with its unsourced share; congestion counters appear when set."""
    import copy

    from podsim.fabric.units import fmt_time
    from podsim.scenarios.report.findings import findings
    from podsim.scenarios.report.html import render_report
    from podsim.scenarios.results.tables import Results

    res = Results.read(quickstart_dir)
    s = res.summary
    text = findings(res)
    d = s["phases"]["dispatch"]
    limit = s["bound"]["phases"]["dispatch"]
    tier = limit["limit_tier"] or limit["limit_kind"]  # a link tier, or e.g. one message
    assert any(
        t.startswith(f"Dispatch takes {fmt_time(d['completion_time_s'])}")
        and f"{d['fraction_of_bound']:.0%} of the physical bound" in t
        and f"the {tier} tier" in t
        for t in text
    ), text
    assert any(t.startswith("The fabric ran loss-free") for t in text)
    busy = s["link_utilisation_by_phase"]["phases"]["dispatch"]["busiest"][0]
    assert any(
        t.startswith("Busiest link while each phase runs: dispatch " + busy["link"])
        and f"{busy['utilisation']:.0%}" in t
        for t in text
    ), text
    assert any("capex" in t and "no source" in t for t in text)
    html = render_report(quickstart_dir)
    assert html.index("<h2>Findings</h2>") < html.index("<h2>Summary</h2>")
    congested = copy.copy(res)
    congested.summary = {**s, "counters": {**s["counters"], "drops": 12, "ecn_marks": 3400}}
    assert "Congestion: 12 drops, 3,400 ECN marks." in findings(congested)


def test_summary_rows_only_where_they_apply(quickstart_dir) -> None:
    """The printed summary names an all-to-all only for all-to-all traffic, shows NCCL's bus
    bandwidth only there, and leaves out RDMA / NVLink rows when no such traffic ran."""
    import copy

    from podsim.scenarios.results.tables import Results
    from rich.console import Console

    def text(res) -> str:
        con = Console(width=200, record=True)
        for t in res.summary_tables():
            con.print(t)
        return con.export_text()

    res = Results.read(quickstart_dir)
    full = text(res)
    assert "all-to-all completion time" in full and "busbw" in full and "NVLink send" in full
    other = copy.copy(res)
    other.scenario = {**res.scenario, "workload": {"synthetic": {"pattern": "incast"}}}
    phases = {k: {**v, "nvl_send_bw_per_gpu_Bps": 0.0} for k, v in res.summary["phases"].items()}
    other.summary = {**res.summary, "phases": phases}
    out = text(other)
    assert "all-to-all" not in out and "completion time" in out
    assert "busbw" not in out and "NVLink send" not in out and "RDMA send" in out


def test_the_html_summary_shows_only_the_figures_that_apply() -> None:
    """A collective run has no DeepEP figures and no NVLink traffic: those columns are left
    out; an all-to-all names its completion time so."""
    from podsim.scenarios.report.html import _summary_html

    s = {
        "phases": {
            "other": {
                "completion_time_s": 1e-3,
                "algbw_per_gpu_Bps": 20e9,
                "busbw_per_gpu_Bps": 35e9,
                "rdma_send_bw_per_gpu_Bps": 35e9,
                "nvl_send_bw_per_gpu_Bps": None,
                "deepep_time_s": None,
                "deepep_rdma_bw_per_gpu_Bps": None,
                "deepep_nvl_bw_per_gpu_Bps": None,
            }
        }
    }
    html = _summary_html(s)
    assert "busbw / GPU (NCCL)" in html and "RDMA send bw / GPU" in html
    assert "DeepEP" not in html and "NVL send bw" not in html
    assert "all-to-all completion time" not in html
    assert "all-to-all completion time" in _summary_html(s, a2a=True)
