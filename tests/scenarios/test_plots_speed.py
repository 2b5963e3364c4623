"""The plot speed-ups keep what the figures show: thinned lines keep the CDF's ends and every
queue peak, the topology is drawn once for all formats and not again while unchanged, SVG text
stays text."""

from __future__ import annotations

from pathlib import Path

import networkx as nx
import numpy as np
import pytest
from podsim.scenarios.report import plots
from podsim.scenarios.report.plots import MAX_POINTS, _thin_cdf, _thin_series, graph_key


def test_thin_cdf_keeps_the_ends_and_the_shape() -> None:
    x = np.sort(np.random.default_rng(1).exponential(size=50_000))
    tx, ty = _thin_cdf(x)
    assert len(tx) <= MAX_POINTS
    assert tx[0] == x[0] and tx[-1] == x[-1] and ty[-1] == 1.0
    # every kept point lies exactly on the empirical CDF: F(x_i) = (i + 1) / n
    idx = np.searchsorted(x, tx, side="right")
    np.testing.assert_allclose(ty, idx / len(x))
    small = np.sort(np.arange(10.0))
    assert len(_thin_cdf(small)[0]) == 10


def test_thin_series_keeps_every_peak() -> None:
    t = np.arange(100_000) * 1e-6
    y = np.zeros(len(t), dtype=np.int64)
    peaks = [17, 31_337, 99_999]
    y[peaks] = [5, 9, 7]
    tt, yy = _thin_series(t, y)
    assert len(tt) <= MAX_POINTS and tt[0] == t[0]
    assert yy.max() == 9 and sorted(yy[yy > 0].tolist()) == [5, 7, 9]
    assert np.all(np.diff(tt) > 0)


def _graph(n: int) -> nx.Graph:
    g = nx.Graph(name=f"toy{n}")
    for i in range(n):
        g.add_node(f"nic{i}.p0", role="nic", server=i, gpu=i, plane=0, pod=0, nic=i)
        g.add_edge(f"nic{i}.p0", "leaf0", rate_bps=400e9, kind="scaleout", tier="nic-leaf")
    g.nodes["leaf0"].update(role="leaf", tier=1, plane=0, pod=-1, radix=n)
    return g


