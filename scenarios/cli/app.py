"""The ``podsim`` command (typer + rich).

``podsim run [FILE|NAME]`` runs a scenario (the built-in ``quickstart`` when none is given) and
writes its tables, summary, cost, plots (and report) under ``--out`` or the scenario's
``outputs.dir``; ``validate``, ``show``, ``list``, ``docs``, ``trace``, ``plot`` and ``report``
do one job each, as do ``cost`` and ``sweep`` (:mod:`podsim.scenarios.cli.study`). Every command
goes through one error guard (:mod:`podsim.scenarios.cli.common`): bad input prints one paragraph
naming the file, key and value and exits with status 2; Ctrl-C exits with 130 after writing
what was simulated; an internal error prints a short message with the path of a saved
traceback and exits with 1 (``podsim --debug`` or ``PODSIM_DEBUG=1`` prints the traceback).
``validate`` makes every input check ``run`` makes before simulating
(:func:`scenarios.runner.preflight`), including the size estimates of :mod:`scenarios.build.limits`.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from podsim.scenarios.cli.common import (
    ForceOpt,
    SeedOpt,
    SetOpt,
    err_console,
    fail,
    guarded,
    out_console,
    set_debug,
)
from podsim.scenarios.errors import EXIT_INTERRUPTED, ScenarioError

__all__ = ["app", "guarded", "main"]

app = typer.Typer(
    name="podsim",
    help="Simulate AI-cluster fabrics: SmartNICs, multipath RDMA, CC, MoE all-to-all.",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
)


def _complete_scenario(incomplete: str) -> list[str]:
    """Shell completion of a scenario argument: the built-in names (files complete as paths)."""
    from podsim.scenarios.input.loader import library_names

    return [n for n in library_names() if n.startswith(incomplete)]


RefArg = Annotated[
    str,
    typer.Argument(
        help="Scenario file or built-in name (podsim list).", autocompletion=_complete_scenario
    ),
]
AllowPluginsOpt = Annotated[
    bool, typer.Option("--allow-plugins", help="Allow module:Class plug-ins to load.")
]
_fail = fail  # the name the commands below (and older tests) use


def _version(value: bool) -> None:
    if value:
        from podsim import __version__

        typer.echo(f"podsim {__version__}")
        raise typer.Exit()


@app.callback()
def _options(
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            callback=_version,
            is_eager=True,
            help="Print podsim's version and exit.",
        ),
    ] = False,
    debug: Annotated[
        bool,
        typer.Option(
            "--debug",
            help="Print the traceback of an internal error (also: PODSIM_DEBUG=1).",
        ),
    ] = False,
    verbose: Annotated[
        int,
        typer.Option(
            "--verbose",
            "-v",
            count=True,
            help="Log what podsim does to stderr: -v the steps of a run, -vv debug detail.",
        ),
    ] = 0,
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", help="Log errors only (no warnings).")
    ] = False,
) -> None:
    """Simulate AI-cluster fabrics: SmartNICs, multipath RDMA, CC, MoE all-to-all."""
    set_debug(debug)
    configure_logging(verbose, quiet)
    terminate_like_interrupt()


def terminate_like_interrupt() -> None:
    """SIGTERM (``kill``, a batch system's time limit) stops a command the way Ctrl-C does:
    through whatever SIGINT handler is current when it arrives (the engine's defers it to the
    next event boundary), so results are kept or left untouched, staging folders removed and
    sweep workers stopped, instead of the process vanishing mid-write."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return

    def on_term(signum: int, frame: Any) -> None:
        handler = signal.getsignal(signal.SIGINT)
        if callable(handler):
            handler(signal.SIGINT, frame)
        else:
            raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_term)


def _load(ref: str, sets: list[str] | None, seed: int | None = None) -> Any:
    sc, _doc = _load_doc(ref, sets, seed)
    return sc


