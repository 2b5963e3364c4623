"""qps.paths_used is measured: the distinct entropy values (paths) a QP's data packets used."""

from __future__ import annotations

import podsim

SETS = ["workload.synthetic.size=256KiB", "outputs.plots=false"]


def test_spraying_uses_many_paths_and_ecmp_one() -> None:
    spray = podsim.run("spray-vs-ecmp", overrides=[*SETS, "variant=spray"]).qps
    ecmp = podsim.run("spray-vs-ecmp", overrides=[*SETS, "variant=ecmp"]).qps
    assert len(spray) and len(ecmp)
    assert (ecmp["paths_used"] == 1).all()
    # round-robin spraying over 256 EVs: a QP of n packets uses min(n, 256) distinct values
    want = spray["packets"].clip(upper=256)
    assert (spray["paths_used"] == want).all(), spray[["packets", "paths_used"]]
    assert (spray["paths_used"] > 1).all()


def test_acked_s_is_one_ack_trip_after_the_receiver_held_the_message() -> None:
    """qps.acked_s (the SmartNIC's sender-side completion, what htsim's "finished at" is
    compared with) comes after the receiver held the QP's last byte (messages.end_s) by one
    ACK's trip back: positive, and under 5 us on this two-tier fabric at light load."""
    r = podsim.run("spray-vs-ecmp", overrides=[*SETS, "variant=ecmp"])
    last = r.messages.groupby(["src_rank", "dst_rank"])["end_s"].max().rename("end_s")
    j = r.qps.join(last, on=["src_rank", "dst_rank"])
    assert len(j) and j["end_s"].notna().all()
    lag = j["acked_s"] - j["end_s"]
    assert (lag > 0).all() and (lag < 5e-6).all(), lag.describe()
