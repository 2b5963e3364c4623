"""The messages table says of every message whether it completed, failed (and why) or did
not finish because the run stopped first (``status`` and ``reason`` columns)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import podsim
import pytest
from podsim.scenarios.results.tables import (
    MESSAGE_STATUSES,
    Results,
    message_table,
    settle_messages,
)

KIB = 1024


def two_phase_trace(path: Path, size: int = 64 * KIB) -> Path:
    """Ranks 0-3 (leaf0) send to ranks 4-7 (leaf1) in dispatch, then all back in combine."""
    rows = [
        {"step": 0, "layer": 0, "phase": ph, "src_rank": s, "dst_rank": d, "bytes": size,
         "tokens": 1, "start_s": 0.0, "hop": "rdma"}
        for ph in ("dispatch", "combine") for s in range(4) for d in range(4, 8)
    ]  # fmt: skip
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def doc(tmp: Path, selector: str, faults: list, **sim) -> dict:
    return {
        "name": "status",
        "seed": 3,
        "engine": "packet",
        "cluster": {
            "topology": {"name": "leaf-spine", "params": {"hosts_per_leaf": 4, "leaves": 2}},
            "nic": {"multipath": {"selector": selector, "paths": 64 if selector != "ecmp" else 1}},
            "routing": {"reconvergence": "1s"},
        },
        "workload": {"trace": {"path": str(two_phase_trace(tmp / "t.csv")), "ranks": 8}},
        "outputs": {"formats": ["parquet"], "plots": False},
        "sim": sim,
        "faults": faults,
    }


def test_unreachable_destination_fails_with_the_fault_named(tmp_path: Path) -> None:
    """A NIC port dies for good: the messages to it fail ("no route ... after nic down"), the
    ones it would have sent later never start (time limit), the rest complete."""
    nic_down = {"kind": "nic_down", "node": "nic7.p0", "at": "2us"}
    res = podsim.run(doc(tmp_path, "spray", [nic_down], time_limit="300us"))
    m = res.messages
    assert set(m["status"]) <= set(MESSAGE_STATUSES)
    failed = m[m["status"] == "failed"]
    assert sorted(failed["dst_rank"]) == [7, 7, 7, 7] and (failed["phase"] == "dispatch").all()
    want = r"^destination unreachable: no route from nic\d\.p0 to nic7\.p0 after nic down nic7\.p0$"
    assert failed["reason"].str.match(want).all(), failed["reason"].tolist()
    done = m[(m["phase"] == "dispatch") & (m["dst_rank"] != 7)]
    assert (done["status"] == "complete").all() and (done["reason"] == "").all()
    rest = m[m["phase"] == "combine"]
    assert (rest["status"] == "unfinished").all() and rest["post_s"].isna().all()
    assert rest["reason"].str.startswith("time limit").all()
    s = res.summary
    assert s["status"] == "time-limit"
    assert s["messages"]["failed"] == 4 and s["messages"]["unfinished"] == 4 + 16
    assert sum(f["status"] == "failed" for f in s["engine_info"]["failed_messages"]) == 4


def test_lost_packets_without_retransmission_fail_and_later_phases_never_post(tmp_path: Path):
    """Line-rate hosts (no retransmission) on single-path ECMP through a cut spine link: the
    hit messages fail naming the fault; the run stalls; what waited on them never posts."""
    cut = {"kind": "link_down", "link": ["leaf0", "spine0"], "at": "2us"}
    res = podsim.run(doc(tmp_path, "ecmp", [cut], endpoint="host"))
    m = res.messages
    assert res.summary["status"] == "stalled"
    failed = m[m["status"] == "failed"]
    assert len(failed) > 0 and failed["end_s"].isna().all()
    assert failed["reason"].str.contains("lost to link_down leaf0-spine0").all()
    never = m[(m["status"] == "unfinished")]
    assert len(never) > 0 and never["post_s"].isna().all()
    assert never["reason"].str.startswith("never posted").all()
    ok = m[m["status"] == "complete"]
    assert ok["end_s"].notna().all() and len(ok) + len(failed) + len(never) == len(m)


def test_time_limit_leaves_messages_unfinished_not_failed(tmp_path: Path) -> None:
    res = podsim.run(doc(tmp_path, "spray", [], time_limit="3us"))
    m = res.messages
    assert (m["status"] == "unfinished").all() and res.summary["messages"]["failed"] == 0
    posted = m["post_s"].notna()
    assert posted.any() and (~posted).any()
    assert m.loc[posted, "reason"].str.endswith("before it completed").all()
    assert m.loc[~posted, "reason"].str.endswith("before it was posted").all()


def test_status_and_reason_survive_writing_and_reading(tmp_path: Path) -> None:
    res = podsim.run(doc(tmp_path, "spray", [], time_limit="3us"), out=tmp_path / "o")
    back = Results.read(tmp_path / "o")
    pd.testing.assert_series_equal(back.messages["status"], res.messages["status"])
    pd.testing.assert_series_equal(back.messages["reason"], res.messages["reason"])


def test_message_table_and_settle_rules() -> None:
    tr = pd.DataFrame(
        {"step": 0, "layer": 0, "phase": "dispatch", "src_rank": [0, 0, 1, 1],
         "dst_rank": [1, 2, 0, 2], "bytes": 10, "tokens": 1, "hop": "rdma"}
    )  # fmt: skip
    post = np.array([0.0, 0.0, 0.0, np.nan])
    end = np.array([1e-6, np.nan, np.nan, np.nan])
    # a delivered message is complete whatever the engine's outcome says
    outcomes = {0: ("failed", "x"), 1: ("failed", "no route")}
    m = message_table(tr, post, end, outcomes)
    assert m["status"].tolist() == ["complete", "failed", "unfinished", "unfinished"]
    assert m["reason"].tolist() == ["", "no route", "", ""]
    s = settle_messages(m, "stalled")
    assert s["status"].tolist() == m["status"].tolist()
    assert s["reason"][1] == "no route"
    assert s["reason"][2].startswith("stalled") and s["reason"][3].startswith("never posted")
    with pytest.raises(ValueError, match="status 'lost'"):
        message_table(tr, post, end, {1: ("lost", "?")})


def test_retry_limit_fails_messages_to_a_dead_nic_and_the_run_ends(tmp_path: Path) -> None:
    """No time limit, a NIC port dead for good: with the default retry limit (7) the transport
    gives up and the messages table says why; with no limit the run is refused up front."""
    nic_down = {"kind": "nic_down", "node": "nic7.p0", "at": "2us"}
    d = doc(tmp_path, "spray", [nic_down])
    d["cluster"]["nic"]["rto"] = "10us"  # 7 retries take 10 us x (2^8 - 1) = 2.55 ms
    res = podsim.run(d)
    assert res.summary["status"] == "stalled"
    m = res.messages
    failed = m[m["status"] == "failed"]
    assert sorted(failed["dst_rank"]) == [7, 7, 7, 7]
    assert failed["reason"].str.startswith("retry limit exceeded: 8 consecutive timeouts").all()
    assert failed["reason"].str.contains("no route from nic.\\.p0 to nic7\\.p0 after nic down",
                                         regex=True).all()  # fmt: skip
    assert (res.qps.loc[res.qps["dst_rank"] == 7, "timeouts"] == 7).all()
    never = m[m["status"] == "unfinished"]
    assert len(never) == 16 and never["reason"].str.startswith("never posted").all()

    from podsim.scenarios.errors import ScenarioError

    d["cluster"]["nic"]["retry_limit"] = None
    with pytest.raises(ScenarioError, match="retransmit forever") as info:
        podsim.run(d)
    assert "faults[0]" in str(info.value) and "retry limit" in str(info.value)


def test_flow_engine_names_messages_waiting_behind_a_stalled_one_on_their_qp(tmp_path: Path):
    """Flow engine: two messages rank 0 -> rank 7 go on one QP, in order; the destination's
    NIC port dies for good while the first is sending: the first stalls on the dead port, the
    second never starts and says it waited on its QP behind it."""
    rows = [
        {"step": 0, "layer": 0, "phase": "dispatch", "src_rank": 0, "dst_rank": 7,
         "bytes": 1 << 20, "tokens": 1, "start_s": 0.0, "hop": "rdma"}
        for _ in range(2)
    ]  # fmt: skip
    d = doc(tmp_path, "spray", [{"kind": "nic_down", "node": "nic7.p0", "at": "2us"}])
    path = tmp_path / "two.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    d["workload"]["trace"] = {"path": str(path), "ranks": 8}
    d["engine"] = "flow"
    m = podsim.run(d).messages.sort_values("msg")
    assert (m["status"] == "unfinished").all()
    first, second = m["reason"].tolist()
    assert first.startswith("stalled at rate 0 on failed") and "nic7.p0" in first
    assert second == "waiting on its QP behind a message that never finished sending"