def _load_doc(ref: str, sets: list[str] | None, seed: int | None = None) -> tuple[Any, Any]:
    from podsim.scenarios.input.loader import load_scenario

    return load_scenario(ref, sets or (), seed=seed)


class _located:
    """Context manager: errors of later steps point at the file and line of their key."""

    def __init__(self, doc: Any) -> None:
        self.doc = doc

    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> bool:
        if isinstance(exc, ScenarioError):
            raise self.doc.locate(exc) from None
        return False


class _ProgressBar:
    """A rich progress display (on stderr) that appears only once a run has taken more than a
    second: simulated time and engine events per second (averaged over at least half a second
    of wall time), then what the run does after the engine (``stage``)."""

    #: wall seconds before the display appears, and the least window of the events/s figure
    DELAY_S = 1.0
    RATE_WINDOW_S = 0.5

    def __init__(self, enabled: bool, label: str) -> None:
        import threading

        self.enabled = enabled
        self.label = label
        self.t0 = time.perf_counter()
        self.progress: Any = None
        self.task: Any = None
        self._last = (self.t0, 0)
        self._rate = ""
        # an engine reports progress every PROGRESS_EVENTS events, which can be minutes apart
        # when single events are slow (a fluid scale-up re-solve over 60 k transfers): a timer
        # shows the display (its spinner and elapsed time refresh on their own) on time anyway
        self._lock = threading.RLock()
        self._timer: Any = None
        self._stopped = False

    def _start_timer(self) -> None:
        import threading

        if self._timer is None and self.enabled and not self._stopped:
            wait = max(0.0, self.DELAY_S - (time.perf_counter() - self.t0))
            self._timer = threading.Timer(wait, lambda: self._shown(time.perf_counter()))
            self._timer.daemon = True
            self._timer.start()

    def _shown(self, now: float) -> bool:
        """Start the display once the run is older than DELAY_S; whether it is shown."""
        with self._lock:
            return self._show(now)

    def _show(self, now: float) -> bool:
        if self.progress is None:
            if not self.enabled or self._stopped or now - self.t0 < self.DELAY_S:
                return False
            from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

            self.progress = Progress(
                SpinnerColumn(),
                TextColumn("[bold]{task.description}"),
                TextColumn("simulated {task.fields[sim]}"),
                TextColumn("{task.fields[rate]}"),
                TimeElapsedColumn(),
                console=err_console,
                transient=True,
            )
            self.progress.start()
            self.task = self.progress.add_task(self.label, total=None, sim="0s", rate="")
        return True

    def __call__(self, sim_t: float, events: int | None) -> None:
        now = time.perf_counter()
        self._start_timer()
        if not self._shown(now):
            return
        from podsim.fabric.units import fmt_time

        if events is not None:
            t_prev, e_prev = self._last
            if events < e_prev:  # a new count (another engine pass): restart the window
                self._last = (now, events)
            elif now - t_prev >= self.RATE_WINDOW_S:
                self._rate = f"{(events - e_prev) / (now - t_prev) / 1e3:,.0f} k events/s"
                self._last = (now, events)
        self.progress.update(self.task, sim=fmt_time(sim_t), rate=self._rate)

    def stage(self, what: str) -> None:
        """The engine is done: show what the run does now (writing results, drawing plots)."""
        if self._shown(time.perf_counter()):
            self.progress.update(self.task, description=f"{self.label}: {what}", rate="")

    def stop(self) -> None:
        with self._lock:
            self._stopped = True
            if self._timer is not None:
                self._timer.cancel()
            if self.progress is not None:
                self.progress.stop()


