"""The layer timeline against closed forms, over a transport with known delays."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from podsim.scenarios.execution.timeline import run_timeline

from tests.workloads.test_graph import LAT, RATE, FixedTransport


def trace(rows: list[dict]) -> pd.DataFrame:
    base = {"step": 0, "layer": 0, "tokens": 0, "start_s": 0.0, "hop": "rdma", "stage": 0}
    return pd.DataFrame([{**base, **r} for r in rows])


def compute(rows: list[tuple[int, int, int, float]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["step", "layer", "rank", "compute_s"])


def phase(ph: pd.DataFrame, name: str, rank: int, layer: int = 0) -> tuple[float, float]:
    row = ph[(ph["phase"] == name) & (ph["rank"] == rank) & (ph["layer"] == layer)]
    assert len(row) == 1
    return float(row["start_s"].iloc[0]), float(row["end_s"].iloc[0])


def test_dispatch_compute_combine_closed_form() -> None:
    b, c = 80_000, 5e-6
    tr = trace(
        [
            {"phase": "dispatch", "src_rank": 0, "dst_rank": 1, "bytes": b},
            {"phase": "combine", "src_rank": 1, "dst_rank": 0, "bytes": b},
        ]
    )
    comp = compute([(0, 0, r, c) for r in range(3)])
    t = FixedTransport()
    res = run_timeline(t.env, t, tr, comp, num_ranks=3)
    d = b / RATE + LAT
    assert res.status == "complete"
    assert phase(res.phases, "dispatch", 0) == pytest.approx((0.0, d))
    assert phase(res.phases, "dispatch", 1) == pytest.approx((0.0, d))
    assert phase(res.phases, "compute", 1) == pytest.approx((d, d + c))
    assert phase(res.phases, "combine", 1) == pytest.approx((d + c, 2 * d + c))
    assert phase(res.phases, "combine", 0) == pytest.approx((d + c, 2 * d + c))
    # no global barrier: rank 2 has no traffic and finishes after its own compute
    assert phase(res.phases, "combine", 2) == pytest.approx((c, c))
    np.testing.assert_allclose(res.end_s - res.post_s, [d, d])
    assert res.sim_time_s == pytest.approx(2 * d + c)


def test_layers_run_in_order_per_rank() -> None:
    b = 8_000
    rows = [
        {"phase": "dispatch", "layer": ly, "src_rank": 0, "dst_rank": 1, "bytes": b}
        for ly in range(3)
    ]
    t = FixedTransport()
    res = run_timeline(t.env, t, trace(rows), compute([]), num_ranks=2)
    d = b / RATE + LAT
    for ly in range(3):
        assert phase(res.phases, "dispatch", 0, ly) == pytest.approx((ly * d, (ly + 1) * d))


def test_stage1_forward_waits_for_stage0_arrivals_and_start_s() -> None:
    b = 16_000
    tr = trace(
        [
            {"phase": "dispatch", "src_rank": 0, "dst_rank": 2, "bytes": b, "stage": 0},
            {"phase": "dispatch", "src_rank": 1, "dst_rank": 2, "bytes": 2 * b, "stage": 0},
            {"phase": "dispatch", "src_rank": 2, "dst_rank": 3, "bytes": b, "stage": 1},
            {"phase": "dispatch", "src_rank": 3, "dst_rank": 0, "bytes": b, "start_s": 7e-6},
        ]
    )
    t = FixedTransport()
    res = run_timeline(t.env, t, tr, compute([]), num_ranks=4)
    posted = dict(t.posted)
    last_arrival = 2 * b / RATE + LAT
    assert posted[2] == pytest.approx(last_arrival)  # forwarded after both stage-0 arrivals
    assert posted[3] == pytest.approx(7e-6)  # not before its earliest start
    assert phase(res.phases, "dispatch", 3)[1] == pytest.approx(
        max(last_arrival + b / RATE + LAT, 7e-6 + b / RATE + LAT)
    )


def test_local_messages_skip_the_transport_and_bytes_are_counted() -> None:
    tr = trace(
        [
            {"phase": "dispatch", "src_rank": 0, "dst_rank": 0, "bytes": 100, "hop": "local"},
            {"phase": "dispatch", "src_rank": 0, "dst_rank": 1, "bytes": 300},
        ]
    )
    t = FixedTransport()
    res = run_timeline(t.env, t, tr, compute([]), num_ranks=2)
    assert [m for m, _ in t.posted] == [1]
    row = res.phases[(res.phases["rank"] == 0)]
    assert int(row["bytes_out"].iloc[0]) == 400
    assert int(row["bytes_in"].iloc[0]) == 100


def test_undeliverable_message_reports_stalled() -> None:
    class Lossy(FixedTransport):
        def send(self, msg, src_rank, dst_rank, nbytes, hop, on_done):
            self.posted.append((msg, self.env.now))  # never delivered

    tr = trace([{"phase": "dispatch", "src_rank": 0, "dst_rank": 1, "bytes": 10}])
    t = Lossy()
    res = run_timeline(t.env, t, tr, compute([]), num_ranks=2)
    assert res.status == "stalled"
    assert np.isnan(res.end_s[0])


def test_time_limit_stops_the_run() -> None:
    tr = trace([{"phase": "dispatch", "src_rank": 0, "dst_rank": 1, "bytes": 8_000_000}])
    t = FixedTransport()
    res = run_timeline(t.env, t, tr, compute([]), num_ranks=2, time_limit=1e-4)
    assert res.status == "time-limit"
    assert res.sim_time_s == pytest.approx(1e-4)


def test_interrupt_keeps_what_was_done() -> None:
    rows = [
        {"phase": "dispatch", "layer": ly, "src_rank": 0, "dst_rank": 1, "bytes": 8_000}
        for ly in range(50)
    ]
    t = FixedTransport()
    calls = {"n": 0}

    def progress(sim_t: float, events: int | None) -> None:
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt

    res = run_timeline(
        t.env, t, trace(rows), compute([]), num_ranks=2, progress=progress, progress_every=10
    )
    assert res.status == "interrupted"
    done = np.isfinite(res.end_s).sum()
    assert 0 < done < 50
    assert len(res.phases) >= done


def test_loop_leaves_at_the_last_phase_end_and_leaves_later_events() -> None:
    """The run ends at the event that ends the last phase: a timer far in the future (a
    NIC's retransmission timer, a sampler) is neither run nor waited for."""
    from podsim.fabric.kernel import call_later

    b = 8_000
    tr = trace([{"phase": "dispatch", "src_rank": 0, "dst_rank": 1, "bytes": b}])
    t = FixedTransport()
    late = call_later(t.env, 1.0, lambda _a: None)
    res = run_timeline(t.env, t, tr, compute([]), num_ranks=2)
    d = b / RATE + LAT
    assert res.status == "complete"
    assert res.sim_time_s == pytest.approx(d) and t.env.now == pytest.approx(d)
    assert late.pending  # still on the heap, never run


def test_time_going_backward_stops_the_run_with_a_report() -> None:
    """An engine that schedules an event in the past is caught on that very event."""
    from heapq import heappush

    from podsim.fabric.invariants import InvariantViolation
    from podsim.fabric.kernel import Callback

    class Broken(FixedTransport):
        def send(self, msg, src_rank, dst_rank, nbytes, hop, on_done):
            env = self.env

            def backwards(_a):
                ev = Callback(lambda _b: on_done(msg), None)
                heappush(env._queue, (env.now - 1e-6, 1, next(env._eid), ev))

            env.timeout(2e-6).callbacks.append(backwards)

    tr = trace([{"phase": "dispatch", "src_rank": 0, "dst_rank": 1, "bytes": 10}])
    t = Broken()
    with pytest.raises(InvariantViolation) as info:
        run_timeline(t.env, t, tr, compute([]), num_ranks=2)
    assert info.value.check == "time" and info.value.time_s == pytest.approx(2e-6)


def test_progress_cadence_counts_events_and_never_changes_the_run() -> None:
    rows = [
        {"phase": "dispatch", "layer": ly, "src_rank": 0, "dst_rank": 1, "bytes": 8_000}
        for ly in range(40)
    ]
    runs = {}
    for every in (1, 7, 10**9):
        t = FixedTransport()
        calls: list[tuple[float, int | None]] = []
        res = run_timeline(
            t.env, t, trace(rows), compute([]), num_ranks=2,
            progress=lambda s, e, calls=calls: calls.append((s, e)), progress_every=every,
        )  # fmt: skip
        runs[every] = (res, calls)
    ref = runs[10**9][0]
    assert len(runs[10**9][1]) == 2  # start and end only
    for every in (1, 7):
        res, calls = runs[every]
        pd.testing.assert_frame_equal(res.phases, ref.phases, check_exact=True)
        np.testing.assert_array_equal(res.end_s, ref.end_s)
        assert [s for s, _ in calls] == sorted(s for s, _ in calls)  # simulated time grows
    # one call per `every` processed events, plus start and end
    assert len(runs[1][1]) > 7 * (len(runs[7][1]) - 3)


def test_a_forward_does_not_wait_for_a_final_delivery_at_its_rank() -> None:
    """A direct delivery into the forwarder (``final`` 1: DeepEP's own-node traffic) is not
    what it forwards: the forward starts when the RDMA row it carries on has arrived."""
    b = 16_000
    rows = [
        {"phase": "dispatch", "src_rank": 0, "dst_rank": 2, "bytes": b, "stage": 0, "final": 0},
        {"phase": "dispatch", "src_rank": 3, "dst_rank": 2, "bytes": 4 * b, "stage": 0,
         "hop": "scaleup", "final": 1},
        {"phase": "dispatch", "src_rank": 2, "dst_rank": 3, "bytes": b, "stage": 1,
         "hop": "scaleup", "final": 0},
    ]  # fmt: skip
    t = FixedTransport()
    run_timeline(t.env, t, trace(rows), compute([]), num_ranks=4)
    assert dict(t.posted)[2] == pytest.approx(b / RATE + LAT)
    # without the column the forward waits for the long direct delivery as well
    t = FixedTransport()
    run_timeline(t.env, t, trace(rows).drop(columns="final"), compute([]), num_ranks=4)
    assert dict(t.posted)[2] == pytest.approx(4 * b / RATE + LAT)


def play_rounds(phase: str, rows: list[tuple]) -> tuple[FixedTransport, pd.DataFrame]:
    """Play ``rows`` of (src, dst, bytes, stage, chunk, hop) as one ``phase`` on 4 ranks."""
    tr = trace(
        [
            {"phase": phase, "src_rank": s, "dst_rank": d, "bytes": n, "stage": st,
             "chunk": k, "hop": h}
            for s, d, n, st, k, h in rows
        ]
    )  # fmt: skip
    t = FixedTransport()
    run_timeline(t.env, t, tr, compute([]), num_ranks=4)
    return t, tr


def test_chunk_rounds_pipeline_the_forward() -> None:
    """With a ``chunk`` column a forward of round k waits only for round k's arrivals, and the
    rounds of one (src, dst, stage) go in order (DeepEP's pipelined kernels): an rdma round is
    posted right behind the one before (its queue pair keeps them in order), a scale-up round
    after the one before was delivered."""
    b = 16_000
    rows = [
        (0, 2, b, 0, 0, "rdma"),
        (0, 2, b, 0, 1, "rdma"),  # round 1 of 0 -> 2: posted behind its round 0
        (1, 2, 3 * b, 0, 0, "rdma"),
        (2, 3, b, 1, 0, "scaleup"),  # forwards round 0: waits for rows 0 and 2, not for row 1
        (2, 3, b, 1, 1, "scaleup"),  # forwards round 1: after row 1 and its round 0's delivery
    ]
    t, tr = play_rounds("dispatch", rows)
    posted = dict(t.posted)
    d = b / RATE + LAT
    assert posted[1] == 0.0  # not after round 0's delivery (d)
    assert [m for m, _ in t.posted][:2] == [0, 1]  # in round order, at the same instant
    assert posted[3] == pytest.approx(3 * b / RATE + LAT)
    assert posted[4] == pytest.approx(posted[3] + d)
    # without rounds the forward waits for every arrival at rank 2
    t = FixedTransport()
    run_timeline(t.env, t, tr.drop(columns="chunk"), compute([]), num_ranks=4)
    assert dict(t.posted)[3] == pytest.approx(3 * b / RATE + LAT)
    assert dict(t.posted)[4] == pytest.approx(3 * b / RATE + LAT)


def test_an_rdma_round_posts_after_the_round_before_was_posted() -> None:
    """A later rdma round whose own inputs arrive first still waits for the connection's
    earlier round to be posted (a queue pair sends in posting order): the combine's forwarder
    sends the reduced chunk of round 1 only behind round 0."""
    b = 16_000
    rows = [
        (0, 2, 4 * b, 0, 0, "scaleup"),  # round 0's input into forwarder 2: long
        (1, 2, b, 0, 1, "scaleup"),  # round 1's input: short, arrives first
        (2, 3, b, 1, 0, "rdma"),
        (2, 3, b, 1, 1, "rdma"),
    ]
    t, _ = play_rounds("combine", rows)
    posted = dict(t.posted)
    assert posted[2] == pytest.approx(4 * b / RATE + LAT)
    assert posted[3] == posted[2]  # its input was there at b / RATE + LAT: it waited for round 0
    assert [m for m, _ in t.posted][-2:] == [2, 3]
