"""The composition layer: a scenario file becomes a cluster, a run and a report.

The subpackages follow the data flow of one run (``podsim.run`` drives them in this order):

- :mod:`~podsim.scenarios.input`: the scenario file (schema, loader with ``include:``/variants/
  ``--set``, the registries the names are checked against, ``podsim docs``);
- :mod:`~podsim.scenarios.build`: the cluster (topology, node PCIe trees, switches, NICs) and the
  workload trace, and the up-front resource limits;
- :mod:`~podsim.scenarios.execution`: what every simulating engine runs (the per-rank timeline
  of the workload, and a packet run's faults and invariant checks);
- :mod:`~podsim.scenarios.engines`: the engines behind one registry (``packet``, ``flow``,
  ``bound``), each declaring what it models;
- :mod:`~podsim.scenarios.results`: the result tables, the summary, saved folders, the straggler
  and bubble analysis;
- :mod:`~podsim.scenarios.report`: figures and the HTML report;
- :mod:`~podsim.scenarios.cost`: bill of materials and cost;
- :mod:`~podsim.scenarios.study`: what-if studies (sweeps);
- :mod:`~podsim.scenarios.cli`: the ``podsim`` command.

The models themselves live below this layer, in :mod:`podsim.fabric`, :mod:`podsim.nic` and
:mod:`podsim.workloads`; this package only composes them. The Python API is on :mod:`podsim`.
"""
