"""``none``: no congestion control; every flow sends at line rate with no window."""

from __future__ import annotations

from podsim.nic.congestion.api import CongestionControl
from podsim.nic.congestion.registry import CC_ALGORITHMS

__all__ = ["NoCC"]


@CC_ALGORITHMS.register("none", "no congestion control: line rate, unlimited window")
class NoCC(CongestionControl):
    """Line rate, no window: the baseline that shows what congestion control buys."""

    name = "none"
