"""RDMA transport of the SmartNIC: queue pairs, segmentation, reliability, path selection and the
packet-rate pipeline (see each module's docstring for its model and sources)."""

from __future__ import annotations

from podsim.nic.transport.selectors import PATH_SELECTORS, PathSelector, make_selector

__all__ = ["PATH_SELECTORS", "PathSelector", "make_selector"]
