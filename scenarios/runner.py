"""Run a scenario: build, dispatch to the engine, assemble and write the results.

``run(scenario)`` is the Python API notebooks use (re-exported as ``podsim.run``); the
``podsim run`` command calls the same function with a progress callback and an output folder.
"""

from __future__ import annotations

import difflib
import logging
import os
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from podsim.scenarios.build.cluster import (
    Cluster,
    build_cluster,
    build_trace,
    compute_table,
    topology_io,
    trace_ranks,
    with_stragglers,
)
from podsim.scenarios.build.workload_graph import build_workload_graph, graph_trace
from podsim.scenarios.engines import ENGINES, EngineOutput, RunContext
from podsim.scenarios.errors import ScenarioError
from podsim.scenarios.input.loader import Document, load_scenario
from podsim.scenarios.input.schema import Scenario
from podsim.scenarios.results.folder import MANIFEST, check_output_dir, staged_folder
from podsim.scenarios.results.provenance import provenance
from podsim.scenarios.results.tables import (
    Results,
    conform,
    json_safe,
    settle_messages,
    summarise,
)
from podsim.workloads.deepep_metrics import deepep_bytes_table
from podsim.workloads.graph import OpGraph
from podsim.workloads.training.metrics import training_summary

log = logging.getLogger(__name__)

__all__ = [
    "Prepared",
    "output_dir",
    "preflight",
    "prepare",
    "price",
    "run",
    "write_outputs",
]

Progress = Callable[[float, int | None], None]
#: told what a run does after its engine finished (a short text)
Stage = Callable[[str], None]


class Prepared:
    """A scenario with its cluster, trace and compute table built (what an engine needs).
    ``compute_model``: the compute table before straggler faults (what the straggler analysis
    compares the run with), None when not built."""

    def __init__(self, scenario: Scenario, cluster: Cluster, trace: pd.DataFrame,
                 compute: pd.DataFrame,
                 compute_model: pd.DataFrame | None = None,
                 graph: OpGraph | None = None) -> None:  # fmt: skip
        self.scenario = scenario
        self.cluster = cluster
        self.trace = trace
        self.compute = compute
        self.compute_model = compute_model
        self.graph = graph


def _as_scenario(
    scenario: Scenario | Mapping[str, Any] | str | Path,
    overrides: Iterable[str] = (),
    seed: int | None = None,
) -> tuple[Scenario, Document | None]:
    if isinstance(scenario, Scenario) and not overrides and seed is None:
        return scenario, None
    return load_scenario(scenario, overrides, seed=seed)


def check_plugins(sc: Scenario, allow_plugins: bool) -> None:
    """A scenario may name user code only when the user opted in (``--allow-plugins``)."""
    plugins = sc.plugins()
    if plugins and not allow_plugins:
        raise ScenarioError(
            f"the scenario names plug-in code {', '.join(map(repr, plugins))}; a scenario file "
            "alone never runs code: pass --allow-plugins (or allow_plugins=True) to load it.",
            path="cluster.nic",
        )


def prepare(scenario: Scenario, *, force: bool = False) -> Prepared:
    """Build the cluster, the trace and the compute times of ``scenario`` (``force``: build a
    cluster over the size budget, :func:`podsim.scenarios.build.limits.check_cluster_size`)."""
    from podsim.scenarios.build.limits import check_workload_size

    n = trace_ranks(scenario)
    log.info("building the cluster of %s", scenario.name)
    cluster = build_cluster(scenario, n, force=force)
    check_workload_size(scenario, force=force)
    g = cluster.graph
    log.info("cluster: %d ranks, %d nodes, %d links; building the workload trace",
             cluster.num_ranks, g.number_of_nodes(), g.number_of_edges())  # fmt: skip
    graph = build_workload_graph(scenario, cluster)
    if graph is not None:
        # compute is inside the graph (straggler factors applied there)
        trace = graph_trace(graph, cluster)
        log.info("operation graph: %d nodes, %d messages", len(graph), len(trace))
        model = compute = pd.DataFrame(columns=["step", "layer", "rank", "compute_s"])
        return Prepared(scenario, cluster, trace, compute, None, graph)
    trace = build_trace(scenario, cluster)
    log.info("trace: %d messages, %d bytes", len(trace), int(trace["bytes"].sum()))
    model = compute_table(scenario, cluster, trace, with_faults=False)
    compute = with_stragglers(scenario, cluster, model)
    return Prepared(scenario, cluster, trace, compute, model)


