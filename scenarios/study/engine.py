"""The sweep engine: run study points in parallel and keep every finished one.

Points run through a ``run_point(resolved: dict) -> dict`` callable (a module-level function, so
that worker processes can import it): in this process (``workers=0``), in a local process pool
(``concurrent.futures.ProcessPoolExecutor``, spawn start method, the default) or on a
dask.distributed cluster (``dask="tcp://host:8786"`` an existing scheduler, ``dask="local"`` a
LocalCluster started here). Workers only compute; this process writes each finished point's row
at once (:class:`scenarios.study.store.ResultStore`), so a worker needs no shared file system and
an interrupted sweep (Ctrl-C, a killed job) keeps everything that finished. Restarting skips the
points whose key is already in the table.

A point that raises is reported (``failures``) and not written, so a later run retries it.
"""

from __future__ import annotations

import multiprocessing
import os
import traceback
from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
from podsim.scenarios.study.store import PARAM_PREFIX, ResultStore

__all__ = ["Point", "PointFailure", "SweepReport", "run_points"]

RunPoint = Callable[[dict[str, Any]], dict[str, Any]]


@dataclass(frozen=True)
class Point:
    """One resolved study point: its position, key, swept parameters and scenario."""

    study: str
    index: int
    key: str
    params: dict[str, Any]
    resolved: dict[str, Any]

    def meta(self) -> dict[str, Any]:
        row: dict[str, Any] = {"key": self.key, "study": self.study, "point": self.index}
        row.update({PARAM_PREFIX + k: v for k, v in self.params.items()})
        return row


@dataclass(frozen=True)
class PointFailure:
    key: str
    index: int
    params: dict[str, Any]
    error: str


@dataclass
class SweepReport:
    """What a sweep did: the full table and what ran, was skipped or failed this time."""

    table: pd.DataFrame
    ran: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    failures: list[PointFailure] = field(default_factory=list)
    interrupted: bool = False


def _call(run_point: RunPoint, resolved: dict[str, Any]) -> tuple[bool, Any]:
    """Run one point where it is scheduled; errors come back as text (tracebacks pickle badly)."""
    try:
        return True, run_point(resolved)
    except Exception as exc:
        return False, f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=6)}"


class _Progress:
    """A rich progress bar over points, or nothing."""

    def __init__(self, enabled: bool, total: int, label: str) -> None:
        self.bar = None
        if enabled and total:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            self.bar = Progress(
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("failed {task.fields[failed]}"),
                TimeElapsedColumn(),
                TimeRemainingColumn(),
            )
            self.task = self.bar.add_task(label, total=total, failed=0)
        self.failed = 0

    def __enter__(self) -> _Progress:
        if self.bar is not None:
            self.bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.stop()

    def advance(self, ok: bool) -> None:
        self.failed += not ok
        if self.bar is not None:
            self.bar.update(self.task, advance=1, failed=self.failed)


def run_points(
    points: Iterable[Point],
    run_point: RunPoint,
    out_dir: str | os.PathLike[str],
    *,
    workers: int | None = None,
    dask: Any = None,
    dask_processes: bool = True,
    progress: bool = True,
    on_done: Callable[[Point, bool], None] | None = None,
) -> SweepReport:
    """Run every point not yet in ``out_dir``'s table; returns the compacted table.

    ``workers``: 0 runs in this process; ``None`` = all cores; N = N local processes or
    N LocalCluster workers. ``dask``: None (local processes), ``"local"`` (a LocalCluster of
    ``workers`` workers, threads instead of processes when ``dask_processes`` is False), a
    scheduler address, or a ``distributed.Client``. ``on_done(point, ok)`` is called in this
    process after each point is stored (raising KeyboardInterrupt there stops the sweep the way
    Ctrl-C does).
    """
    store = ResultStore(out_dir)
    done = store.done_keys()
    todo: list[Point] = []
    skipped: list[str] = []
    seen: set[str] = set()
    for p in points:
        if p.key in done:
            skipped.append(p.key)
        elif p.key not in seen:  # two override sets resolving to one scenario run once
            seen.add(p.key)
            todo.append(p)
    report = SweepReport(table=pd.DataFrame(), skipped=skipped)
    if dask is not None:
        require_dask()  # before any point runs: a missing optional dependency is bad input

    def finish(point: Point, ok: bool, value: Any, quiet: bool = False) -> None:
        if ok:
            if not isinstance(value, dict):
                ok, value = False, f"run_point returned {type(value).__name__}, not a dict"
            else:
                store.write_point({**value, **point.meta()})
                report.ran.append(point.key)
        if not ok:
            report.failures.append(PointFailure(point.key, point.index, point.params, str(value)))
        bar.advance(ok)
        if on_done is not None and not quiet:
            on_done(point, ok)

    label = f"sweep {todo[0].study}" if todo else "sweep"
    try:
        with _Progress(progress, len(todo), label) as bar:
            if not todo:
                pass
            elif dask is not None:
                _run_dask(todo, run_point, finish, dask, workers, dask_processes)
            elif workers == 0:
                for p in todo:
                    finish(p, *_call(run_point, p.resolved))
            else:
                _run_pool(todo, run_point, finish, workers)
    except KeyboardInterrupt:
        report.interrupted = True
    finally:
        report.table = store.compact()
    return report


