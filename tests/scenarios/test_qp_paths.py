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
