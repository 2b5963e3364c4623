"""The HTML report is self-contained and shows every figure, in a real browser when one is
installed (headless Chromium)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from scenarios.report import FIGURE_TITLES, render_report, write_report

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
