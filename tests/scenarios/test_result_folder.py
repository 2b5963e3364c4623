"""Results are never destroyed and never written outside their folder (issue 20, items 6-7):
a run writes into a staging folder and swaps it in whole; SIGKILL or SIGTERM mid-write leaves
the earlier results readable; planted symlinks in an earlier result folder are not followed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from podsim.scenarios.results.folder import STAGING_MARK, recover, staged_folder
from podsim.scenarios.results.tables import Results

RUN = [
    "quickstart",
    "-q",
    "--set",
    "workload.moe.tokens_per_rank=16",
    "--set",
    "outputs.plots=false",
]


def _run(
    out: Path, *extra: str, kill_during_write: str | None = None
) -> subprocess.CompletedProcess:
    """``podsim run`` in a subprocess; with ``kill_during_write`` the process sends itself that
    signal after writing the first table of the new results."""
    hook = ""
    if kill_during_write:
        hook = textwrap.dedent(
            f"""
            import os, signal
            import pandas as pd
            real = pd.DataFrame.to_parquet
            def to_parquet(self, *a, **k):
                real(self, *a, **k)
                os.kill(os.getpid(), signal.{kill_during_write})
            pd.DataFrame.to_parquet = to_parquet
            """
        )
    code = hook + textwrap.dedent(
        f"""
        import sys
        from podsim.scenarios.cli.app import app
        sys.argv = ["podsim", "run", *{[*RUN, "-o", str(out), *extra]!r}]
        app()
        """
    )
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


@pytest.mark.parametrize("sig", ["SIGKILL", "SIGTERM"])
def test_a_kill_while_writing_leaves_the_earlier_results_whole(tmp_path: Path, sig: str) -> None:
    out = tmp_path / "res"
    first = _run(out, "--seed", "1")
    assert first.returncode == 0, first.stderr
    (out / "notes.txt").write_text("mine")
    before = _snapshot(out)
    killed = _run(out, "--seed", "2", kill_during_write=sig)
    expected = -signal.SIGKILL if sig == "SIGKILL" else 130
    assert killed.returncode == expected, killed.stderr
    assert "Traceback" not in killed.stderr
    assert _snapshot(out) == before
    assert Results.read(out).summary["seed"] == 1
    leftovers = [p for p in tmp_path.iterdir() if p.name != "res"]
    if sig == "SIGTERM":  # handled like Ctrl-C: the staging folder is removed at once
        assert leftovers == []
    # the next run tidies whatever a killed run left and replaces the results whole
    again = _run(out, "--seed", "3")
    assert again.returncode == 0, again.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["res"]
    assert json.loads((out / "summary.json").read_text())["seed"] == 3
    assert (out / "notes.txt").read_text() == "mine"


def test_symlinks_planted_in_a_result_folder_are_not_followed(tmp_path: Path) -> None:
    out = tmp_path / "res"
    assert _run(out).returncode == 0
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (out / "resolved.yaml").unlink()
    (out / "resolved.yaml").symlink_to(victim)
    (out / "plots").symlink_to(elsewhere, target_is_directory=True)
    r = _run(out, "--set", "outputs.plots=true")
    assert r.returncode == 0, r.stderr
    assert victim.read_text() == "precious"
    assert list(elsewhere.iterdir()) == []
    assert not (out / "resolved.yaml").is_symlink() and (out / "resolved.yaml").is_file()
    assert not (out / "plots").is_symlink() and any((out / "plots").iterdir())


def test_staged_folder_swaps_only_when_complete(tmp_path: Path) -> None:
    target = tmp_path / "t"
    with staged_folder(target) as tmp:
        (tmp / "summary.json").write_text("{}")
        (tmp / ".podsim-files").write_text("summary.json\n")
        assert not target.exists()  # nothing visible until the block ends
    assert (target / "summary.json").read_text() == "{}"
    assert not (target / STAGING_MARK).exists()
    (target / "mine.txt").write_text("kept")
    with pytest.raises(RuntimeError), staged_folder(target) as tmp:
        (tmp / "summary.json").write_text('{"new": 1}')
        raise RuntimeError("boom")
    assert (target / "summary.json").read_text() == "{}"
    with staged_folder(target) as tmp:
        (tmp / "summary.json").write_text('{"new": 2}')
        (tmp / ".podsim-files").write_text("summary.json\n")
    assert (target / "summary.json").read_text() == '{"new": 2}'
    assert (target / "mine.txt").read_text() == "kept"  # the user's file moved along
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t"]


def test_recover_puts_back_a_folder_left_between_two_renames(tmp_path: Path) -> None:
    target = tmp_path / "t"
    dead = 2**22 + 12345  # no such process (pid_max is at most 2**22)
    old = tmp_path / f".t.podsim-old-{dead}"
    old.mkdir()
    (old / "summary.json").write_text("{}")
    unfinished = tmp_path / f".t.podsim-new-{dead}"
    unfinished.mkdir()
    (unfinished / STAGING_MARK).write_text("")
    recover(target)
    assert (target / "summary.json").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t"]


def test_the_interrupt_of_a_live_run_is_left_alone(tmp_path: Path) -> None:
    target = tmp_path / "t"
    live = tmp_path / f".t.podsim-new-{os.getppid()}"  # the parent process is alive
    live.mkdir()
    (live / STAGING_MARK).write_text("")
    recover(target)
    assert live.is_dir()


def test_plot_and_report_refuse_symlinks_in_the_folder(tmp_path: Path) -> None:
    out = tmp_path / "res"
    assert _run(out).returncode == 0
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (out / "plots").symlink_to(elsewhere, target_is_directory=True)
    (out / "report.html").symlink_to(tmp_path / "victim.html")
    for cmd in ("plot", "report"):
        r = subprocess.run(
            [sys.executable, "-m", "podsim", cmd, str(out)], capture_output=True, text=True
        )
        assert r.returncode == 2, r.stderr
        assert "symbolic link" in r.stderr
    assert list(elsewhere.iterdir()) == [] and not (tmp_path / "victim.html").exists()
