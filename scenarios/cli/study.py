"""``podsim cost FILE`` and ``podsim sweep STUDY``: registered on the podsim typer app by
:func:`register_commands` (one line in scenarios/cli.py).

Bad input (a scenario or study that does not validate, an unknown catalog item) prints one
paragraph and exits with status 2; an interrupted sweep exits 130 and keeps every finished point;
a sweep with failed points exits 1 after writing the others.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from podsim.scenarios.cli.common import ForceOpt, SeedOpt, guarded
from rich.console import Console
from rich.table import Table

__all__ = ["cost_command", "register_commands", "sweep_command"]

EXIT_BAD_INPUT = 2
EXIT_FAILED_POINTS = 1
EXIT_INTERRUPTED = 130

console = Console()
err_console = Console(stderr=True)


def _bad_input(exc: Exception) -> typer.Exit:
    # the same plain paragraph as every other command's errors (podsim.scenarios.cli.common)
    from podsim.scenarios.cli.common import err_console as plain_err

    plain_err.print(f"error: {exc}", markup=False)
    return typer.Exit(EXIT_BAD_INPUT)


def cost_command(
    file: Annotated[str, typer.Argument(help="scenario file or built-in scenario name")],
    set_: Annotated[
        list[str] | None,
        typer.Option(
            "--set", "-s", help="override a key: cost.years=4, cost.prices.cable-dac.price_usd=150"
        ),
    ] = None,
    csv: Annotated[
        Path | None, typer.Option("--csv", help="also write the BOM as CSV to this file")
    ] = None,
    compare_layouts: Annotated[
        str | None,
        typer.Option(
            "--compare-layouts",
            help="BASE,VARIANT node layouts (e.g. external-switch,on-card-switch): print the "
            "variant's saving at each scope of 'system cost'",
        ),
    ] = None,
    seed: SeedOpt = None,
    force: ForceOpt = False,
) -> None:
    """Print the bill of materials and the cost breakdown of a scenario's cluster (no
    simulation)."""
    from podsim.scenarios.cost.scenario import cost_of_scenario
    from podsim.scenarios.cost.tables import cost_tables, savings_table

    try:
        cost = cost_of_scenario(file, set_ or [], seed=seed, force=force)
        pair = None
        if compare_layouts:
            names = [n.strip() for n in compare_layouts.split(",")]
            if len(names) != 2 or not all(names):
                raise ValueError(
                    f"--compare-layouts {compare_layouts!r} must be two node layouts, "
                    f"BASE,VARIANT (e.g. external-switch,on-card-switch)"
                )
            from podsim.scenarios.input.registries import get_registry

            layouts = get_registry("node layout")
            for n in names:
                if n not in layouts:  # else the error spoke of a --set the user never typed
                    raise ValueError(f"--compare-layouts: {layouts.unknown_message(n)}")
            pair = [
                cost_of_scenario(
                    file, [*(set_ or []), f"cluster.layout={n}"], seed=seed, force=force
                )
                for n in names
            ]
    except ValueError as exc:
        raise _bad_input(exc) from None
    for table in cost_tables(cost):
        console.print(table)
    if pair is not None:
        a, b = pair
        console.print(savings_table(a, b, *names))
    if csv is not None:
        try:
            cost.bom.to_csv(csv, index=False)
        except OSError as exc:  # a folder, a missing parent, no permission
            raise _bad_input(
                ValueError(f"--csv {str(csv)!r}: cannot write the BOM: {exc}")
            ) from None
        console.print(f"BOM written to {csv}")


def _summary_table(report, study) -> Table:
    from podsim.scenarios.study.plots import fmt_metric, pareto_front, variant_labels

    df = report.table
    t = Table(title=f"study {study.name}: {len(df)} points", title_justify="left")
    t.add_column("point", justify="right")
    t.add_column("variant")
    t.add_column(study.metric, justify="right")
    t.add_column(study.cost_metric, justify="right")
    t.add_column("Pareto", justify="center")
    if df.empty:
        return t
    has = study.metric in df.columns and study.cost_metric in df.columns
    front = (
        pareto_front(df[study.cost_metric], df[study.metric], study.maximize)
        if has
        else [False] * len(df)
    )
    for (_, row), label, f in zip(df.iterrows(), variant_labels(df), front, strict=True):
        m = row.get(study.metric)
        c = row.get(study.cost_metric)
        t.add_row(
            str(row["point"]),
            label,
            fmt_metric(study.metric, m),
            fmt_metric(study.cost_metric, c),
            "*" if f else "",
        )
    return t


def sweep_command(
    study: Annotated[str, typer.Argument(help="study file or built-in study name")],
    workers: Annotated[
        int | None,
        typer.Option("--workers", "-j", help="parallel points (default: all cores; 0 = inline)"),
    ] = None,
    dask: Annotated[
        str | None,
        typer.Option("--dask", help="dask scheduler address, or 'local' for a LocalCluster"),
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option("--out", "-o", help="output folder (default results/studies/NAME)"),
    ] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="no progress bar")] = False,
    plots: Annotated[bool, typer.Option("--plots/--no-plots", help="write the plots")] = True,
    allow_plugins: Annotated[
        bool,
        typer.Option(
            "--allow-plugins",
            help="Let the points load plug-in code they name (module:Class congestion control "
            "or path selectors); a study file alone never runs code.",
        ),
    ] = False,
) -> None:
    """Run every point of a study (resuming: finished points are kept and skipped), write the
    results table (results.parquet + results.csv) and the study plots."""
    from podsim.scenarios.study.plots import save_study_figures
    from podsim.scenarios.study.spec import load_study
    from podsim.scenarios.study.sweep import run_study

    try:
        spec = load_study(study)
        out_dir = out or Path("results") / "studies" / spec.name
        if out_dir.exists() and not out_dir.is_dir():
            raise ValueError(f"--out {str(out_dir)!r} is an existing file, not a folder.")
        if workers is not None and workers < 0:
            raise ValueError(f"--workers {workers}: give 0 (inline) or a positive count.")
        report = run_study(
            spec,
            out_dir,
            workers=workers,
            dask=dask,
            progress=not quiet,
            allow_plugins=allow_plugins,
        )
    except ValueError as exc:
        raise _bad_input(exc) from None
    except OSError as exc:  # an unreachable --dask scheduler, an unwritable --out
        where = f"--dask {dask!r}" if dask else f"study {study!r}"
        raise _bad_input(ValueError(f"{where}: {exc}")) from None
    df = report.table
    if not df.empty:
        df.to_csv(out_dir / "results.csv", index=False)
    console.print(_summary_table(report, spec))
    console.print(
        f"ran {len(report.ran)}, already done {len(report.skipped)}, failed "
        f"{len(report.failures)}; table: {out_dir / 'results.parquet'}"
    )
    from podsim.scenarios.cost.sensitivity import compares_first_two

    points = len(report.ran) + len(report.skipped)
    pair = compares_first_two(points, spec.savings_threshold) and len(df) == points
    if pair and not report.interrupted and any(c.startswith("capex.") for c in df.columns):
        from podsim.scenarios.cost.tables import savings_table
        from podsim.scenarios.study.plots import variant_labels

        a, b = (
            {c[len("capex.") :]: float(v) for c, v in row.items() if c.startswith("capex.")}
            for _, row in df.iloc[:2].iterrows()
        )
        if a != b:  # a comparison of two designs; points that cost the same have no saving
            names = variant_labels(df.iloc[:2])
            console.print(savings_table(a, b, names[0], names[1]))
    if not df.empty:
        from podsim.scenarios.cost.tables import sensitivity_table

        console.print(sensitivity_table(df, spec.metric, spec.cost_metric, spec.maximize,
                                        spec.savings_threshold))  # fmt: skip
    if plots and not df.empty:
        paths = save_study_figures(
            df, out_dir / "plots", spec.metric, spec.cost_metric, spec.maximize, spec.name
        )
        console.print(f"plots: {', '.join(str(p) for p in paths if p.suffix == '.png')}")
    for f in report.failures:
        err_console.print(f"[red]point {f.index} failed[/] ({f.params}): {f.error.splitlines()[0]}")
    if report.interrupted:
        err_console.print("interrupted: finished points are kept; run the same command to resume")
        raise typer.Exit(EXIT_INTERRUPTED)
    if report.failures:
        raise typer.Exit(EXIT_FAILED_POINTS)


def register_commands(app: typer.Typer) -> None:
    """Add ``cost`` and ``sweep`` to the podsim typer app, behind the same error guard as
    every other command (:func:`podsim.scenarios.cli.common.guarded`)."""
    app.command(
        "cost",
        help="Print the bill of materials and cost breakdown of a scenario (no simulation).",
    )(guarded(cost_command))
    app.command(
        "sweep",
        help="Run a study's points in parallel (resumable); write results.parquet and plots.",
    )(guarded(sweep_command))
