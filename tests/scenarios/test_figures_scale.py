"""Figures scale to SuperPoD size (issue 19): every figure of a 16-rank and a 2,048-rank flow
run fits the slide canvas, has no text below the stated minimum, and the large run's per-rank
figures show the extremes and say what they leave out. The topology figure draws one node's
PCIe tree with the on-card switch."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from matplotlib.figure import Figure
from podsim.scenarios.report import plots
from podsim.scenarios.report.style import (
    MAX_HEIGHT_PX,
    MAX_WIDTH_PX,
    MIN_FONT_PT,
    TOP_K,
    extremes,
    small_texts,
)
from podsim.scenarios.results.tables import Results

from .conftest import SMALL

#: 16 superpod-128 pods of 128 GPUs: 2,048 ranks, one 64 KiB permutation on the flow engine
BIG = {
    "name": "figs-2048",
    "seed": 1,
    "engine": "flow",
    "cluster": {
        "preset": "superpod-128",
        "params": {"pods": 16},
        "layout": "on-card-switch",
        "nic": {"model": "smartnic-400g", "mtu": "4KiB"},
    },
    "workload": {"synthetic": {"pattern": "permutation", "size": "64KiB", "compute_time": "1us"}},
    "outputs": {"plots": False},
}


def _run(args: list[str]) -> None:
    from podsim.scenarios.cli.app import app
    from typer.testing import CliRunner

    result = CliRunner().invoke(app, ["run", *args])
    assert result.exit_code == 0, result.output


@pytest.fixture(scope="module")
def small_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """quickstart (16 ranks, external-switch nodes) on the flow engine."""
    out = tmp_path_factory.mktemp("f16") / "out"
    _run(["--out", str(out), *SMALL, "--set", "engine=flow", "--set", "outputs.plots=false"])
    return out


@pytest.fixture(scope="module")
def big_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("f2048")
    (d / "big.yaml").write_text(yaml.safe_dump(BIG))
    _run([str(d / "big.yaml"), "--out", str(d / "out")])
    return d / "out"


def _with_queues(res: Results, ports: int, contended: int) -> Results:
    """The flow engine samples no queues: add ``ports`` NIC ports of which ``contended`` held
    a growing queue (so the queue figure is drawn at scale too)."""
    rows = []
    for i in range(ports):
        depth = 4096 * (3 + i) if i < contended else 86
        rows += [(0.0, f"nic{i}.p0", 0), (1e-6, f"nic{i}.p0", depth), (2e-6, f"nic{i}.p0", 0)]
    res.queues = pd.DataFrame(rows, columns=["time_s", "port", "depth_bytes"])
    return res


def _render_all(res: Results, out: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Figure]:
    """plot_all with every saved figure checked for small text (tick labels exist once saved)."""
    from podsim.scenarios.build.cluster import read_graph

    seen: dict[str, Figure] = {}
    real = Figure.savefig

    def checking(fig: Figure, fname: object, *a: object, **kw: object) -> None:
        real(fig, fname, *a, **kw)
        seen[Path(str(fname)).stem] = fig
        tiny = small_texts(fig, MIN_FONT_PT)
        assert not tiny, f"{fname}: text below {MIN_FONT_PT} pt: {tiny[:5]}"

    monkeypatch.setattr(Figure, "savefig", checking)
    written = plots.plot_all(res, out, formats=("png",), graph=read_graph(res.out_dir))
    from PIL import Image

    names = {p.stem for p in written}
    assert names >= {"fct_cdf", "link_utilisation", "link_phases", "queue_depth",
                     "gpu_bandwidth", "layer_timeline", "gpu_idle", "topology"}, names  # fmt: skip
    for p in written:
        w, h = Image.open(p).size
        assert w <= MAX_WIDTH_PX and h <= MAX_HEIGHT_PX, (p.name, w, h)
    assert set(seen) == names
    return seen


def test_every_figure_of_a_16_rank_run_fits_and_is_readable(
    small_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    res = _with_queues(Results.read(small_run), 16, 3)
    res.out_dir = small_run
    figs = _render_all(res, tmp_path, monkeypatch)
    # 16 ranks: one bar group per rank, nothing omitted
    ax = figs["gpu_bandwidth"].axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == [str(r) for r in range(16)]
    assert "showing" not in ax.get_title()


def test_every_figure_of_a_2048_rank_run_fits_and_says_what_it_omits(
    big_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    res = _with_queues(Results.read(big_run), 2048, 40)
    res.out_dir = big_run
    assert res.summary["ranks"] == 2048
    figs = _render_all(res, tmp_path, monkeypatch)

    # bandwidth: the bars are exactly the 8 slowest and 8 fastest ranks by mean over phases
    bw = res.gpu_bandwidth().dropna().groupby("rank")["bw_Bps"].mean().sort_index()
    low, high = extremes(bw.to_numpy(), TOP_K)
    want = [str(r) for r in bw.index[np.r_[low, high[::-1]]]]
    fig = figs["gpu_bandwidth"]
    bars = fig.axes[1]
    assert [t.get_text() for t in bars.get_xticklabels()] == want
    assert bw.loc[int(want[0])] == bw.min() and bw.loc[int(want[-1])] == bw.max()
    assert "showing 16 of 2,048 ranks" in fig._suptitle.get_text()

    title = figs["layer_timeline"].axes[0].get_title()
    assert "showing 16 of 2,048 ranks" in title.replace("\n", " ")
    assert len(figs["layer_timeline"].axes[0].get_yticklabels()) == 2 * TOP_K
    assert "showing 16 of 2,048 ranks" in figs["gpu_idle"]._suptitle.get_text()
    q = figs["queue_depth"].axes[0]
    assert len(q.lines) == 8 + 1  # eight ports and the threshold line
    assert "showing 8 of 40 contended ports" in q.get_title().replace("\n", " ")
    # per phase: every nic-leaf link direction is a dot, the busiest of each row named
    lp = figs["link_phases"]
    nic = next(a for a in lp.axes if a.get_title().startswith("nic-leaf"))
    assert nic.get_title() == "nic-leaf (4,096 link directions)"
    rows = [t.get_text() for t in nic.get_yticklabels()]
    assert rows[-1] == "whole run" and "other" in rows
    assert sum(len(c.get_offsets()) for c in nic.collections) == 4096 * len(rows)
    # the nic-leaf tier (4,096 links) is a distribution, the title names its hottest port
    tiers = [a.get_title() for a in figs["link_utilisation"].axes]
    assert any(
        t.startswith("nic-leaf: distribution over its 4,096 link directions") for t in tiers
    ), tiers


def test_extremes_picks_both_ends_without_overlap() -> None:
    v = np.array([5.0, 1.0, 9.0, np.nan, 3.0, 7.0])
    low, high = extremes(v, 2)
    assert list(low) == [1, 4] and list(high) == [2, 5]
    low, high = extremes(v, 4)  # 5 finite values: the high end gets what the low end left
    assert list(low) == [1, 4, 0, 5] and list(high) == [2]


def test_topology_draws_the_nodes_pcie_tree_with_the_on_card_switch() -> None:
    from matplotlib.patches import FancyBboxPatch
    from podsim.nic.pcie.layouts import external_switch, on_card_switch, root_complex
    from podsim.scenarios.report.node_figure import draw_node_pcie

    def texts(tree: object) -> tuple[set[str], list[FancyBboxPatch], Figure]:
        fig = Figure(figsize=(10, 4))
        ax = fig.add_subplot()
        draw_node_pcie(ax, tree, "x")
        fig.savefig(Path("/dev/null"), format="png")
        cards = [p for p in ax.patches if p.get_linestyle() == "--"]
        return {t.get_text() for t in ax.texts}, cards, fig

    names, cards, fig = texts(on_card_switch(gpus=8, nics=4, ssds=4))
    assert {"CPU0", "sw0", "sw3", "NIC0", "GPU7", "SSD3", "x32 Gen5"} <= names
    assert len(cards) == 4  # one dashed NIC card around each on-card switch and its ASIC
    assert not small_texts(fig)
    names, cards, _ = texts(external_switch(gpus=8))
    assert "sw0" in names and not cards  # switch boards, not on the card
    names, cards, _ = texts(root_complex(gpus=8))
    assert not any(n.startswith("sw") for n in names) and not cards
    names, _, _ = texts(None)
    assert any("cluster.layout unset" in n for n in names)


def test_node_tree_is_the_tree_the_run_built(big_run: Path) -> None:
    from podsim.scenarios.build.cluster import read_graph
    from podsim.scenarios.report.node_figure import node_tree

    res = Results.read(big_run)
    tree = node_tree(read_graph(big_run), res.scenario)
    # superpod-128: 8 GPUs per tray, one SmartNIC per two GPUs, each with its card switch
    assert (len(tree.gpus), len(tree.nics), len(tree.devices("switch"))) == (8, 4, 4)
    assert all(tree.graph.nodes[s]["on_card"] for s in tree.devices("switch"))
    assert node_tree(read_graph(big_run), {"cluster": {}}) is None


def _study_table(points: int) -> pd.DataFrame:
    """A study table as the sweep writes it: swept keys, a metric and capex by category."""
    rng = np.random.default_rng(7)
    i = np.arange(points)
    return pd.DataFrame(
        {
            "point": i,
            "param:cluster.layout": np.where(i % 2, "on-card-switch", "external-switch"),
            "param:cluster.nic.multipath.paths": 1 + i % 8,
            "param:cluster.params.pods": 1 + i // 16,
            "layer_time_s": rng.uniform(0.5e-3, 2e-3, points),
            "capex_usd": 1e6 + 1e4 * i,
            "capex.nic": 4e5 + 1e4 * i,
            "capex.switch": np.full(points, 6e5),
        }
    )


@pytest.mark.parametrize("points", [4, 100])
def test_study_figures_fit_and_say_what_they_omit(
    points: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from PIL import Image
    from podsim.scenarios.study.plots import save_study_figures

    seen: dict[str, Figure] = {}
    real = Figure.savefig

    def checking(fig: Figure, fname: object, *a: object, **kw: object) -> None:
        real(fig, fname, *a, **kw)
        seen[Path(str(fname)).stem] = fig
        assert not small_texts(fig), (fname, small_texts(fig)[:5])

    monkeypatch.setattr(Figure, "savefig", checking)
    df = _study_table(points)
    written = save_study_figures(df, tmp_path, "layer_time_s", name="toy", formats=("png",))
    assert {p.stem for p in written} == {"pareto", "cost_breakdown", "tornado"}
    for p in written:
        w, h = Image.open(p).size
        assert w <= MAX_WIDTH_PX and h <= MAX_HEIGHT_PX, (p.name, w, h)
    ax = seen["cost_breakdown"].axes[0]
    shown = [t.get_text() for t in ax.get_yticklabels()]
    if points == 4:
        assert len(shown) == 4 and "showing" not in ax.get_title()
        return
    # capex grows with the point: the cheapest are points 0-7, the costliest 99 down to 92
    from podsim.scenarios.study.plots import variant_labels

    labels = variant_labels(df)
    assert shown == [labels[i] for i in [*range(8), *range(92, 100)]]
    assert "showing 16 of 100 variants" in ax.get_title()
    assert "labels on the" in seen["pareto"].axes[0].get_title()


def test_queue_figure_of_many_ports_keeps_each_line_distinct() -> None:
    """outputs.hottest_ports may ask for 24: two legend columns, no repeated colour and style."""
    rows = []
    for i in range(40):
        port = f"leaf{i}:p1"
        rows += [(0.0, port, 0), (1e-6, port, 4096 * (3 + i)), (2e-6, port, 0)]
    res = Results.__new__(Results)
    res.queues = pd.DataFrame(rows, columns=["time_s", "port", "depth_bytes"])
    res.scenario, res.summary = {}, {"scenario": "t"}
    fig = plots.fig_queue_depth(res, 24)
    fig.savefig(Path("/dev/null"), format="png", dpi=100)
    assert not small_texts(fig)
    lines = fig.axes[0].lines[:-1]  # the last is the threshold
    assert len(lines) == 24
    looks = {(ln.get_color(), ln.get_linestyle()) for ln in lines}
    assert len(looks) == 24
    legend = fig.axes[0].get_legend().get_window_extent()
    assert legend.x1 <= fig.get_window_extent().x1 + 1


def test_large_heatmaps_average_blocks_of_cells_not_smear_them() -> None:
    """A matrix taller than the axes has pixels is averaged in blocks of rows (NaN-aware: an
    absent link stays absent), never interpolated across the gap between two pods."""
    mat = np.full((256, 16), np.nan)
    mat[:128, :8] = 10.0
    mat[128:, 8:] = np.arange(128, dtype=float)[:, None]
    out, fits = plots._fit_matrix(mat, 100, 400)
    assert not fits and out.shape == (86, 16)  # blocks of 3 rows, columns untouched
    assert np.all(out[:42, :8] == 10.0) and np.all(np.isnan(out[:42, 8:]))
    assert out[43, 8] == np.mean([1.0, 2.0, 3.0])  # rows 129-131
    same, fits = plots._fit_matrix(mat, 300, 400)
    assert fits and same is mat
