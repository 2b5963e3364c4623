"""timeline.json: a run's timeline as Chrome / Perfetto trace events, checked against a JSON
Schema of the Trace Event Format's events (Google, "Trace Event Format") and against the run's
own tables."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import jsonschema
import pytest
from podsim.scenarios.results import trace_events as te_mod
from podsim.scenarios.results.tables import Results
from podsim.scenarios.results.trace_events import (
    PID_MESSAGES,
    PID_RANKS,
    trace_events,
    write_trace_events,
)

_NUM = {"type": "number"}
_ID = {"type": "integer", "minimum": 0}
#: the events podsim writes, as the Trace Event Format defines them: complete events (X) need
#: ts and dur, async begin/end (b/e) need cat, id and ts, counters (C) a name and numeric args,
#: metadata (M) one of the naming records
SCHEMA = {
    "type": "object",
    "required": ["traceEvents"],
    "properties": {
        "displayTimeUnit": {"enum": ["ms", "ns"]},
        "otherData": {"type": "object"},
        "traceEvents": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["ph", "pid", "name"],
                "properties": {"pid": _ID, "tid": _ID, "name": {"type": "string"}},
                "oneOf": [
                    {"properties": {"ph": {"const": "X"}, "ts": _NUM,
                                    "dur": {"type": "number", "minimum": 0}},
                     "required": ["ts", "dur", "tid"]},
                    {"properties": {"ph": {"enum": ["b", "e"]}, "ts": _NUM, "id": _ID,
                                    "cat": {"type": "string"}},
                     "required": ["ts", "id", "cat", "tid"]},
                    {"properties": {"ph": {"const": "C"}, "ts": _NUM,
                                    "args": {"type": "object",
                                             "additionalProperties": _NUM}},
                     "required": ["ts", "args"]},
                    {"properties": {"ph": {"const": "M"},
                                    "name": {"enum": ["process_name", "process_sort_index",
                                                      "thread_name", "thread_sort_index"]}},
                     "required": ["args"]},
                ],
            },
        },
    },
}  # fmt: skip


@pytest.fixture(scope="module")
def timeline(quickstart_dir: Path) -> dict:
    return json.loads((quickstart_dir / "timeline.json").read_text())


def test_timeline_is_valid_trace_event_json(timeline: dict) -> None:
    jsonschema.validate(timeline, SCHEMA)
    assert timeline["otherData"]["scenario"] == "quickstart"


def test_one_track_per_rank_with_the_phases_of_the_run(timeline: dict, quickstart_dir: Path):
    """One named thread per rank in the ranks process, and on it exactly that rank's phases
    at the times of phases.parquet (microseconds)."""
    res = Results.read(quickstart_dir)
    ev = timeline["traceEvents"]
    names = [e for e in ev if e["ph"] == "M" and e["name"] == "thread_name"]
    tracks = {e["tid"]: e["args"]["name"] for e in names if e["pid"] == PID_RANKS}
    ranks = int(res.summary["ranks"])
    assert tracks == {r: f"rank {r}" for r in range(ranks)}
    x = [e for e in ev if e["ph"] == "X" and e["pid"] == PID_RANKS]
    assert Counter(e["tid"] for e in x) == Counter(res.phases["rank"].astype(int).tolist())
    got = sorted((e["tid"], e["name"], e["ts"], e["dur"]) for e in x)
    p = res.phases
    want = sorted(
        (int(r), str(ph), round(s * 1e6, 6), round(d * 1e6, 6))
        for r, ph, s, d in zip(p["rank"], p["phase"], p["start_s"], p["duration_s"], strict=True)
    )
    assert got == want


def test_every_message_is_one_async_slice_from_post_to_delivery(timeline, quickstart_dir):
    res = Results.read(quickstart_dir)
    ev = [e for e in timeline["traceEvents"] if e["pid"] == PID_MESSAGES and e["ph"] in "be"]
    begins = {e["id"]: e for e in ev if e["ph"] == "b"}
    ends = {e["id"]: e for e in ev if e["ph"] == "e"}
    assert set(begins) == set(ends) == set(res.messages["msg"].astype(int))
    m = res.messages.set_index("msg")
    for i, b in begins.items():
        assert ends[i]["ts"] >= b["ts"]
        assert b["tid"] == int(m.at[i, "src_rank"]) and b["args"]["bytes"] == int(m.at[i, "bytes"])
        assert ends[i]["ts"] == pytest.approx(float(m.at[i, "end_s"]) * 1e6, abs=1e-6)


def test_message_cap_keeps_the_longest_and_says_how_many_it_left_out(quickstart_dir):
    res = Results.read(quickstart_dir)
    doc = trace_events(res, max_messages=10)
    kept = {e["id"] for e in doc["traceEvents"] if e["ph"] == "b"}
    assert len(kept) == 10
    assert doc["otherData"]["messages_left_out"] == len(res.messages) - 10
    fct = res.messages.set_index("msg")["fct_s"]
    assert fct.loc[sorted(kept)].min() >= fct.drop(index=sorted(kept)).max()
    with pytest.raises(ValueError, match="max_messages"):
        trace_events(res, max_messages=-1)


@pytest.mark.parametrize("chunk", [1, 7, 10**9])
def test_written_text_is_the_compact_json_of_the_document(
    quickstart_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunk: int
) -> None:
    """The file, encoded in chunks of events by the C encoder, is byte for byte what
    ``json.dump`` with compact separators writes of the same document (chunk of one event,
    chunks that do not divide the events, one chunk)."""
    res = Results.read(quickstart_dir)
    monkeypatch.setattr(te_mod, "_CHUNK", chunk)
    for cap in (0, 3, 10**6):
        path = write_trace_events(res, tmp_path / f"t{cap}.json", max_messages=cap)
        want = json.dumps(trace_events(res, max_messages=cap), separators=(",", ":")) + "\n"
        assert path.read_text(encoding="utf-8") == want