def output_dir(sc: Scenario, out: str | Path | None = None) -> Path:
    """``out`` or the scenario's ``outputs.dir`` with ``{name}`` (and ``{variant}``) filled."""
    if out is not None:
        return Path(out)
    return Path(sc.outputs.dir.format(name=sc.name, variant=sc.variant or "default"))


def _assemble(sc: Scenario, prep: Prepared, eo: EngineOutput, wall_s: float) -> Results:
    phases = conform("phases", eo.phases)
    # every undelivered message says why (failed, or the run stopped first)
    messages = settle_messages(conform("messages", eo.messages), eo.status)
    ends = phases["end_s"].to_numpy(float)
    makespan = float(np.nanmax(ends)) if len(ends) and np.isfinite(ends).any() else eo.sim_time_s
    links = conform("links", eo.links)
    if len(links):
        window = makespan if makespan > 0 else float("nan")
        links["utilisation"] = 8.0 * links["tx_bytes"] / (links["rate_bps"] * window)
    qps = conform("qps", eo.qps)
    queues = conform("queues", eo.queues)
    by_phase, phase_summary = _links_by_phase(sc, eo, phases, links, makespan)
    summary = summarise(
        messages=messages,
        phases=phases,
        links=links,
        qps=qps,
        num_ranks=prep.cluster.num_ranks,
        makespan_s=makespan,
        deepep=deepep_bytes_table(prep.trace.attrs),
    )
    if phase_summary is not None:
        summary["link_utilisation_by_phase"] = json_safe(phase_summary)
    if prep.graph is not None and "training" in prep.graph.meta:
        summary["training"] = training_summary(phases, prep.graph.meta["training"])
    events = eo.events
    head = {
        "scenario": sc.name,
        "variant": sc.variant,
        "engine": sc.engine,
        "seed": sc.seed,
        "status": eo.status,
        "sim_time_s": eo.sim_time_s,
        "wall_s": wall_s,
        "events": events,
        "events_per_s": (events / wall_s) if events and wall_s > 0 else None,
        "topology": prep.cluster.graph.graph.get("name"),
        "gpus": len({*prep.cluster.rank_gpu.tolist()}),
        **prep.cluster.extra,
        **_traffic_source(prep.trace.attrs),
    }
    resolved = sc.resolved()
    summary = {**head, **summary, "engine_info": eo.extra, "provenance": provenance(resolved)}
    return Results(
        messages=messages,
        phases=phases,
        links=links,
        qps=qps,
        queues=queues,
        summary=summary,
        scenario=resolved,
        links_by_phase=by_phase,
    )


def _links_by_phase(
    sc: Scenario, eo: EngineOutput, phases: pd.DataFrame, links: pd.DataFrame, makespan: float
) -> tuple[pd.DataFrame, dict[str, Any] | None]:
    """The ``links_by_phase`` table and its summary from the engine's link byte series
    (:mod:`podsim.scenarios.results.phase_links`); empty and None without one."""
    from podsim.scenarios.results.phase_links import (
        contention_threshold_bytes,
        links_by_phase,
        phase_link_summary,
        phase_segments,
    )

    series = eo.link_series
    if series is None or not len(links):
        return conform("links_by_phase", None), None
    end = max(makespan if np.isfinite(makespan) else 0.0,
              float(series.times[-1]) if len(series.times) else 0.0)  # fmt: skip
    table = links_by_phase(links, series, phase_segments(phases, end))
    threshold = contention_threshold_bytes(sc.resolved())
    return table, phase_link_summary(
        table, threshold, series.queue_bytes is not None, series.interval_s
    )


def _traffic_source(attrs: dict[str, Any]) -> dict[str, Any]:
    """Where an MoE trace's messages came from (podsim.workloads.kernel_traffic), if it says."""
    if "traffic_source" not in attrs:
        return {}
    return {
        "traffic": {
            "source": attrs["traffic_source"],
            "kernel_ranks": int(attrs["kernel_ranks"]),
            "ranks": int(attrs["num_ranks"]),
        }
    }


