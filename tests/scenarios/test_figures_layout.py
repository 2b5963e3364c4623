"""Figures and tables read well: the BOM on 80 columns, study-plot ticks and labels, legends
that do not cover the data."""

from __future__ import annotations

from pathlib import Path


def test_bom_on_80_columns_keeps_every_figure_and_detail() -> None:
    from podsim.scenarios.cost.scenario import cost_of_scenario
    from podsim.scenarios.cost.tables import bom_table
    from rich.console import Console

    cost = cost_of_scenario("superpod-moe", [])
    console = Console(width=80, record=True, force_terminal=False)
    console.print(bom_table(cost))
    text = console.export_text()
    assert "…" not in text, text
    flat = " ".join(text.replace("│", " ").split())
    for ln in cost.lines:
        assert f"{ln.power_w:,.0f} W" in flat and f"${ln.capex_usd:,.0f}" in flat
    # the detail that explains a $0 line is shown, not squeezed to nothing
    assert "priced in the NIC" in flat


def test_pareto_capex_ticks_are_distinct_and_labels_stay_inside() -> None:
    import pandas as pd
    from podsim.scenarios.study.plots import fig_pareto

    # fabric-what-if: two layouts $4,400 apart on a $1.58M cluster, three swept keys
    df = pd.DataFrame(
        {
            "point": range(4),
            "param:cluster.layout": ["external-switch", "on-card-switch"] * 2,
            "param:cluster.nic.cc.name": ["dcqcn", "dcqcn", "nscc", "nscc"],
            "param:cluster.nic.multipath.paths": [1, 1, 4, 4],
            "capex_usd": [1_581_600.0, 1_577_200.0, 1_581_600.0, 1_577_200.0],
            "layer_time_s": [1.68e-3, 1.68e-3, 0.80e-3, 0.80e-3],
        }
    )
    fig = fig_pareto(df, "layer_time_s", "capex_usd")
    ax = fig.axes[0]
    ticks = [1_577_500.0, 1_578_000.0, 1_578_500.0, 1_579_000.0, 1_579_500.0]
    ax.set_xticks(ticks)  # the spacing matplotlib chose for the 12-point study
    fig.canvas.draw()
    labels = [t.get_text() for t in ax.get_xticklabels()]
    assert len(set(labels)) == len(ticks), labels  # was $1.578M, $1.578M, $1.579M, ...
    # every point label lies inside the figure (the right-hand ones were cut off)
    box = fig.get_window_extent()
    for text in ax.texts:
        ext = text.get_window_extent()
        assert ext.x0 >= box.x0 - 1 and ext.x1 <= box.x1 + 1, text.get_text()


def test_pareto_labels_of_coincident_points_do_not_overlap() -> None:
    import pandas as pd
    from podsim.scenarios.study.plots import fig_pareto

    # four variants at the same cost and time (a swept key with no effect), one apart
    df = pd.DataFrame(
        {
            "point": range(5),
            "param:cluster.nic.cc.name": ["dcqcn", "hpcc", "nscc", "swift", "timely"],
            "capex_usd": [1e6, 1e6, 1e6, 1e6, 2e6],
            "layer_time_s": [1e-3, 1e-3, 1e-3, 1e-3, 0.5e-3],
        }
    )
    fig = fig_pareto(df, "layer_time_s", "capex_usd")
    fig.canvas.draw()
    boxes = [t.get_window_extent() for t in fig.axes[0].texts]
    assert len(boxes) == 5
    for i, a in enumerate(boxes):
        for b in boxes[i + 1 :]:
            assert not a.overlaps(b), (a, b)


def test_legends_do_not_cover_the_bars_and_phases_run_in_order(quickstart_dir: Path) -> None:
    from podsim.scenarios.report.plots import fig_gpu_bandwidth, fig_layer_timeline
    from podsim.scenarios.results.tables import Results

    res = Results.read(quickstart_dir)
    for make in (fig_gpu_bandwidth, fig_layer_timeline):
        fig = make(res)
        fig.canvas.draw()
        ax = fig.axes[0]
        legend = ax.get_legend().get_window_extent()
        # the legend sat in a corner of the axes, over the last ranks' bars
        assert legend.x0 >= ax.get_window_extent().x1, make.__name__
        assert legend.x1 <= fig.get_window_extent().x1 + 1, make.__name__
    texts = [t.get_text() for t in fig_gpu_bandwidth(res).axes[0].get_legend().get_texts()]
    assert texts == ["dispatch", "combine"]


def test_queue_figure_shows_contention_not_ties_of_single_packets() -> None:
    """Issue 19: "hottest ports" were ties of one 86-byte ACK picked alphabetically; now only
    ports whose queue held more than two MTUs count, ranked by queued byte-seconds."""
    import pandas as pd
    from podsim.scenarios.report.plots import contended_ports, fig_queue_depth
    from podsim.scenarios.results.tables import Results

    rows = []
    for i in range(12):  # twelve NIC ports that only ever held one ACK
        rows += [(f"nic{i}", 0.0, 86), (f"nic{i}", 1e-6, 0)]
    # a brief tall spike and a long moderate queue, both above 2 x 4 KiB
    rows += [("leaf0:p1", 0.0, 0), ("leaf0:p1", 1e-6, 64 * 1024), ("leaf0:p1", 2e-6, 0)]
    rows += [("spine0:p3", 0.0, 16 * 1024), ("spine0:p3", 50e-6, 0)]
    q = pd.DataFrame(rows, columns=["port", "time_s", "depth_bytes"])
    res = Results.__new__(Results)
    res.queues = q
    res.scenario = {"cluster": {"nic": {"mtu": "4KiB"}}}
    res.summary = {"scenario": "t"}
    ports, threshold = contended_ports(res)
    assert threshold == 8192
    assert ports == ["spine0:p3", "leaf0:p1"]  # 0.8 KiB-s of queue beats a 64 KiB blip
    only_acks = Results.__new__(Results)
    only_acks.queues = q[q["port"].str.startswith("nic")]
    only_acks.scenario, only_acks.summary = res.scenario, res.summary
    fig = fig_queue_depth(only_acks)  # says there is no contention, draws no ACK ties
    assert fig is not None and not fig.axes[0].lines
    assert "no contention" in fig.axes[0].texts[0].get_text()