#: how often a pool worker checks that the sweep that started it is still alive (seconds)
PARENT_POLL_S = 0.5


def die_with_parent(parent_pid: int) -> None:
    """Pool-worker initializer: end this worker when the sweep process that started it ends,
    even by SIGKILL (which no handler sees), instead of simulating on for nobody.

    Linux delivers SIGKILL to the worker when its parent dies (``prctl(PR_SET_PDEATHSIG)``);
    everywhere a daemon thread also polls the parent every :data:`PARENT_POLL_S` seconds."""
    import ctypes
    import ctypes.util
    import signal
    import threading
    import time

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG = 1 (linux/prctl.h)
    except (OSError, AttributeError, TypeError):
        pass

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(PARENT_POLL_S)
        os._exit(1)

    if os.getppid() != parent_pid:  # the parent died before the prctl took effect
        os._exit(1)
    threading.Thread(target=watch, name="podsim-parent-watch", daemon=True).start()


def _run_pool(
    todo: list[Point],
    run_point: RunPoint,
    finish: Callable[..., None],
    workers: int | None,
) -> None:
    n = min(workers or os.cpu_count() or 1, len(todo))
    # spawn: workers start clean (no inherited threads or locks), as they would on macOS.
    ctx = multiprocessing.get_context("spawn")
    pool = ProcessPoolExecutor(
        max_workers=n, mp_context=ctx, initializer=die_with_parent, initargs=(os.getpid(),)
    )
    pending: dict[Future[tuple[bool, Any]], Point] = {}
    queue = iter(todo)
    try:
        # keep at most 2 points per worker queued so an interrupt loses little work
        for p in queue:
            pending[pool.submit(_call, run_point, p.resolved)] = p
            if len(pending) >= 2 * n:
                break
        while pending:
            finished, _ = wait(pending, return_when=FIRST_COMPLETED)
            for fut in finished:
                p = pending.pop(fut)
                finish(p, *fut.result())
                nxt = next(queue, None)
                if nxt is not None:
                    pending[pool.submit(_call, run_point, nxt.resolved)] = nxt
    except KeyboardInterrupt:
        # keep points that finished while we were stopping; drop the rest without waiting
        for fut, p in pending.items():
            if fut.done() and not fut.cancelled() and fut.exception() is None:
                ok, value = fut.result()
                if ok:
                    finish(p, ok, value, quiet=True)
        # Ctrl-C in a terminal reaches the workers too; a programmatic interrupt does not, so
        # stop them rather than wait for points whose results would be thrown away.
        for proc in list(getattr(pool, "_processes", {}).values()):
            proc.terminate()
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    else:
        pool.shutdown(wait=True)


def require_dask() -> tuple[Any, Any, Any]:
    """dask.distributed's ``Client``, ``LocalCluster`` and ``as_completed``; a ValueError that
    says how to install it when the optional ``dask`` extra is absent."""
    try:
        from dask.distributed import Client, LocalCluster, as_completed
    except ImportError:
        raise ValueError(
            "--dask needs dask.distributed, an optional dependency: install it with "
            "pip install 'podsim[dask]' (or run without --dask: local worker processes)."
        ) from None
    return Client, LocalCluster, as_completed


def _run_dask(
    todo: list[Point],
    run_point: RunPoint,
    finish: Callable[[Point, bool, Any], None],
    dask: Any,
    workers: int | None,
    processes: bool,
) -> None:
    Client, LocalCluster, as_completed = require_dask()
    cluster = None
    if isinstance(dask, Client):
        client, own = dask, False
    elif dask == "local":
        cluster = LocalCluster(
            n_workers=workers or os.cpu_count() or 1,
            threads_per_worker=1,
            processes=processes,
            dashboard_address=None,
        )
        client, own = Client(cluster), True
    else:
        client, own = Client(str(dask)), True
    futures = {}
    try:
        for p in todo:
            fut = client.submit(_call, run_point, p.resolved, key=f"point-{p.key}", pure=False)
            futures[fut.key] = (fut, p)
        for fut in as_completed([f for f, _ in futures.values()]):
            finish(futures[fut.key][1], *fut.result())
    finally:
        client.cancel([f for f, _ in futures.values()])
        if own:
            client.close()
        if cluster is not None:
            cluster.close()