def _counting(progress: Progress | None, seen: dict[str, int | None]) -> Progress:
    """The progress callback, also remembering the engine's last event count."""

    def call(sim_t: float, events: int | None) -> None:
        if events is not None:
            seen["events"] = events
        if progress is not None:
            progress(sim_t, events)

    return call


def _with_bound(summary: dict[str, Any], ctx: RunContext) -> dict[str, Any]:
    """Every run also reports itself as a fraction of the physical lower bound (issue 7), when
    the bound engine's module provides ``bound_summary``/``add_bound``. A training step has no
    per-phase bound: its phases recur per micro-batch and pass, which the bound does not
    separate."""
    if ctx.graph is not None and "training" in ctx.graph.meta:
        return summary
    try:
        from podsim.scenarios.engines import bound as bound_mod
    except ImportError:
        return summary
    make = getattr(bound_mod, "bound_summary", None)
    attach = getattr(bound_mod, "add_bound", None)
    if make is None or attach is None:
        return summary
    return attach(summary, make(ctx))


def run(
    scenario: Scenario | Mapping[str, Any] | str | Path,
    *,
    overrides: Iterable[str] = (),
    seed: int | None = None,
    out: str | Path | None = None,
    write: bool = False,
    progress: Progress | None = None,
    allow_plugins: bool = False,
    force: bool = False,
    stage: Stage | None = None,
) -> Results:
    """Run a scenario (object, mapping, file path or built-in name) and return its Results.

    Files are written when ``write`` is true or ``out`` is given (to ``out``, else the
    scenario's ``outputs.dir``); plots when the scenario's ``outputs.plots`` is on. A
    packet-engine run estimated to exceed the resource budget is refused up front
    (:mod:`scenarios.build.limits`) unless ``force``. ``stage`` is told what the run does once the
    engine is done ("writing results", "drawing plots"), for a progress display.
    """
    from podsim.scenarios.execution.collector import run_scope

    sc, doc = _as_scenario(scenario, overrides, seed)
    try:
        with run_scope():  # long-lived objects frozen for the collector (issue 18)
            return _run(sc, out, write, progress, allow_plugins, force, stage)
    except ScenarioError as exc:
        raise (doc.locate(exc) if doc is not None else exc) from None


def _run(
    sc: Scenario,
    out: str | Path | None,
    write: bool,
    progress: Progress | None,
    allow_plugins: bool,
    force: bool = False,
    stage: Stage | None = None,
) -> Results:
    if write or out is not None:
        check_output_dir(output_dir(sc, out), "--out" if out is not None else "outputs.dir")
    prep = preflight(sc, force=force, allow_plugins=allow_plugins)
    seen: dict[str, int | None] = {"events": None}
    engine = ENGINES.get(sc.engine)
    ctx = RunContext(
        scenario=sc,
        cluster=prep.cluster,
        trace=prep.trace,
        compute=prep.compute,
        graph=prep.graph,
        progress=_counting(progress, seen),
        allow_plugins=allow_plugins,
    )
    log.info("running the %s engine", sc.engine)
    t0 = time.perf_counter()
    try:
        eo = engine(ctx)
    except ValueError as exc:
        # a user CC plug-in that set NaN/negative rates or raised (podsim.nic.congestion's guard)
        from podsim.nic.congestion.api import CongestionControlError

        if not isinstance(exc, CongestionControlError):
            raise
        raise ScenarioError(
            f"the congestion-control plug-in stopped the run: {exc}", path="cluster.nic.cc.name"
        ) from None
    wall = time.perf_counter() - t0
    log.info("engine done: %s, %.6g s simulated in %.2f s", eo.status, eo.sim_time_s, wall)
    if eo.events is None:
        eo.events = seen["events"]
    res = _assemble(sc, prep, eo, wall)
    if sc.workload.serving is not None:
        # per-request TTFT/TPOT from the serving graph's spans (the layer analyses and the
        # all-to-all bound do not apply to requests)
        _serving_results(res, prep)
    else:
        res.summary = _with_bound(res.summary, ctx)
    if len(res.phases) and sc.workload.serving is None:
        # stragglers, critical ranks/links, GPU idle and bubbles (issue 9): summary + tables
        from podsim.scenarios.results.analysis import analyse

        # against the compute modelled before straggler faults: a straggler is slow for its load
        an = analyse(res, prep.cluster, expected=prep.compute_model)
        res.summary["analysis"] = an.summary()
        res.analysis = an.tables()
    res.cost, res.bom = price(sc, prep.cluster.graph, res)
    if write or out is not None:
        write_outputs(res, sc, output_dir(sc, out), graph=prep.cluster.graph, stage=stage)
        log.info("results written to %s", output_dir(sc, out))
    return res


