"""Congestion control in the flow engine: one efficiency factor per algorithm.

A fluid max-min allocation is what an ideal congestion control converges to. A real one
oscillates around it: DCQCN cuts its rate on ECN marks and climbs back in timer steps, HPCC
aims at ``eta = 0.95`` of a link (docs/physics.md "Congestion control" [S]), delay-based schemes
(TIMELY, Swift) keep a standing queue and back off on RTT noise. The flow engine therefore
lets a *shared* fabric queue (a switch egress or bundle crossed by two or more flows) deliver
``efficiency x capacity`` (:class:`fabric.flow.sim.FlowSim`, ``eta``). A flow alone on its path
is not slowed: every algorithm here starts at line rate.

The table is what ``benchmarks/calibrate_cc.py`` measures: it runs an incast (8 RDMA senders
into one 400G link) and a 32-rank all-to-all on the packet engine with the SmartNIC transport
under each algorithm and divides the ideal (max-min, efficiency 1) completion time of the flow
engine by the measured one, clipped to 1; the value is the geometric mean of the two. Measured
on this tree with ``python benchmarks/calibrate_cc.py`` (1 MiB messages, spraying, seed 1):
incast 1.000 for every algorithm but NSCC (0.986) and RCCC (0.983), all-to-all 0.952 (RCCC
0.826). The incast shows that as long as the bottleneck never idles the algorithm does not
change the completion time; the all-to-all's 5 % is mostly the fluid model itself (it charges
every flow its full path latency after its transfer, and the packet engine's per-port round
robin differs from exact max-min). Re-run the script after changing the NIC or switch models
and paste its table here. A re-run on 2026-12-04 (after ACK bytes were charged to the reverse
links and DCQCN's clamp rule was fixed) gives 0.984 for every algorithm but RCCC (0.906):
incast 1.000 (RCCC 0.983), all-to-all 0.969 (RCCC 0.834); the table keeps the earlier values,
with which the README's flow-engine figures were measured (0.8 % apart, inside
``benchmarks/validate_engines.py``'s errors), until those figures are re-measured. Unknown
algorithms (plug-ins) get 1.0 unless a value is passed to the engine.
"""

from __future__ import annotations

__all__ = ["CC_EFFICIENCY", "cc_efficiency"]

#: algorithm name (nic.congestion registry) -> efficiency of a shared fabric queue, in (0, 1].
CC_EFFICIENCY: dict[str, float] = {
    "none": 0.976,
    "dcqcn": 0.976,
    "hpcc": 0.976,
    "timely": 0.976,
    "swift": 0.976,
    "nscc": 0.969,
    "rccc": 0.901,
}


def cc_efficiency(name: str, override: float | None = None) -> float:
    """The efficiency of algorithm ``name`` (``override`` wins; unknown names give 1.0)."""
    eff = CC_EFFICIENCY.get(name, 1.0) if override is None else float(override)
    if not 0 < eff <= 1:
        raise ValueError(f"CC efficiency for {name!r} is {eff!r}; expected a value in (0, 1]")
    return eff
