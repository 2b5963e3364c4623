"""podsim: a discrete-event simulator of AI-cluster fabrics.

The repository's top-level folders install as one import root::

    podsim.fabric      the network substrate (PHY, packets, ports, switches, routing, topologies,
                       flow engine core, faults, invariants)
    podsim.nic         the SmartNIC (RDMA transport, multipath, congestion control, PCIe)
    podsim.workloads   NumPy MoE kernels, model presets, traffic traces, synthetic patterns
    podsim.scenarios   scenario files -> cluster -> engine -> results -> report, cost, studies, CLI

The notebook API::

    import podsim
    res = podsim.run("quickstart")               # a file path, built-in name, dict or Scenario
    res.messages, res.phases, res.links, res.qps, res.queues, res.summary
    sc, _ = podsim.load_scenario("deepep-h800", ["variant=ep32"])
    res = podsim.load("results/quickstart")      # a saved result folder

Attributes load lazily so that ``import podsim`` (and ``podsim --help``) stays cheap.
"""

from __future__ import annotations

from typing import Any

from podsim.fabric import compiled as _compiled

__version__ = "0.2.0"

# the optional compiled packet engine runs only while built from the current sources
# (podsim.fabric.compiled; PODSIM_PURE_PYTHON=1 forces pure Python)
_compiled.install()

__all__ = ["Results", "Scenario", "ScenarioError", "__version__", "load", "load_scenario", "run"]

_LAZY = {
    "run": ("podsim.scenarios.runner", "run"),
    "load": ("podsim.scenarios.results.tables", "Results.read"),
    "Results": ("podsim.scenarios.results.tables", "Results"),
    "Scenario": ("podsim.scenarios.input.schema", "Scenario"),
    "ScenarioError": ("podsim.scenarios.errors", "ScenarioError"),
    "load_scenario": ("podsim.scenarios.input.loader", "load_scenario"),
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        value: Any = importlib.import_module(module)
        for part in attr.split("."):
            value = getattr(value, part)
        return value
    raise AttributeError(f"module 'podsim' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