@app.command()
@guarded
def run(
    scenario: Annotated[
        str, typer.Argument(help="Scenario file or built-in name; default: quickstart.")
    ] = "quickstart",
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            "-o",
            help="Output folder (default: the scenario's outputs.dir). A new or empty folder, "
            "or an earlier result folder: its previous results are replaced (files of your "
            "own in it stay); any other non-empty folder is refused.",
        ),
    ] = None,
    sets: SetOpt = None,
    seed: SeedOpt = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Print nothing but errors.")] = False,
    allow_plugins: AllowPluginsOpt = False,
    no_checks: Annotated[
        bool,
        typer.Option("--no-checks", help="Skip the invariant checks (sim.checks: false)."),
    ] = False,
    force: ForceOpt = False,
) -> None:
    """Run a scenario and write its results, plots and summary.

    The results go to --out (or the scenario's outputs.dir). Running again into the same
    result folder replaces the earlier run's files (the manifest .podsim-files lists them), so
    no stale table or plot survives; the new results are written beside it and swapped in
    only when complete, so an interrupted or killed run leaves the earlier results whole.
    A folder that is not empty and holds no podsim result is refused (exit 2).
    """
    from podsim.scenarios.results.folder import check_output_dir
    from podsim.scenarios.runner import output_dir
    from podsim.scenarios.runner import run as run_scenario

    if no_checks:
        sets = [*(sets or []), "sim.checks=false"]
    sc, doc = _load_doc(scenario, sets, seed)
    folder = output_dir(sc, out)
    # refuse before simulating, not after: the results could not be written
    check_output_dir(folder, "--out" if out is not None else "outputs.dir")
    bar = _ProgressBar(not quiet, f"{sc.name} ({sc.engine})")
    if _console["process"]:
        # the process exits after this run: what the run froze stays frozen (the collector
        # never walks it again; scenarios.execution.collector)
        from podsim.scenarios.execution.collector import process_ends_with_run

        process_ends_with_run()
    try:
        with _located(doc):
            res = run_scenario(
                sc,
                out=folder,
                progress=bar,
                stage=bar.stage,
                allow_plugins=allow_plugins,
                force=force,
            )
    except KeyboardInterrupt:
        # while writing: the staging folder is removed, the earlier results stay whole
        bar.stop()
        kept = f"; the earlier results in {folder}/ are unchanged" if folder.is_dir() else ""
        _fail(f"interrupted before the results were complete{kept}", EXIT_INTERRUPTED)
    finally:
        bar.stop()
    if not quiet:
        for table in res.summary_tables():
            out_console.print(table)
        if "traffic" in res.summary:
            out_console.print(_traffic_line(res.summary["traffic"]), markup=False)
        out_console.print(f"results in {folder}/", markup=False)
    if res.status == "interrupted":
        err_console.print(f"interrupted: partial results kept in {folder}/", markup=False)
        raise typer.Exit(EXIT_INTERRUPTED)
    if res.status != "complete" and not quiet:
        err_console.print(f"warning: the run ended with status {res.status!r}", markup=False)


def _traffic_line(t: dict[str, Any]) -> str:
    """Which source produced the MoE messages (workload.moe.traffic_source)."""
    if t["source"] == "kernels":
        return (
            f"MoE traffic: read from the dispatch/combine kernels' buffers (all {t['ranks']} ranks)"
        )
    if t["kernel_ranks"]:
        return (
            f"MoE traffic: from the routing counts, checked against the kernels' buffers on "
            f"{t['kernel_ranks']} of {t['ranks']} source ranks per layer (kernel_memory)"
        )
    return "MoE traffic: from the routing counts (traffic_source: counts, no kernel ran)"


@app.command()
@guarded
def validate(
    scenario: RefArg,
    sets: SetOpt = None,
    seed: SeedOpt = None,
    build: Annotated[
        bool,
        typer.Option(
            "--build/--no-build",
            help="Also build the cluster and the workload trace and make every check run "
            "makes before simulating (--no-build: the file's keys and values only).",
        ),
    ] = True,
    allow_plugins: AllowPluginsOpt = False,
    force: ForceOpt = False,
) -> None:
    """Check a scenario without running it: with --build (the default) every input check
    that run makes before simulating, so a scenario that validates is not refused by run."""
    sc, doc = _load_doc(scenario, sets, seed)
    if build:
        from podsim.scenarios.runner import preflight

        with _located(doc):
            preflight(sc, force=force, allow_plugins=allow_plugins)
    out_console.print(f"{scenario}: valid ({sc.name}, engine {sc.engine})", markup=False)


