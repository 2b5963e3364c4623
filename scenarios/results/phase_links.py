"""Link utilisation per phase: what each link direction carried while each phase of the run ran.

A whole-run mean hides what a design review asks: a NIC link idle through a long expert compute
shows 40 % over the run although it is saturated while dispatch runs. This module splits the
run's time into phases and measures every link in each.

Phase time (:func:`phase_segments`): each (step, layer, phase, ... tags) of the ``phases``
table runs from its first rank's start to its last rank's end (the window the summary's
completion time measures). Windows of different phases overlap where ranks drift apart (one rank
computes while another still dispatches), so time is partitioned: an instant belongs to the
communication phases running then (joined by "+" when several overlap, e.g. "combine+dispatch"
when one layer's combine meets the next layer's dispatch), else to ``compute`` when a compute
window covers it, else to ``idle``. The segments cover ``[0, end]`` without overlap, so every
byte falls in exactly one phase (conservation: a link's bytes over its phases are its
whole-run bytes).

Bytes in a phase (:func:`links_by_phase`): the packet engine records each link direction's
cumulative transmitted bytes at sample times (:class:`LinkSeries`: it reads its ports' counters
every ``sim.sample_interval``, with the queue depths; never per packet); between two samples the
count is interpolated linearly, so a phase boundary is placed to within one sample interval (the
error is at most rate x interval bytes per boundary). The flow engine keeps no rate history; it
gives every finished flow's bytes per link over the flow's sending time
(:class:`SpreadLinkBytes`), exact for a phase that holds the flow whole. The bound engine runs
no time and measures no phase. A link's utilisation in a
phase is ``8 x bytes / (rate_bps x seconds)`` over the phase's total time: its busy-time
utilisation while the phase runs.

Contention (:func:`contention_threshold_bytes`): a link counts as contended in a phase when its
sampled queue held more than :data:`CONTENDED_MTUS` MTUs while the phase ran, the rule of the
queue-depth figure; engines without queues (flow, bound) measure no contention.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

__all__ = [
    "CONTENDED_MTUS",
    "IDLE",
    "JoinedLinkBytes",
    "LinkBytes",
    "LinkSeries",
    "SpreadLinkBytes",
    "contention_threshold_bytes",
    "links_by_phase",
    "phase_link_caption",
    "phase_link_rows",
    "phase_link_summary",
    "phase_segments",
]

#: a port counts as contended when its queue held more than this many MTU-sized packets at
#: some sample: one packet on the wire and one waiting is normal store-and-forward, more is a
#: queue building [E]
CONTENDED_MTUS = 2
#: the label of time in which no phase of the run runs
IDLE = "idle"
#: links listed per phase in the summary (``busiest`` and ``hottest``)
LISTED = 5
#: most (time, transfer) fractions :meth:`SpreadLinkBytes.at` holds at once (8 bytes each; a
#: 10,000-GPU training step has about 10^7 transfers)
SPREAD_CHUNK = 1 << 23
#: columns of the phases table that are measurements, not tags naming a phase window
_MEASURES = ("rank", "start_s", "end_s", "duration_s", "bytes_out", "bytes_in", "bus_factor")


@dataclass
class LinkSeries:
    """Cumulative transmitted bytes of link directions at sample times (what an engine records
    for :func:`links_by_phase`).

    ``times`` (n,) increasing sample times (s); ``links`` the L link names (``"u->v"``, as in
    the links table); ``tx_bytes`` (n, L) cumulative wire bytes at each sample (the last row is
    the run's total); ``queue_bytes`` (n, L) sampled queue depth, None when the engine has no
    queues; ``interval_s`` the sampling period (the resolution of a phase boundary)."""

    times: np.ndarray
    links: list[str]
    tx_bytes: np.ndarray
    queue_bytes: np.ndarray | None = None
    interval_s: float = float("nan")

    def at(self, t: np.ndarray) -> np.ndarray:
        """Cumulative bytes of every link at times ``t`` (m,) -> (m, L), linear between samples,
        the first sample before it and the last after it."""
        times = np.asarray(self.times, dtype=float)
        cum = np.asarray(self.tx_bytes, dtype=float)
        t = np.asarray(t, dtype=float)
        if len(times) == 0:
            return np.zeros((len(t), len(self.links)))
        if len(times) == 1:
            return np.repeat(cum[:1], len(t), axis=0)
        j = np.clip(np.searchsorted(times, t, side="right"), 1, len(times) - 1)
        t0, t1 = times[j - 1], times[j]
        with np.errstate(divide="ignore", invalid="ignore"):
            w = np.where(t1 > t0, (t - t0) / (t1 - t0), 1.0)
        w = np.clip(w, 0.0, 1.0)[:, None]
        return cum[j - 1] + w * (cum[j] - cum[j - 1])


@dataclass
class SpreadLinkBytes:
    """Bytes of transfers, each spread evenly over its sending time (what a fluid engine that
    keeps no rate history knows): transfer ``f`` sends ``bytes[f, l]`` on link ``l`` between
    ``t0[f]`` and ``t1[f]`` (NaN ``t1``: it never finished, and counts nowhere).

    Exact for every phase whose windows hold the transfer whole (a dispatch message is posted
    and delivered inside its dispatch window); where phases overlap, a transfer that spans
    their boundary is split in proportion to time. The same interface as :class:`LinkSeries`
    (``links``, ``at``; no queues, no samples)."""

    links: list[str]
    t0: np.ndarray
    t1: np.ndarray
    bytes: Any  # scipy.sparse (transfers x columns)
    times: np.ndarray = field(default_factory=lambda: np.zeros(0))
    queue_bytes: np.ndarray | None = None
    interval_s: float = 0.0
    #: link -> the column of ``bytes`` that holds its bytes (None: column = link). Links that
    #: carry the same transfers with the same bytes (the members of a bundle that transfers
    #: spread over evenly) share one column instead of repeating it per member.
    columns: np.ndarray | None = None

    def at(self, t: np.ndarray) -> np.ndarray:
        """Cumulative bytes of every link at times ``t`` (m,) -> (m, L)."""
        out = self._at_columns(t)
        if self.columns is None:
            return out
        return out[:, self.columns]

    def _at_columns(self, t: np.ndarray) -> np.ndarray:
        """Cumulative bytes of every column of ``bytes`` at times ``t``."""
        t = np.asarray(t, dtype=float)
        t0 = np.asarray(self.t0, dtype=float)
        t1 = np.asarray(self.t1, dtype=float)
        done = np.isfinite(t0) & np.isfinite(t1)
        span = np.where(done, t1 - t0, 1.0)
        out = np.zeros((len(t), self.bytes.shape[1]))
        bt = self.bytes.T.tocsr()  # (columns x transfers)
        # bounded memory: at most SPREAD_CHUNK values of (times x transfers) at a time (each
        # link's sum runs over the transfers in the same order whatever the chunk)
        step = max(1, min(64, SPREAD_CHUNK // max(len(t0), 1)))
        for lo in range(0, len(t), step):
            tb = t[lo : lo + step, None]
            with np.errstate(divide="ignore", invalid="ignore"):
                frac = np.where(span > 0, (tb - t0) / span, (tb >= t1).astype(float))
            frac = np.where(done, np.clip(frac, 0.0, 1.0), 0.0)
            out[lo : lo + step] = (bt @ frac.T).T
        return out


def phase_segments(phases: pd.DataFrame, end_s: float) -> pd.DataFrame:
    """The run's time ``[0, end_s]`` split into phases (module docstring): columns start_s,
    end_s, phase; consecutive segments of the same phase merged, in time order."""
    cols = ["start_s", "end_s", "phase"]
    end_s = float(end_s) if np.isfinite(end_s) else 0.0
    ph = phases[np.isfinite(phases["start_s"]) & np.isfinite(phases["end_s"])]
    if end_s <= 0:
        return pd.DataFrame(columns=cols)
    keys = [c for c in ph.columns if c not in _MEASURES]
    if ph.empty or "phase" not in keys:
        return pd.DataFrame({"start_s": [0.0], "end_s": [end_s], "phase": [IDLE]})
    win = ph.groupby(keys, sort=False, dropna=False).agg(t0=("start_s", "min"), t1=("end_s", "max"))
    win = win.reset_index()[["phase", "t0", "t1"]]
    win = win[win["t1"] > win["t0"]]
    # communication phases in the order they first start (dispatch before combine)
    first = win.groupby("phase", sort=False)["t0"].min().sort_values(kind="stable")
    kinds = [str(k) for k in first.index]
    edges = np.unique(np.concatenate([[0.0, end_s], win["t0"].to_numpy(), win["t1"].to_numpy()]))
    edges = edges[(edges >= 0.0) & (edges <= end_s)]
    mid = 0.5 * (edges[:-1] + edges[1:])
    active: dict[str, np.ndarray] = {}
    for k in kinds:
        w = win[win["phase"] == k]
        starts = np.sort(w["t0"].to_numpy())
        ends = np.sort(w["t1"].to_numpy())
        active[k] = np.searchsorted(starts, mid, "right") - np.searchsorted(ends, mid, "right") > 0
    comm = [k for k in kinds if k != "compute"]
    labels = np.full(len(mid), IDLE, dtype=object)
    if "compute" in active:
        labels[active["compute"]] = "compute"
    names = np.full(len(mid), "", dtype=object)
    for k in comm:
        on = active[k]
        names[on] = np.where(names[on] == "", k, names[on] + "+" + k)
    labels = np.where(names != "", names, labels)
    # merge runs of one label
    change = np.flatnonzero(np.r_[True, labels[1:] != labels[:-1]])
    starts = edges[:-1][change]
    ends = np.r_[starts[1:], edges[-1]]
    return pd.DataFrame({"start_s": starts, "end_s": ends, "phase": labels[change]})


@dataclass
class JoinedLinkBytes:
    """Link bytes from two records side by side: sampled port counters (``sampled``) and
    transfers spread over their time (``spread``, e.g. the packet engine's fluid scale-up
    pipes). Samples and queues are the sampled part's; the spread links have no queue."""

    sampled: LinkSeries
    spread: SpreadLinkBytes

    @property
    def links(self) -> list[str]:
        return [*self.sampled.links, *self.spread.links]

    @property
    def times(self) -> np.ndarray:
        return self.sampled.times

    @property
    def interval_s(self) -> float:
        return self.sampled.interval_s

    @property
    def queue_bytes(self) -> np.ndarray | None:
        q = self.sampled.queue_bytes
        if q is None:
            return None
        return np.hstack([q, np.zeros((q.shape[0], len(self.spread.links)), dtype=q.dtype)])

    def at(self, t: np.ndarray) -> np.ndarray:
        return np.hstack([self.sampled.at(t), self.spread.at(t)])


#: what an engine hands the runner for :func:`links_by_phase`
LinkBytes = LinkSeries | SpreadLinkBytes | JoinedLinkBytes


def links_by_phase(links: pd.DataFrame, series: LinkBytes, segments: pd.DataFrame) -> pd.DataFrame:
    """One row per (link direction of ``series``, phase of ``segments``): link, tier, phase,
    seconds (the phase's total time), bytes (wire bytes sent while it ran), utilisation
    (8 bytes / (rate_bps x seconds)), max_queue_bytes (deepest sampled queue while it ran; 0
    without queues). Phases in order of first appearance, links in ``series`` order."""
    from podsim.scenarios.results.tables import conform

    if segments.empty or not series.links:
        return conform("links_by_phase", None)
    edges = np.r_[segments["start_s"].to_numpy(float), segments["end_s"].to_numpy(float)[-1]]
    cum = series.at(edges)
    per_seg = np.diff(cum, axis=0)  # (segments, L)
    labels = segments["phase"].to_numpy(object)
    order = list(dict.fromkeys(labels.tolist()))
    code = np.array([order.index(x) for x in labels])
    nl = len(series.links)
    bytes_ = np.zeros((len(order), nl))
    np.add.at(bytes_, code, per_seg)
    seconds = np.bincount(code, weights=np.diff(edges), minlength=len(order))
    depth = np.zeros((len(order), nl))
    if series.queue_bytes is not None and len(series.times):
        seg = np.searchsorted(edges, np.asarray(series.times, float), side="right") - 1
        seg = np.clip(seg, 0, len(labels) - 1)
        np.maximum.at(depth, code[seg], np.asarray(series.queue_bytes, dtype=float))
    info = links.set_index("link")[["tier", "rate_bps"]].reindex(series.links)
    rate = info["rate_bps"].to_numpy(float)
    df = pd.DataFrame(
        {
            "link": np.tile(np.asarray(series.links, dtype=object), len(order)),
            "tier": np.tile(info["tier"].fillna("").to_numpy(object), len(order)),
            "phase": np.repeat(np.asarray(order, dtype=object), nl),
            "seconds": np.repeat(seconds, nl),
            "bytes": np.rint(bytes_.ravel()).astype(np.int64),
        }
    )
    with np.errstate(divide="ignore", invalid="ignore"):
        df["utilisation"] = 8.0 * bytes_.ravel() / (np.tile(rate, len(order)) * df["seconds"])
    df["max_queue_bytes"] = depth.ravel().astype(np.int64)
    return conform("links_by_phase", df)


def contention_threshold_bytes(scenario: Mapping[str, Any] | None) -> float:
    """The queue depth above which a port counts as contended: :data:`CONTENDED_MTUS` MTUs of
    the resolved scenario's NIC (4 KiB when it names none)."""
    from podsim.fabric.units import parse_size

    nic = ((scenario or {}).get("cluster") or {}).get("nic") or {}
    try:
        mtu = float(parse_size(nic.get("mtu", 4096)))
    except (TypeError, ValueError):
        mtu = 4096.0
    return CONTENDED_MTUS * mtu


def phase_link_summary(
    by_phase: pd.DataFrame, threshold_bytes: float, queues: bool, interval_s: float
) -> dict[str, Any]:
    """``summary.json``'s ``link_utilisation_by_phase``: per phase its time, per tier the mean
    and max utilisation while it ran, the ``busiest`` links (highest utilisation while it ran),
    the links ``contended`` (queue above ``threshold_bytes`` while it ran; None when the engine
    has no queues) and the ``hottest``: the busiest of the contended ones."""
    out: dict[str, Any] = {
        "definition": (
            "utilisation = bytes a link sent while the phase ran / (rate x the phase's time); "
            "a phase runs from its first rank's start to its last rank's end; hottest = the "
            f"busiest links whose queue held more than {CONTENDED_MTUS} MTU while it ran"
        ),
        "contention_threshold_bytes": threshold_bytes,
        "queues_modelled": queues,
        "boundary_resolution_s": interval_s,
        "phases": {},
    }
    if by_phase.empty:
        return out
    for ph, grp in by_phase.groupby("phase", sort=False):
        tiers = {
            str(t): {
                "mean_utilisation": float(g["utilisation"].mean()),
                "max_utilisation": float(g["utilisation"].max()),
                "tx_bytes": int(g["bytes"].sum()),
            }
            for t, g in grp.groupby("tier", sort=True)
        }
        ranked = grp.sort_values(["utilisation", "link"], ascending=[False, True], kind="stable")
        ranked = ranked[ranked["bytes"] > 0]
        hot = ranked[ranked["max_queue_bytes"] > threshold_bytes] if queues else ranked.iloc[:0]

        def rows(df: pd.DataFrame) -> list[dict[str, Any]]:
            return [
                {
                    "link": str(r.link),
                    "tier": str(r.tier),
                    "utilisation": float(r.utilisation),
                    "max_queue_bytes": int(r.max_queue_bytes) if queues else None,
                }
                for r in df.head(LISTED).itertuples(index=False)
            ]

        out["phases"][str(ph)] = {
            "seconds": float(grp["seconds"].iloc[0]),
            "tiers": tiers,
            "contended_links": len(hot) if queues else None,
            "busiest": rows(ranked),
            "hottest": rows(hot),
        }
    return out


def phase_link_rows(summary: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One row per phase of ``summary["link_utilisation_by_phase"]`` for the printed summary
    and the report (idle time left out): phase, seconds, the busiest link and its utilisation,
    the number of contended links (None without queues) and the hottest link (None when no
    link was contended)."""
    doc = summary.get("link_utilisation_by_phase") or {}
    rows = []
    for ph, m in (doc.get("phases") or {}).items():
        if ph == IDLE:
            continue
        busy = (m.get("busiest") or [None])[0]
        hot = (m.get("hottest") or [None])[0]
        rows.append(
            {
                "phase": ph,
                "seconds": m.get("seconds"),
                "busiest": busy["link"] if busy else None,
                "busiest_utilisation": busy["utilisation"] if busy else 0.0,
                "contended_links": m.get("contended_links"),
                "hottest": hot["link"] if hot else None,
                "hottest_utilisation": hot["utilisation"] if hot else None,
            }
        )
    return rows


def phase_link_caption(summary: Mapping[str, Any]) -> str:
    """What the per-phase link figures mean, for under their table."""
    doc = summary.get("link_utilisation_by_phase") or {}
    thr = doc.get("contention_threshold_bytes")
    text = (
        "Utilisation while a phase runs = bytes the link sent then / (rate x the phase's time; "
        "a phase runs from its first rank's start to its last rank's end). "
    )
    if doc.get("queues_modelled") and thr:
        text += (
            f"Contended = its queue held more than {CONTENDED_MTUS} MTU ({thr / 1024:.0f} KiB) "
            "while the phase ran; hottest = the busiest contended link."
        )
    else:
        text += "This engine models no queues: contention is not measured."
    return text
