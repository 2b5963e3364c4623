"""The collector policy of a run (podsim.scenarios.execution.collector): long-lived objects
frozen inside a run, everything as it was after it, the caller's own collector settings left
alone, and a run's results the same whatever the collector does."""

from __future__ import annotations

import gc
import os
import weakref
from collections.abc import Iterator
from pathlib import Path

import pytest
from podsim.scenarios.execution import collector


class _Node:
    """An object in a reference cycle (only the cyclic collector frees it)."""

    def __init__(self) -> None:
        self.me = self


@pytest.fixture(autouse=True)
def _clean_collector() -> Iterator[None]:
    gc.unfreeze()
    saved = gc.get_threshold()
    yield
    collector._state.update(depth=0, ends_with_run=False, threshold=None)
    gc.unfreeze()
    gc.set_threshold(*saved)
    gc.enable()


def test_a_scope_freezes_and_restores_everything() -> None:
    before = gc.get_threshold()
    with collector.run_scope():
        assert gc.get_freeze_count() > 0
        assert gc.get_threshold()[0] == collector.YOUNG_THRESHOLD
        assert collector._after_collection in gc.callbacks
        with collector.run_scope():  # nested: joins the outer scope
            pass
        assert gc.get_threshold()[0] == collector.YOUNG_THRESHOLD
    assert gc.get_freeze_count() == 0
    assert gc.get_threshold() == before
    assert collector._after_collection not in gc.callbacks


def test_cycle_frozen_in_a_run_is_freed_after_it() -> None:
    with collector.run_scope():
        node = _Node()
        ref = weakref.ref(node)
        collector.checkpoint()  # the cycle is alive: frozen
        del node
        gc.collect()
        assert ref() is not None  # a frozen cycle is not collected
    gc.collect()
    assert ref() is None


def test_full_collection_that_finds_nothing_freezes_what_it_walked() -> None:
    with collector.run_scope():
        start = gc.get_freeze_count()
        keep = [_Node() for _ in range(10)]
        while gc.collect():  # until a full collection finds no garbage: then it freezes
            pass
        frozen = gc.get_freeze_count()
        assert frozen >= start + len(keep)
        alive = [_Node() for _ in range(10)]
        _Node()  # garbage in a cycle
        assert gc.collect() > 0  # found it: nothing frozen
        assert gc.get_freeze_count() == frozen
    del keep, alive


def test_process_that_ends_with_its_run_keeps_it_frozen() -> None:
    collector.process_ends_with_run()
    with collector.run_scope():
        pass
    assert gc.get_freeze_count() > 0
    assert collector._after_collection not in gc.callbacks


def test_caller_who_froze_or_disabled_the_collector_is_left_alone() -> None:
    keep = _Node()
    gc.freeze()
    frozen = gc.get_freeze_count()
    threshold = gc.get_threshold()
    with collector.run_scope():
        collector.checkpoint()
        assert gc.get_freeze_count() == frozen
        assert gc.get_threshold() == threshold
    assert gc.get_freeze_count() == frozen
    gc.unfreeze()
    gc.disable()
    with collector.run_scope():
        collector.checkpoint()
        assert gc.get_freeze_count() == 0
    assert not gc.isenabled()
    del keep


def test_checkpoint_outside_a_run_does_nothing() -> None:
    collector.checkpoint()
    assert gc.get_freeze_count() == 0


def test_run_results_do_not_depend_on_the_collector() -> None:
    """A packet run through podsim.run (which opens the scope) gives the same tables as the
    same run with the collector switched off, and leaves the collector as it found it."""
    from podsim.scenarios.runner import run

    sets = ["workload.moe.tokens_per_rank=64", "outputs.plots=false"]
    threshold = gc.get_threshold()
    a = run("quickstart", overrides=sets)
    assert gc.get_freeze_count() == 0 and gc.get_threshold() == threshold
    gc.disable()
    b = run("quickstart", overrides=sets)
    for name in ("messages", "phases", "links", "qps"):
        assert getattr(a, name).equals(getattr(b, name)), name
    assert a.summary["sim_time_s"] == b.summary["sim_time_s"]


def test_the_podsim_command_declares_that_its_process_ends_with_the_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The installed ``podsim`` script calls the entry pyproject.toml names, and that entry
    marks the process (so a run leaves its objects frozen and the exit walks none of them: the
    128-host fat-tree permutation exited in 0.4 s of CPU when the script called typer's ``app``
    directly, 0.04 s now)."""
    import importlib

    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
    import podsim.scenarios.cli.app as cli

    root = Path(__file__).resolve().parents[2]
    with open(root / "pyproject.toml", "rb") as fh:
        target = tomllib.load(fh)["project"]["scripts"]["podsim"]
    module, _, attr = target.partition(":")
    entry = getattr(importlib.import_module(module), attr)
    called: list[str] = []
    monkeypatch.setattr(cli, "app", lambda prog_name: called.append(prog_name))
    monkeypatch.setitem(cli._console, "process", False)
    monkeypatch.delenv("MPLBACKEND", raising=False)
    entry()
    assert called == ["podsim"]
    assert cli._console["process"] is True
    # and matplotlib is told to draw with Agg (no backend probing, no pyplot import)...
    assert os.environ["MPLBACKEND"] == "agg"
    # ...unless the user chose a backend
    monkeypatch.setenv("MPLBACKEND", "svg")
    entry()
    assert os.environ["MPLBACKEND"] == "svg"


def test_a_packet_run_process_imports_neither_scipy_nor_pyplot(tmp_path: Path) -> None:
    """``podsim run`` of a packet scenario without scale-up links, figures on, in its own
    process: SciPy (0.05 s of imports; only PCIe stream solving and fluid links use it) and
    pyplot (matplotlib imports it to pick a backend, probing GUI toolkits) are never imported."""
    import subprocess
    import sys

    out = tmp_path / "out"
    code = (
        "import sys\n"
        "from podsim.scenarios.cli.app import main\n"
        f"sys.argv = ['podsim', 'run', 'spray-vs-ecmp', '--out', {str(out)!r}, '-q',\n"
        "            '--set', 'workload.synthetic.size=64KiB']\n"
        "try:\n"
        "    main()\n"
        "except SystemExit as exc:\n"
        "    assert not exc.code, exc.code\n"
        "print(sorted(m for m in ('scipy', 'matplotlib.pyplot') if m in sys.modules))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "MPLBACKEND"}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "[]"
    assert (out / "plots" / "gpu_idle.png").is_file()  # the box plot that read the backend
    assert (out / "plots" / "topology.svg").is_file()