@app.command()
@guarded
def show(scenario: RefArg, sets: SetOpt = None, seed: SeedOpt = None) -> None:
    """Print the resolved scenario with every default filled in (YAML)."""
    import yaml

    sc = _load(scenario, sets, seed)
    typer.echo(yaml.safe_dump(sc.resolved(), sort_keys=False), nl=False)


@app.command(name="list")
@guarded
def list_(
    what: Annotated[
        str | None,
        typer.Argument(help="Only this section (e.g. scenarios, topologies, cc, selectors)."),
    ] = None,
) -> None:
    """List built-in scenarios and studies and the registries' names with one-line
    descriptions."""
    from podsim.scenarios.input.loader import library_description, library_names
    from podsim.scenarios.input.registries import get_registry
    from podsim.scenarios.study.spec import study_description, study_names
    from rich.table import Table

    sections: list[tuple[str, list[tuple[str, str]]]] = [
        ("scenarios", [(n, library_description(n)) for n in library_names()]),
        ("studies (podsim sweep)", [(n, study_description(n)) for n in study_names()]),
    ]
    for title, kind in (
        ("topologies and cluster presets", "topology"),
        ("node layouts", "node layout"),
        ("NIC models", "NIC model"),
        ("congestion control", "congestion control"),
        ("path selectors", "path selector"),
        ("workloads", "workload"),
        ("MoE model presets", "model preset"),
        ("dispatch modes", "dispatch mode"),
        ("expert placements", "expert placement"),
        ("expert popularity (skew)", "expert popularity"),
        ("synthetic patterns", "synthetic pattern"),
        ("collectives (op/algorithm)", "collective"),
        ("pipeline schedules", "pipeline schedule"),
        ("GPUs (training compute)", "GPU"),
        ("serving models (workload.serving)", "serving model"),
        ("rank mappings", "rank mapping"),
        ("PHY profiles", "PHY profile"),
        ("engines", "engine"),
    ):
        sections.append((title, get_registry(kind).describe()))
    if what:
        key = what.lower().replace("-", " ").replace("_", " ").rstrip("s")
        aliases = {
            "cc": "congestion control",
            "selector": "path selectors",
            "nic": "nic model",
            "layout": "node layout",
            "model": "moe model",
            "study": "studie",
        }
        key = aliases.get(key, key)
        chosen = [s for s in sections if key in s[0].lower()]
        if not chosen:
            raise ScenarioError(
                f"no list called {what!r}; choose from: " + ", ".join(t for t, _ in sections) + "."
            )
        sections = chosen
    for title, rows in sections:
        table = Table(title=title, title_justify="left", show_header=False, box=None)
        table.add_column("name", style="bold")
        table.add_column("description")
        for name, desc in rows:
            table.add_row(name, desc)
        if not rows:
            table.add_row("(none installed yet)", "")
        out_console.print(table)


