"""podsim's SmartNIC: RDMA transport, multipath, programmable congestion control, PCIe.

The NIC sits on the packet fabric (:mod:`fabric`): one :class:`SmartNic` per NIC card, one
fabric endpoint per plane. What lives where:

* :mod:`podsim.nic.nic` -- :class:`SmartNic` (TX scheduling through the ports' pull interface,
  pacing, packet-rate pipeline, receive path) and :class:`RdmaNetwork`, the runner-facing API:
  build NICs on a :class:`podsim.fabric.network.Network`, post messages or a whole workload trace,
  run, and read per-message / per-QP / per-NIC tables (pandas). :class:`NicConfig` holds every
  transport parameter; :data:`NIC_MODELS` names presets.
* :mod:`podsim.nic.transport` -- queue pairs and segmentation (``qp``, ``segmentation``),
  ACK/SACK/NACK, RACK loss detection, tail-loss probes and RTO, go-back-N and selective repeat
  with a bounded reorder buffer (``reliability``), path selectors by entropy value
  (``selectors``: ``PATH_SELECTORS`` = ecmp, spray, bitmap, reps, adaptive) and the packet-rate
  pipeline with its QP-context cache (``pipeline``).
* :mod:`podsim.nic.congestion` -- the DOCA-PCC-style plug-in API and the built-in algorithms
  (``CC_ALGORITHMS``), the DCQCN CNP generator and RCCC receiver credits.
* :mod:`podsim.nic.pcie` -- the on-card PCIe switch and node layouts; its per-NIC DMA share caps the
  NIC through :meth:`SmartNic.set_pcie_rate_cap`.

Quick start::

    import simpy
    from podsim.fabric.network import Network
    from podsim.fabric.topology import build_topology
    from podsim.nic import NicConfig, RdmaNetwork

    env = simpy.Environment()
    net = Network(env, build_topology("leaf-spine", hosts_per_leaf=4, leaves=2), seed=1)
    rdma = RdmaNetwork(net, NicConfig(cc="dcqcn", selector="spray"), seed=1)
    rdma.post(0, 5, 1 << 20)          # 1 MiB RDMA WRITE from NIC card 0 to card 5
    rdma.run()
    print(rdma.message_table())
"""

from __future__ import annotations

from podsim.nic.congestion import CC_ALGORITHMS
from podsim.nic.nic import NIC_MODELS, NicConfig, RdmaNetwork, SmartNic, nic_model
from podsim.nic.transport.selectors import PATH_SELECTORS

__all__ = [
    "CC_ALGORITHMS",
    "NIC_MODELS",
    "PATH_SELECTORS",
    "NicConfig",
    "RdmaNetwork",
    "SmartNic",
    "nic_model",
]