def _serving_results(res: Results, prep: Prepared) -> None:
    """The ``requests`` table and the ``serving`` summary (podsim.workloads.serving.metrics)."""
    from podsim.workloads.serving.metrics import requests_table, serving_summary

    table = requests_table(res.phases)
    res.analysis["requests"] = table
    makespan = float(res.summary.get("makespan_s") or 0.0)
    res.summary["serving"] = serving_summary(table, prep.cluster.num_ranks, makespan)


def preflight(sc: Scenario, *, force: bool = False, allow_plugins: bool = False) -> Prepared:
    """Every check of the input that :func:`run` makes before its engine starts, and nothing
    it makes after: ``podsim validate`` calls this too, so a scenario that validates is never
    refused by ``run`` or ``trace`` for its input. In order: plug-ins allowed, the cost
    catalog, the cluster size (before building it), the cluster and the workload trace (every
    workload parameter the ``workloads`` kernels reject), the packet engine's size estimate,
    the congestion-control and path-selector parameters, and what the chosen engine cannot
    model or could never finish (faults, storage reads)."""
    check_plugins(sc, allow_plugins)
    _check_cost(sc)
    prep = prepare(sc, force=force)
    engine = ENGINES.get(sc.engine)
    if engine.check_size is not None:
        engine.check_size(sc, prep.cluster, prep.trace, prep.compute, force=force)
    _check_nic_params(sc, allow_plugins)
    _check_link_layer(sc)
    _check_cost_lengths(sc, prep)
    _check_engine(sc, prep)
    if not force:
        _check_pfc_headroom(sc, prep)
    return prep


def _check_cost_lengths(sc: Scenario, prep: Prepared) -> None:
    """``cost.lengths`` names link tiers: a tier no link of this cluster has (nor a default
    one) is a typo that would silently price nothing."""
    from podsim.scenarios.cost.spec import DEFAULT_LENGTHS_M

    if sc.cost is None:
        return
    tiers = {str(d.get("tier", "")) for _, _, d in prep.cluster.graph.edges(data=True)}
    known = sorted((tiers | set(DEFAULT_LENGTHS_M)) - {""})
    for tier in sc.cost.lengths:
        if tier not in known:
            close = difflib.get_close_matches(tier, known, n=2, cutoff=0.5)
            hint = f" Did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
            raise ScenarioError(
                f"no link of this cluster has tier {tier!r}.{hint} Tiers: {', '.join(known)}.",
                path=f"cost.lengths.{tier}",
            )