@app.command()
@guarded
def trace(
    scenario: RefArg,
    out: Annotated[Path | None, typer.Option("--out", "-o", help="Trace file to write.")] = None,
    sets: SetOpt = None,
    seed: SeedOpt = None,
    force: ForceOpt = False,
) -> None:
    """Write the scenario's workload trace (Parquet, or CSV by extension) without simulating."""
    from podsim.scenarios.build.cluster import build_cluster, build_trace, trace_ranks

    sc, doc = _load_doc(scenario, sets, seed)
    path = out or Path(f"{sc.name}-trace.parquet")
    opt = "--out" if out is not None else "the default trace file"
    if path.suffix not in (".parquet", ".csv"):
        raise ScenarioError(f"{opt} {str(path)!r}: a trace file ends in .parquet or .csv.")
    if path.is_dir():
        raise ScenarioError(f"{opt} {str(path)!r} is a folder; give a trace file name.")
    from podsim.scenarios.build.workload_graph import build_workload_graph, graph_trace

    with _located(doc):
        cluster = build_cluster(sc, trace_ranks(sc), force=force)
        # a graph workload (collective, imported trace): its messages, without the dependencies
        graph = build_workload_graph(sc, cluster)
        df = graph_trace(graph, cluster) if graph is not None else build_trace(sc, cluster)
    from podsim.workloads.trace import write_trace

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_trace(df, path)  # keeps num_ranks and the compute table in the file
    except OSError as exc:
        raise ScenarioError(
            f"{opt} {str(path)!r}: cannot write the trace: {exc.strerror or exc}."
        ) from None
    out_console.print(
        f"wrote {len(df)} messages ({int(df['bytes'].sum())} bytes, {cluster.num_ranks} ranks) "
        f"to {path}"
        + (
            f" (workload.{sc.workload.kind} is an operation graph: the file has its messages, "
            "not the dependencies between them)"
            if graph is not None
            else ""
        ),
        markup=False,
    )


@app.command()
@guarded
def plot(directory: Annotated[Path, typer.Argument(help="A result or study folder.")]) -> None:
    """(Re)draw the plots of a result folder (or of a study folder: podsim sweep)."""
    from podsim.scenarios.build.cluster import read_graph
    from podsim.scenarios.report.html import is_study_folder
    from podsim.scenarios.report.plots import plot_all
    from podsim.scenarios.results.folder import check_within
    from podsim.scenarios.results.tables import Results

    check_within(directory, "plots")
    if is_study_folder(directory):
        from podsim.scenarios.study.plots import plot_study_folder

        files = plot_study_folder(directory)
        out_console.print(f"wrote {len(files)} plot files in {directory / 'plots'}", markup=False)
        return
    res = Results.read(directory)
    graph = read_graph(directory)
    fmts = (res.scenario.get("outputs") or {}).get("plot_formats") or ["png", "svg"]
    files = plot_all(res, directory / "plots", formats=fmts, graph=graph)
    out_console.print(f"wrote {len(files)} plot files in {directory / 'plots'}", markup=False)


@app.command()
@guarded
def compare(
    directories: Annotated[
        list[Path], typer.Argument(help="Two or more result folders; the first is the baseline.")
    ],
    html: Annotated[
        Path | None, typer.Option("--html", help="Also write the comparison as an HTML page.")
    ] = None,
    threshold: Annotated[
        float, typer.Option(help="Relative change that counts as a difference (0.05 = 5 %).")
    ] = 0.05,
) -> None:
    """Compare result folders side by side: each figure per run, its change against the first
    run, and the differences of at least --threshold marked better or worse."""
    from podsim.scenarios.report.compare import compare as compare_runs
    from podsim.scenarios.report.compare import formatted, write_compare_html
    from podsim.scenarios.results.tables import Results
    from rich.table import Table

    if len(directories) < 2:
        raise ScenarioError("podsim compare needs at least two result folders")
    if not 0 <= threshold < 10:
        raise ScenarioError(f"--threshold {threshold!r} must be a fraction in [0, 10)")
    runs = [Results.read(d) for d in directories]
    names = [d.name or str(d) for d in directories]
    if len(set(names)) != len(names):
        names = [str(d) for d in directories]
    df = compare_runs(runs, names, threshold=threshold)
    t = Table(title=f"podsim compare (baseline {names[0]})", title_justify="left")
    for h in ["figure", *names, *[c for c in df.columns if str(c).startswith("change vs ")],
              "verdict"]:  # fmt: skip
        t.add_column(str(h), justify="left" if h in ("figure", "verdict") else "right")
    for cells in formatted(df, names):
        style = "red" if "worse" in cells[-1] else "green" if "better" in cells[-1] else None
        t.add_row(*cells, style=style)
    out_console.print(t)
    if html is not None:
        path = write_compare_html(runs, names, html, threshold=threshold)
        out_console.print(f"wrote {path}", markup=False)


