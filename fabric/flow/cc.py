"""Congestion control in the flow engine: one efficiency factor per algorithm.

A fluid max-min allocation is what an ideal congestion control converges to. A real one
oscillates around it: DCQCN cuts its rate on ECN marks and climbs back in timer steps, HPCC
aims at ``eta = 0.95`` of a link (physics.md "Congestion control" [S]), delay-based schemes
(TIMELY, Swift) keep a standing queue and back off on RTT noise. The flow engine therefore
lets a *shared* fabric queue (a switch egress or bundle crossed by two or more flows) deliver
``efficiency x capacity`` (:class:`fabric.flow.sim.FlowSim`, ``eta``). A flow alone on its path
is not slowed: every algorithm here starts at line rate.

The table is what ``benchmarks/calibrate_cc.py`` measures: it runs an incast and a permutation
on the packet engine with the SmartNIC transport under each algorithm and divides the ideal
(max-min, eta = 1) completion time by the measured one. Values marked [E] are estimates used
until a calibration is run on this tree (HPCC's is its own target utilisation, physics.md [S]);
re-run the script and paste its table here after changing the NIC or switch models. Unknown
algorithms (plug-ins) get 1.0 unless a value is passed to the engine.
"""

from __future__ import annotations

__all__ = ["CC_EFFICIENCY", "cc_efficiency"]

#: algorithm name (nic.congestion registry) -> efficiency of a shared fabric queue, in (0, 1].
CC_EFFICIENCY: dict[str, float] = {
    "none": 1.0,  # line-rate senders: the queue never drains below full (lossless ideal)
    "dcqcn": 0.90,  # [E] rate cuts on ECN, timer-driven recovery
    "hpcc": 0.95,  # [S] eta = 0.95 target utilisation (physics.md)
    "timely": 0.85,  # [E] RTT-gradient noise
    "swift": 0.90,  # [E] delay target 20 us keeps a standing queue, AI 1 / MD 0.8
    "nscc": 0.93,  # [E] UEC NSCC: window, target delay = base RTT
    "rccc": 0.97,  # [E] receiver credits: little loss of utilisation in incast
}


def cc_efficiency(name: str, override: float | None = None) -> float:
    """The efficiency of algorithm ``name`` (``override`` wins; unknown names give 1.0)."""
    eff = CC_EFFICIENCY.get(name, 1.0) if override is None else float(override)
    if not 0 < eff <= 1:
        raise ValueError(f"CC efficiency for {name!r} is {eff!r}; expected a value in (0, 1]")
    return eff
