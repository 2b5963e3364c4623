"""A run's timeline as Chrome / Perfetto trace events (``timeline.json``).

Format: the Trace Event Format (Google, "Trace Event Format", the JSON that chrome://tracing and
ui.perfetto.dev open): a JSON object whose ``traceEvents`` list holds events with a phase
``ph``, a process ``pid``, a thread ``tid``, a timestamp ``ts`` and a duration ``dur`` in
microseconds. What a run writes:

- process 1, ``ranks``: one thread (track) per rank, named ``rank N`` and sorted by rank, with
  one complete event (``ph: "X"``) per phase of each (step, layer): ``dispatch``, ``compute``,
  ``combine`` or ``other``, its arguments the step, the layer and the bytes sent and received;
- process 2, ``messages``: every message as an async slice (``ph: "b"`` / ``"e"``, ``cat``
  = its hop: rdma, scaleup or local) on its sender's async track, from post to delivery, named
  ``r<src> -> r<dst>`` with bytes, hop and status as arguments; a message that never completed
  ends at the end of the run with status ``unfinished`` or ``failed`` (one never posted, e.g.
  after a Ctrl-C, is left out). At most
  ``max_messages`` (default 200,000) are written, the longest first, and ``otherData`` says how
  many were left out;
- process 3, ``queues``: one counter (``ph: "C"``) per sampled switch port with its queued
  bytes at every sample of the queue series (``outputs.queue_series``).

Times are simulated time. ``otherData`` carries the scenario, the engine, the podsim version
and the run's status. Assumption: a rank's phases do not overlap within one (step, layer)
(the per-layer timeline); tracks whose events would overlap are still valid JSON, but Perfetto
draws overlapping complete events on one track stacked.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from podsim.scenarios.results.tables import Results

__all__ = ["MAX_MESSAGES", "trace_events", "write_trace_events"]

#: messages written at most (the longest first): a 10,000-GPU all-to-all has 10^8
MAX_MESSAGES = 200_000
PID_RANKS, PID_MESSAGES, PID_QUEUES = 1, 2, 3
_US = 1e6  # trace-event times are microseconds


def _meta(pid: int, name: str, tid: int | None = None, sort: int | None = None) -> list[dict]:
    out: list[dict[str, Any]] = []
    if tid is None:
        out.append({"ph": "M", "pid": pid, "name": "process_name", "args": {"name": name}})
        out.append(
            {"ph": "M", "pid": pid, "name": "process_sort_index", "args": {"sort_index": pid}}
        )
    else:
        out.append(
            {"ph": "M", "pid": pid, "tid": tid, "name": "thread_name", "args": {"name": name}}
        )
        if sort is not None:
            out.append(
                {"ph": "M", "pid": pid, "tid": tid, "name": "thread_sort_index",
                 "args": {"sort_index": sort}}
            )  # fmt: skip
    return out


def _phase_events(phases: pd.DataFrame) -> list[dict[str, Any]]:
    p = phases.sort_values(["rank", "start_s", "phase"], kind="stable")
    start = (p["start_s"].to_numpy(float) * _US).round(6)
    dur = (p["duration_s"].to_numpy(float) * _US).round(6)
    cols = zip(
        p["rank"].to_numpy(np.int64).tolist(),
        p["phase"].astype(str).tolist(),
        start.tolist(),
        dur.tolist(),
        p["step"].to_numpy(np.int64).tolist(),
        p["layer"].to_numpy(np.int64).tolist(),
        p["bytes_out"].to_numpy(np.int64).tolist(),
        p["bytes_in"].to_numpy(np.int64).tolist(),
        strict=True,
    )
    return [
        {"ph": "X", "pid": PID_RANKS, "tid": r, "name": ph, "cat": "phase", "ts": t, "dur": d,
         "args": {"step": st, "layer": ly, "bytes_out": bo, "bytes_in": bi}}
        for r, ph, t, d, st, ly, bo, bi in cols
        if math.isfinite(t) and math.isfinite(d)
    ]  # fmt: skip


def _message_events(
    messages: pd.DataFrame, end_s: float, max_messages: int
) -> tuple[list[dict[str, Any]], int]:
    m = messages[np.isfinite(messages["post_s"].to_numpy(float))]  # never posted: no slice
    if m.empty:
        return [], 0
    post = m["post_s"].to_numpy(float)
    end = m["end_s"].to_numpy(float)
    # an unfinished message ends with the run (or with the last post, if later)
    last = max(float(np.max(post)), end_s if math.isfinite(end_s) else 0.0)
    end = np.where(np.isfinite(end), end, last)
    left_out = 0
    order = np.arange(len(m))
    if len(m) > max_messages:
        order = np.argsort(-(end - post), kind="stable")[:max_messages]
        order.sort()
        left_out = len(m) - max_messages
    sub = m.iloc[order]
    ts_b = (post[order] * _US).round(6).tolist()
    ts_e = (end[order] * _US).round(6).tolist()
    out: list[dict[str, Any]] = []
    for msg, src, dst, nbytes, hop, status, b, e in zip(
        sub["msg"].to_numpy(np.int64).tolist(),
        sub["src_rank"].to_numpy(np.int64).tolist(),
        sub["dst_rank"].to_numpy(np.int64).tolist(),
        sub["bytes"].to_numpy(np.int64).tolist(),
        sub["hop"].astype(str).tolist(),
        sub["status"].astype(str).tolist(),
        ts_b,
        ts_e,
        strict=True,
    ):
        name = f"r{src} -> r{dst}"
        common = {"pid": PID_MESSAGES, "tid": src, "cat": hop, "id": msg, "name": name}
        args = {"bytes": nbytes, "hop": hop, "status": status, "dst": dst}
        out.append({**common, "ph": "b", "ts": b, "args": args})
        out.append({**common, "ph": "e", "ts": e})
    return out, left_out


def _queue_events(queues: pd.DataFrame) -> list[dict[str, Any]]:
    if queues.empty:
        return []
    q = queues.sort_values(["port", "time_s"], kind="stable")
    return [
        {"ph": "C", "pid": PID_QUEUES, "name": port, "ts": round(t * _US, 6),
         "args": {"bytes": depth}}
        for port, t, depth in zip(
            q["port"].astype(str).tolist(),
            q["time_s"].to_numpy(float).tolist(),
            q["depth_bytes"].to_numpy(np.int64).tolist(),
            strict=True,
        )
    ]  # fmt: skip


def trace_events(res: Results, *, max_messages: int = MAX_MESSAGES) -> dict[str, Any]:
    """The trace-event JSON object of ``res`` (module docstring)."""
    if max_messages < 0:
        raise ValueError(f"max_messages={max_messages!r} must be >= 0")
    s = res.summary
    ranks = sorted(set(res.phases["rank"].astype(int)) | set(res.messages["src_rank"].astype(int)))
    events: list[dict[str, Any]] = []
    events += _meta(PID_RANKS, "ranks")
    events += _meta(PID_MESSAGES, "messages (by sender)")
    for r in ranks:
        events += _meta(PID_RANKS, f"rank {r}", tid=r, sort=r)
        events += _meta(PID_MESSAGES, f"rank {r} sends", tid=r, sort=r)
    events += _phase_events(res.phases)
    ends = res.phases["end_s"].to_numpy(float)
    end_s = float(s.get("makespan_s") or np.nanmax(ends, initial=0.0))
    msg_events, left_out = _message_events(res.messages, end_s, max_messages)
    events += msg_events
    if not res.queues.empty:
        events += _meta(PID_QUEUES, "switch queues (bytes)")
        events += _queue_events(res.queues)
    other = {
        "scenario": s.get("scenario"),
        "variant": s.get("variant"),
        "engine": s.get("engine"),
        "status": s.get("status"),
        "ranks": len(ranks),
        "messages_left_out": left_out,
        "time": "simulated",
    }
    prov = s.get("provenance") or {}
    if prov.get("podsim_version"):
        other["podsim_version"] = prov["podsim_version"]
    return {"traceEvents": events, "displayTimeUnit": "ns", "otherData": other}


#: events encoded per string (bounds the memory of the encoded text of a large timeline)
_CHUNK = 20_000


def write_trace_events(res: Results, path: str | Path, *, max_messages: int = MAX_MESSAGES) -> Path:
    """Write :func:`trace_events` of ``res`` to ``path`` (compact JSON); returns the path.

    The text is what ``json.dump(doc, fh, separators=(",", ":"))`` writes, byte for byte, but
    encoded by ``json``'s C encoder (``json.dump`` streams through the pure-Python one, about
    five times slower: a second of a 128-host all-to-all's run), :data:`_CHUNK` events at a
    time."""
    p = Path(path)
    doc = trace_events(res, max_messages=max_messages)
    encode = json.JSONEncoder(separators=(",", ":"), allow_nan=False).encode
    events = doc.pop("traceEvents")
    with p.open("w", encoding="utf-8") as fh:
        fh.write('{"traceEvents":[')
        for i in range(0, len(events), _CHUNK):
            fh.write(("," if i else "") + encode(events[i : i + _CHUNK])[1:-1])
        rest = encode(doc)  # the keys after traceEvents, in their order
        fh.write("]" + ("," + rest[1:] if rest != "{}" else "}"))
        fh.write("\n")
    return p