@app.command()
@guarded
def analyse(
    directory: Annotated[
        Path, typer.Argument(help="A result folder, or a folder of per-rank Kineto JSON traces.")
    ],
    out: Annotated[
        Path | None,
        typer.Option("--out", "-o", help="Also write the tables (Parquet) into this folder."),
    ] = None,
) -> None:
    """Pipeline bubbles, exposed communication and slow ranks of a run or of recorded traces
    (podsim.scenarios.report.analyse says how each is measured)."""
    from podsim.scenarios.report.analyse import SLOW_FACTOR, analyse_dir
    from rich.table import Table

    a = analyse_dir(directory)
    b = a.breakdown
    span = float(b["span_s"].max())
    t = Table(title=f"time per rank, {a.source} (mean and max over {len(b)} ranks)",
              title_justify="left")  # fmt: skip
    for col in ("share", "mean", "max"):
        t.add_column(col, justify="left" if col == "share" else "right")
    for col in [c for c in b.columns if c not in ("rank", "span_s")]:
        name = col if col in ("compute", "idle") else f"exposed {col}"
        t.add_row(name, f"{b[col].mean() / span * 100:.1f} %", f"{b[col].max() * 1e6:,.1f} us")
    t.caption = f"span {span * 1e6:,.1f} us; idle = bubbles and waits no exchange explains"
    t.caption_justify = "left"
    out_console.print(t)
    g = Table(title="longest idle gaps (bubbles) per rank", title_justify="left")
    for col in ("rank", "at", "idle", "ended by"):
        g.add_column(col, justify="right" if col != "ended by" else "left")
    for r in a.gaps.sort_values("duration_s", ascending=False).head(12).itertuples():
        g.add_row(str(r.rank), f"{r.start_s * 1e6:,.1f} us", f"{r.duration_s * 1e6:,.1f} us",
                  str(r.ended_by))  # fmt: skip
    out_console.print(g)
    if a.stages is not None and len(a.stages):
        st = a.stages.groupby(["stage", "pass"])["wait_s"].sum().unstack(fill_value=0.0)
        s = Table(title="pipeline bubble per stage (summed wait before passes)",
                  title_justify="left")  # fmt: skip
        s.add_column("stage", justify="right")
        for c in st.columns:
            s.add_column(f"before {c}", justify="right")
        for stage, row in st.iterrows():
            s.add_row(str(stage), *(f"{v * 1e6:,.1f} us" for v in row))
        out_console.print(s)
    if a.slow.empty:
        out_console.print(f"no slow rank (none at {SLOW_FACTOR}x the median or more)")
    else:
        w = Table(title=f"slow ranks (>= {SLOW_FACTOR}x the median)", title_justify="left")
        for col in ("rank", "slow in", "time", "median", "x median", "delays the step by"):
            w.add_column(col, justify="left" if col == "slow in" else "right")
        for r in a.slow.itertuples():
            w.add_row(str(r.rank), r.slow_in, f"{r.time_s * 1e6:,.1f} us",
                      f"{r.median_s * 1e6:,.1f} us", f"{r.vs_median:.2f}",
                      f"up to {r.delay_s * 1e6:,.1f} us")  # fmt: skip
        out_console.print(w)
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        for name in ("breakdown", "gaps", "slow", "stages"):
            df = getattr(a, name)
            if df is not None:
                df.to_parquet(out / f"analysis_{name}.parquet", index=False)
        out_console.print(f"wrote the tables in {out}", markup=False)


@app.command()
@guarded
def report(
    directory: Annotated[Path, typer.Argument(help="A result or study folder.")],
    out: Annotated[Path | None, typer.Option("--out", "-o", help="HTML file to write.")] = None,
    baseline: Annotated[
        Path | None,
        typer.Option("--baseline", help="A result folder the findings compare the run with."),
    ] = None,
) -> None:
    """Write one self-contained HTML report of a result folder (or of a study folder)."""
    from podsim.scenarios.report.html import write_report
    from podsim.scenarios.results.folder import check_within

    if out is None:
        check_within(directory, "report.html")
    path = write_report(directory, out, baseline)
    out_console.print(f"wrote {path}", markup=False)


