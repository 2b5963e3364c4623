"""One self-contained HTML report of a result folder, for design reviews.

Everything is inside the file: the figures as base64 PNG, the summary and the hottest links as
tables, and the resolved scenario YAML; it needs no network and no other file. A small inline
script marks the page once every figure has decoded (``data-figures-loaded`` on ``<body>``),
which is what the headless-browser test reads.
"""

from __future__ import annotations

import base64
import html
import math
from pathlib import Path
from typing import Any

import yaml

from fabric.units import fmt_rate, fmt_size, fmt_time
from scenarios.results import Results

__all__ = ["FIGURE_TITLES", "render_report", "write_report"]

FIGURE_TITLES = {
    "layer_timeline": "Layer timeline (dispatch, compute, combine per rank)",
    "fct_cdf": "Message completion-time CDF",
    "gpu_bandwidth": "Per-GPU dispatch/combine bandwidth",
    "link_utilisation": "Link utilisation by tier",
    "queue_depth": "Queue depth of the hottest ports",
    "topology": "Topology",
}

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:2em auto;
max-width:1100px;color:#222;line-height:1.4}
h1{font-size:1.6em;margin-bottom:.2em}h2{border-bottom:1px solid #ccc;padding-bottom:.2em}
table{border-collapse:collapse;margin:.5em 0 1.5em}td,th{border:1px solid #ddd;padding:.25em .6em}
th{background:#f3f3f3;text-align:left}td.n{text-align:right;font-variant-numeric:tabular-nums}
figure{margin:1em 0 2em}figure img{max-width:100%;border:1px solid #eee}
figcaption{color:#555;font-size:.9em}pre{background:#f7f7f7;padding:1em;overflow:auto;
font-size:.85em}.meta{color:#555}
"""

_SCRIPT = """
window.addEventListener('load', function () {
  var imgs = document.querySelectorAll('figure img');
  var ok = 0;
  imgs.forEach(function (im) { if (im.complete && im.naturalWidth > 0) { ok += 1; } });
  document.body.setAttribute('data-figures-loaded', String(ok));
  document.body.setAttribute('data-figures-total', String(imgs.length));
});
"""


def _e(x: Any) -> str:
    return html.escape(str(x), quote=True)


def _num(x: Any, kind: str) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "-"
    if kind == "time":
        return fmt_time(float(x))
    if kind == "GBps":
        return f"{float(x) / 1e9:.2f} GB/s"
    if kind == "pct":
        return f"{100 * float(x):.1f} %"
    if kind == "rate":
        return fmt_rate(float(x))
    if kind == "size":
        return fmt_size(float(x))
    return str(x)


def _table(headers: list[str], rows: list[list[str]], numeric_from: int = 1) -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)
    body = []
    for row in rows:
        cells = "".join(
            f'<td class="n">{_e(c)}</td>' if i >= numeric_from else f"<td>{_e(c)}</td>"
            for i, c in enumerate(row)
        )
        body.append(f"<tr>{cells}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _summary_html(s: dict[str, Any]) -> str:
    rows = []
    for ph, m in (s.get("phases") or {}).items():
        if ph == "compute":
            rows.append(
                [
                    "compute (per rank, mean / max)",
                    f"{_num(m.get('mean_rank_time_s'), 'time')} / "
                    f"{_num(m.get('max_rank_time_s'), 'time')}",
                    *[""] * 6,
                ]
            )
            continue
        rows.append(
            [
                ph,
                _num(m.get("completion_time_s"), "time"),
                _num(m.get("algbw_per_gpu_Bps"), "GBps"),
                _num(m.get("busbw_per_gpu_Bps"), "GBps"),
                _num(m.get("deepep_rdma_bw_per_gpu_Bps"), "GBps"),
                _num(m.get("deepep_nvl_bw_per_gpu_Bps"), "GBps"),
                _num(m.get("bound_s"), "time"),
                _num(m.get("fraction_of_bound"), "pct"),
            ]
        )
    phases = _table(
        [
            "phase",
            "all-to-all completion time",
            "algbw / GPU (NCCL)",
            "busbw / GPU (NCCL)",
            "RDMA bw / GPU (DeepEP)",
            "NVL bw / GPU (DeepEP)",
            "physical lower bound",
            "fraction of the bound",
        ],
        rows,
    )
    util = _table(
        ["tier", "links", "mean utilisation", "max utilisation", "bytes"],
        [
            [
                t,
                str(m["links"]),
                _num(m["mean_utilisation"], "pct"),
                _num(m["max_utilisation"], "pct"),
                _num(m["tx_bytes"], "size"),
            ]
            for t, m in (s.get("link_utilisation") or {}).items()
        ],
    )
    c = s.get("counters") or {}
    counters = _table(
        ["drops", "ECN marks", "PFC pauses", "retransmitted packets", "timeouts"],
        [
            [
                str(c.get(k, 0))
                for k in ("drops", "ecn_marks", "pfc_pauses", "retransmitted_packets", "timeouts")
            ]
        ],
        numeric_from=0,
    )
    msgs = s.get("messages") or {}
    msg = _table(
        ["messages", "unfinished", "bytes", "FCT p50", "FCT p99", "FCT max", "makespan"],
        [
            [
                str(msgs.get("count", 0)),
                str(msgs.get("unfinished", 0)),
                _num(msgs.get("bytes"), "size"),
                _num(msgs.get("fct_p50_s"), "time"),
                _num(msgs.get("fct_p99_s"), "time"),
                _num(msgs.get("fct_max_s"), "time"),
                _num(s.get("makespan_s"), "time"),
            ]
        ],
        numeric_from=0,
    )
    return (
        "<h2>Summary</h2>"
        + phases
        + "<h3>Messages</h3>"
        + msg
        + "<h3>Link utilisation by tier</h3>"
        + util
        + "<h3>Loss and congestion</h3>"
        + counters
        + '<p class="meta">algbw = mean bytes a rank sends / all-to-all time; busbw = algbw x '
        "(n-1)/n (NCCL all-to-all); DeepEP bandwidth = a rank's RDMA (NVLink) bytes / its own "
        "phase time, averaged over ranks. Utilisation is over the whole run.</p>"
    )


def _hot_links(res: Results, n: int = 12) -> str:
    links = res.links
    if links.empty:
        return ""
    top = links.sort_values(["utilisation", "link"], ascending=[False, True]).head(n)
    rows = [
        [
            r.link,
            r.tier,
            _num(r.utilisation, "pct"),
            _num(r.rate_bps, "rate"),
            str(r.drops),
            str(r.ecn_marks),
            str(r.pauses),
            _num(r.max_queue_bytes, "size"),
        ]
        for r in top.itertuples(index=False)
    ]
    return "<h2>Hottest links</h2>" + _table(
        ["link", "tier", "utilisation", "rate", "drops", "ECN marks", "pauses", "max queue"],
        rows,
        numeric_from=2,
    )


def _figures(plots: Path) -> str:
    parts = ["<h2>Figures</h2>"]
    names = list(FIGURE_TITLES) + sorted(
        p.stem for p in plots.glob("*.png") if p.stem not in FIGURE_TITLES
    )
    for name in names:
        png = plots / f"{name}.png"
        if not png.is_file():
            continue
        data = base64.b64encode(png.read_bytes()).decode("ascii")
        title = FIGURE_TITLES.get(name, name.replace("_", " "))
        parts.append(
            f'<figure id="fig-{_e(name)}"><img alt="{_e(title)}" '
            f'src="data:image/png;base64,{data}"><figcaption>{_e(title)}</figcaption></figure>'
        )
    return "".join(parts)


def render_report(directory: str | Path) -> str:
    """The HTML text of the report of result folder ``directory`` (plots drawn if missing)."""
    d = Path(directory)
    res = Results.read(d)
    plots = d / "plots"
    if not any(plots.glob("*.png")):
        from scenarios.build import read_graph
        from scenarios.plots import plot_all

        plot_all(res, plots, formats=("png",), graph=read_graph(d))
    s = res.summary
    title = f"podsim report: {s.get('scenario', d.name)}"
    if s.get("variant"):
        title += f" [{s['variant']}]"
    meta = (
        f"engine {s.get('engine')} - seed {s.get('seed')} - status {s.get('status')} - "
        f"topology {s.get('topology')} - {s.get('ranks')} ranks on {s.get('gpus')} GPUs - "
        f"simulated {_num(s.get('sim_time_s'), 'time')} in {s.get('wall_s', 0):.2f} s wall"
    )
    desc = (res.scenario or {}).get("description") or ""
    scen = yaml.safe_dump(res.scenario, sort_keys=False) if res.scenario else "(not recorded)"
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        f"<title>{_e(title)}</title><style>{_CSS}</style></head><body>"
        f"<h1>{_e(title)}</h1><p class='meta'>{_e(meta)}</p>"
        + (f"<p>{_e(desc)}</p>" if desc else "")
        + _summary_html(s)
        + _figures(plots)
        + _hot_links(res)
        + f"<h2>Scenario (resolved)</h2><pre>{_e(scen)}</pre>"
        + f"<script>{_SCRIPT}</script></body></html>"
    )


def write_report(directory: str | Path, out: str | Path | None = None) -> Path:
    """Write the report (default ``DIR/report.html``) and return its path."""
    d = Path(directory)
    path = Path(out) if out is not None else d / "report.html"
    text = render_report(d)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path