@pytest.fixture
def topology_draws(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The paths of every topology drawing made while the test runs (one list per drawing)."""
    import podsim.fabric.topology_io as tio

    calls: list[list[str]] = []
    real = tio.draw_topology

    def counting(g: nx.Graph, paths: list[str], **kw: object) -> None:
        calls.append(list(paths))
        real(g, paths, **kw)

    monkeypatch.setattr(tio, "draw_topology", counting)
    return calls


def test_topology_is_drawn_once_and_not_again_while_unchanged(
    tmp_path: Path, topology_draws: list[list[str]]
) -> None:
    calls = topology_draws
    g = _graph(4)
    first = plots._draw_topology(g, tmp_path, ("png", "svg"), 80)
    assert len(calls) == 1 and len(calls[0]) == 2  # one drawing, saved in both formats
    assert all(p.is_file() and p.stat().st_size > 1000 for p in first)
    plots._draw_topology(g, tmp_path, ("png", "svg"), 80)
    assert len(calls) == 1  # same graph, files there: nothing drawn
    plots._draw_topology(_graph(5), tmp_path, ("png", "svg"), 80)
    assert len(calls) == 2  # another graph: drawn again
    (tmp_path / "topology.svg").unlink()
    plots._draw_topology(_graph(5), tmp_path, ("png", "svg"), 80)
    assert len(calls) == 3  # a file missing: drawn again
    assert graph_key(_graph(5)) == graph_key(_graph(5)) != graph_key(_graph(4))


def test_svg_text_is_text(quickstart_dir: Path) -> None:
    svg = (quickstart_dir / "plots" / "fct_cdf.svg").read_text()
    assert "<text" in svg and "Message completion time CDF" in svg


def test_png_at_a_faster_zlib_level_keeps_the_pixels(tmp_path: Path) -> None:
    """save_figure's PNG (zlib level PNG_COMPRESS_LEVEL) decodes to the pixels of matplotlib's
    own PNG of the same figure, at the dpi asked; the topology drawn on its own Figure (no
    pyplot) saves through it too."""
    import podsim.fabric.topology_io as tio
    from matplotlib.figure import Figure
    from PIL import Image
    from podsim.scenarios.report.style import PNG_COMPRESS_LEVEL, save_figure

    fig = Figure(figsize=(4, 3))
    ax = fig.add_subplot()
    ax.plot(np.arange(50), np.sin(np.arange(50) / 5.0), label="sin")
    ax.set_title("a title\nsecond line")
    ax.legend()
    fig.savefig(tmp_path / "default.png", dpi=90)
    save_figure(fig, tmp_path / "fast.png", 90)
    a = np.asarray(Image.open(tmp_path / "default.png"))
    b = np.asarray(Image.open(tmp_path / "fast.png"))
    assert a.shape == b.shape == (270, 360, 4)
    assert np.array_equal(a, b)
    assert PNG_COMPRESS_LEVEL != 6  # (zlib's default: the bytes would not differ)
    assert (tmp_path / "default.png").read_bytes() != (tmp_path / "fast.png").read_bytes()
    # each file's zlib stream says its level (the FLEVEL bits of its header: 1 for levels 2-5,
    # 2 for zlib's default 6)
    for name, flevel in (("default.png", 2), ("fast.png", 1)):
        data = (tmp_path / name).read_bytes()
        idat = data.index(b"IDAT") + 4
        assert data[idat + 1] >> 6 == flevel

    saved: list[str] = []

    def save(f: object, path: str, dpi: float) -> None:
        saved.append(path)
        save_figure(f, path, dpi)  # type: ignore[arg-type]

    paths = [str(tmp_path / "t.png"), str(tmp_path / "t.svg")]
    tio.draw_topology(_graph(4), paths, dpi=80, save=save)
    assert saved == paths and all(Path(p).stat().st_size > 1000 for p in paths)


def test_a_run_into_its_earlier_folder_keeps_the_topology_drawing(
    tmp_path: Path, topology_draws: list[list[str]]
) -> None:
    """A run writes a fresh staging folder: it starts from the earlier result's topology
    drawing (keep_topology) and draws none while the graph is the same; another graph is
    drawn anew over the copied files."""
    from podsim.scenarios.runner import run

    calls = topology_draws
    out = tmp_path / "out"
    sets = ["workload.synthetic.size=64KiB", "outputs.timeline=false"]
    run("spray-vs-ecmp", overrides=sets, out=out)
    first = (out / "plots" / "topology.png").read_bytes()
    assert len(calls) == 1
    run("spray-vs-ecmp", overrides=sets, out=out)
    assert len(calls) == 1  # the same graph: the earlier drawing kept
    assert (out / "plots" / "topology.png").read_bytes() == first
    assert "plots/topology.svg" in (out / ".podsim-files").read_text().split()

    # unit level: an earlier drawing of another graph is replaced, not kept
    earlier, new = tmp_path / "earlier", tmp_path / "new"
    earlier.mkdir()
    plots._draw_topology(_graph(4), earlier, ("png", "svg"), 80)
    plots.keep_topology(earlier, new, ("png", "svg"))
    assert (new / "topology.png").read_bytes() == (earlier / "topology.png").read_bytes()
    plots._draw_topology(_graph(5), new, ("png", "svg"), 80)
    assert len(calls) == 3
    assert (new / "topology.png").read_bytes() != (earlier / "topology.png").read_bytes()
    # a format the earlier folder lacks: nothing copied
    plots.keep_topology(earlier, tmp_path / "none", ("png", "pdf"))
    assert not (tmp_path / "none").exists()