@app.command()
@guarded
def docs(
    fmt: Annotated[
        str, typer.Option("--format", "-f", help="md (a Markdown table) or text.")
    ] = "md",
) -> None:
    """Print the reference of every scenario key: path, type, default, unit, description."""
    from podsim.scenarios.input.docs import render

    if fmt not in ("md", "text"):
        raise ScenarioError(f"--format {fmt!r}: use md or text.")
    typer.echo(render(fmt=fmt), nl=False)


@app.command()
@guarded
def schema(
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="Write to this file (default: stdout).")
    ] = None,
) -> None:
    """Print the JSON Schema of a scenario file, for YAML editors (completion and checks)."""
    import json

    from podsim.scenarios.input.jsonschema import scenario_json_schema

    text = json.dumps(scenario_json_schema(), indent=2) + "\n"
    if out is None:
        typer.echo(text, nl=False)
        return
    try:
        out.write_text(text)
    except OSError as exc:
        raise ScenarioError(f"--out {str(out)!r}: cannot write it ({exc.strerror}).") from None
    out_console.print(f"wrote {out}", markup=False)


from podsim.scenarios.cli.study import register_commands as _register_cost_and_sweep  # noqa: E402

_register_cost_and_sweep(app)  # `podsim cost` and `podsim sweep` (issue 8), guarded too


def _reflow_help(typer_app: typer.Typer) -> None:
    """Join the source line breaks of each command's docstring into paragraphs: typer's rich
    help keeps them, so ``podsim --help`` and ``podsim run --help`` broke sentences mid-line."""
    import inspect

    for info in typer_app.registered_commands:
        text = info.help or inspect.getdoc(info.callback) or ""
        paragraphs = [" ".join(p.split()) for p in text.split("\n\n")]
        info.help = "\n\n".join(p for p in paragraphs if p)


_reflow_help(app)


class _StderrHandler(logging.StreamHandler):
    """A stream handler that writes to whatever ``sys.stderr`` is when a record is emitted
    (test runners and notebooks replace it)."""

    @property  # type: ignore[override]
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, value: Any) -> None:
        pass


def configure_logging(verbose: int, quiet: bool) -> None:
    """Standard :mod:`logging` for the ``podsim`` loggers on stderr: warnings by default,
    ``-v`` info (the steps of a run), ``-vv`` debug, ``-q`` errors only."""
    level = logging.ERROR if quiet else (
        logging.WARNING, logging.INFO, logging.DEBUG
    )[min(verbose, 2)]  # fmt: skip
    log = logging.getLogger("podsim")
    log.setLevel(level)
    if not any(isinstance(h, _StderrHandler) for h in log.handlers):
        handler = _StderrHandler()
        handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
        log.addHandler(handler)


#: true in the ``podsim`` process itself (:func:`main`), false when a test or a notebook
#: invokes the commands (typer's test runner calls ``app``)
_console = {"process": False}


def main() -> None:  # pragma: no cover - console entry (`podsim`, `python -m podsim`)
    """The ``podsim`` command (pyproject.toml's console script) and ``python -m podsim``: this
    process ends with its command, which a run uses to skip work at exit
    (:func:`podsim.scenarios.execution.collector.process_ends_with_run`). Its figures are
    files: matplotlib draws them with Agg, and is told so (``MPLBACKEND``, unless the user set
    it) before it would pick a backend itself, which imports pyplot and probes the GUI toolkits
    (a box plot reads every rcParam, the backend among them)."""
    _console["process"] = True
    os.environ.setdefault("MPLBACKEND", "agg")
    app(prog_name="podsim")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