def _check_pfc_headroom(sc: Scenario, prep: Prepared) -> None:
    """With PFC on, a switch is lossless only if every ingress link can fill to ``xoff`` and
    then take what is still in flight while its PAUSE travels, all at once, within the shared
    buffer (podsim.fabric.switch: with PFC the dynamic threshold never drops, only a full buffer
    does). Headroom per ingress: one round trip of the link (propagation and FEC both ways) at
    its rate plus two frames, the switch model's sizing rule. With traffic classes every
    lossless class of an ingress may hold ``xoff`` (PFC counts and pauses per class), while the
    in-flight headroom stays one link's worth (the link carries its line rate whatever the
    class). A configuration that breaks it is refused (``--force`` runs it anyway, to study the
    drops)."""
    from podsim.fabric.packet import link_framing
    from podsim.fabric.phy import PROPAGATION_S_PER_M, get_phy
    from podsim.fabric.topology import SCALEOUT_SWITCH_ROLES
    from podsim.fabric.units import fmt_size
    from podsim.scenarios.build.classes import fabric_classes
    from podsim.scenarios.build.cluster import switch_config

    sw = sc.cluster.switch
    classes = fabric_classes(sc)
    lossless = (
        (1 if sw.pfc.enabled else 0) if classes is None else sum(c.pfc for c in classes.classes)
    )
    if not ENGINES.get(sc.engine).per_packet or not lossless:
        return
    device = switch_config(sc)
    g = prep.cluster.graph
    frame = max(sc.cluster.nic.mtu, sc.sim.cell or 0) + link_framing(sc.cluster.nic.link_layer)[0]
    # (need, switch, links, headroom, buffer)
    worst: tuple[float, str, int, float, int] | None = None
    for node, role in g.nodes(data="role"):
        if role not in SCALEOUT_SWITCH_ROLES:  # scale-up switches are not packet-level
            continue
        links = 0
        headroom = 0.0
        for _, _, d in g.edges(node, data=True):
            if d.get("kind", "scaleout") != "scaleout":
                continue
            length = float(d.get("length_m", 0.0))
            if d.get("phy"):
                rtt = get_phy(d["phy"]).link_rtt_s(length)
            else:  # no PHY on the edge: propagation only
                rtt = 2.0 * length * PROPAGATION_S_PER_M
            headroom += float(d["rate_bps"]) / 8.0 * rtt + 2 * frame
            links += 1
        need = links * lossless * sw.pfc.xoff + headroom
        buffer = device.buffer_for(g.degree(node))
        if need > buffer and (worst is None or need > worst[0]):
            worst = (need, node, links, headroom, buffer)
    if worst is None:
        return
    need, node, links, headroom, buffer = worst
    max_xoff = int((buffer - headroom) // (links * lossless))
    # whole KiB (rounded down) so that the suggestion can be pasted back as it is
    paste = f"{max_xoff // 1024}KiB" if max_xoff >= 1024 else f"{max_xoff}B"
    fix = (
        f"set cluster.switch.pfc.xoff to at most {paste} (and xon below it) or "
        if max_xoff > 0
        else ""
    )
    per_class = f" in each of {lossless} lossless traffic classes" if classes is not None else ""
    raise ScenarioError(
        f"PFC cannot keep switch {node!r} lossless: its {links} ingress links may each hold "
        f"xoff ({fmt_size(sw.pfc.xoff)}){per_class} and then what is in flight while the PAUSE "
        "travels "
        f"({fmt_size(headroom / links)} on average: one link round trip plus two frames), "
        f"{fmt_size(need)} in all, more than its {fmt_size(buffer)} buffer, so it can drop "
        f"packets. {fix[:1].upper() + fix[1:] if fix else 'Set '}cluster.switch.buffer to at "
        f"least {-(-int(need) // 2**20)}MiB (--force runs it anyway, to study the drops).",
        path="cluster.switch.pfc.xoff",
    )


def _check_link_layer(sc: Scenario) -> None:
    """The NIC's link layer and the switches' flow control belong together: InfiniBand runs
    credit-based link flow control (``cluster.switch.credit_buffer``) and no PFC; Ethernet has
    no credits."""
    nic, sw = sc.cluster.nic, sc.cluster.switch
    credits = sw.credit_buffer is not None
    if nic.link_layer == "infiniband" and not credits:
        raise ScenarioError(
            "an InfiniBand NIC (cluster.nic.link_layer: infiniband) needs an InfiniBand fabric: "
            "set cluster.switch.credit_buffer (the input buffer each switch port grants as "
            "credits, e.g. 256KiB)",
            path="cluster.switch.credit_buffer",
        )
    if nic.link_layer == "infiniband" and sw.pfc.enabled:
        raise ScenarioError(
            "PFC is Ethernet's flow control; an InfiniBand fabric (cluster.nic.link_layer: "
            "infiniband) uses credits instead: set cluster.switch.pfc.enabled to false",
            path="cluster.switch.pfc.enabled",
        )
    if nic.link_layer == "ethernet" and credits:
        raise ScenarioError(
            "credit_buffer is InfiniBand's link flow control, but the NIC is Ethernet "
            "(cluster.nic.link_layer: ethernet); use an InfiniBand NIC (cluster.nic.model: "
            "cx7-ib, or link_layer: infiniband) or remove cluster.switch.credit_buffer",
            path="cluster.switch.credit_buffer",
        )


def _check_nic_params(sc: Scenario, allow_plugins: bool = False) -> None:
    """Congestion control and path selectors accept only their own parameters."""
    import random

    from podsim.scenarios.build.cluster import at

    nic = sc.cluster.nic
    # plug-ins reach here only when allowed (check_plugins ran first): their parameters are
    # checked like the built-ins'
    from podsim.nic.congestion.registry import make_cc
    from podsim.nic.transport.selectors import make_selector

    with at("cluster.nic.cc.params"):
        make_cc(nic.cc.name, dict(nic.cc.params), allow_plugins=allow_plugins)
    with at("cluster.nic.multipath.params"):
        make_selector(
            nic.multipath.selector, nic.multipath.paths, random.Random(0), 1,
            dict(nic.multipath.params), allow_plugins=allow_plugins,
        )  # fmt: skip


def _check_engine(sc: Scenario, prep: Prepared) -> None:
    """What the chosen engine refuses before it starts: what it does not model (faults, storage
    reads; :meth:`Engine.refuse_unmodelled`) and its own input checks (fault targets the cluster
    lacks, runs that could never end; ``Engine.preflight``)."""
    engine = ENGINES.get(sc.engine)
    engine.refuse_unmodelled(sc)
    if engine.preflight is not None:
        engine.preflight(sc, prep.cluster, prep.trace)


def _check_cost(sc: Scenario) -> None:
    from podsim.scenarios.cost.scenario import check_catalog

    try:
        check_catalog(sc)
    except ValueError as exc:
        raise ScenarioError(str(exc), path="cost") from None


def price(sc: Scenario, graph: Any, res: Results) -> tuple[dict[str, Any], pd.DataFrame | None]:
    """The cost document and BOM of the run's cluster (:mod:`podsim.scenarios.cost.scenario`), with
    the efficiency figures of ``res``. A cluster the catalog cannot price (e.g. a switch radix
    no catalog box has) does not fail the run: the document then says why it has no cost."""
    from podsim.scenarios.cost.scenario import cost_report

    try:
        return cost_report(sc, graph=graph, performance=res.performance())
    except ValueError as exc:
        return {"error": str(exc)}, None


def write_outputs(
    res: Results, sc: Scenario, out: Path, graph: Any = None, stage: Stage | None = None
) -> list[Path]:
    """Tables, summary, cost (``bom.csv``, ``cost.json``), resolved scenario, the Perfetto
    timeline (``timeline.json``), plots (and the report when asked) under ``out``; ``stage``
    hears which of them is being written.

    Everything is written into a staging folder that replaces ``out`` only once complete
    (:func:`podsim.scenarios.results.folder.staged_folder`): an interrupted or killed write
    leaves the earlier results whole. Returns the final paths."""
    tell = stage or (lambda _what: None)
    tell("writing results")
    final = Path(os.path.abspath(out))
    with staged_folder(final) as tmp:
        written = res.write(tmp, sc.outputs.formats)
        write_graphml = topology_io("write_graphml")
        if graph is not None and write_graphml is not None:
            p = tmp / "topology.graphml"
            write_graphml(graph, str(p))
            written.append(p)
        if sc.outputs.timeline:
            from podsim.scenarios.results.trace_events import write_trace_events

            tell("writing the timeline")
            written.append(write_trace_events(res, tmp / "timeline.json"))
        if sc.outputs.plots:
            from podsim.scenarios.report.plots import keep_topology, plot_all

            tell("drawing plots")
            # an earlier run's topology drawing, kept if this run's graph is the same
            keep_topology(final / "plots", tmp / "plots", sc.outputs.plot_formats)
            written += plot_all(
                res,
                tmp / "plots",
                formats=sc.outputs.plot_formats,
                graph=graph,
                hottest=sc.outputs.hottest_ports,
            )
        if sc.outputs.report:
            from podsim.scenarios.report.html import write_report

            tell("writing the report")
            written.append(write_report(tmp))
        names = sorted({str(p.relative_to(tmp)) for p in written if tmp in p.parents})
        (tmp / MANIFEST).write_text("".join(f"{n}\n" for n in names))
    res.out_dir = final
    return [final / n for n in names]
