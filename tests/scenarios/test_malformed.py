"""Fifty-odd malformed scenario files, generated from a table of (mutation, expected key).

Each must give a one-paragraph error that names the key (or, for YAML syntax, the line), exit
with status 2 and show no traceback. The files are written from the valid ``base_doc`` with one
mutation each, and checked through the real command (``podsim validate``).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from podsim.scenarios.cli.app import app
from typer.testing import CliRunner

from tests.scenarios.conftest import base_doc, write_trace_csv

DELETE = object()


def setp(path: str, value: Any) -> Callable[[dict], dict]:
    """Mutation: set (or with DELETE remove) a dotted key of the document."""

    def mutate(doc: dict) -> dict:
        node = doc
        keys = path.split(".")
        for k in keys[:-1]:
            node = node.setdefault(k, {})
        if value is DELETE:
            node.pop(keys[-1], None)
        else:
            node[keys[-1]] = copy.deepcopy(value)
        return doc

    return mutate


def moe(**kw: Any) -> Callable[[dict], dict]:
    """Mutation: an MoE workload (valid defaults) with ``kw`` changed."""

    def mutate(doc: dict) -> dict:
        m = {"model": "deepseek-v3", "ep_size": 4, "tokens_per_rank": 16, **kw}
        doc["workload"] = {"moe": m}
        return doc

    return mutate


def both(*fns: Callable[[dict], dict]) -> Callable[[dict], dict]:
    def mutate(doc: dict) -> dict:
        for f in fns:
            doc = f(doc)
        return doc

    return mutate


def text(raw: str) -> str:
    return raw


# (id, mutation or raw YAML text, substrings the error must contain)
CASES: list[tuple[str, Any, tuple[str, ...]]] = [
    # unknown names (registries, did-you-mean)
    ("cc-name", setp("cluster.nic.cc.name", "dcqc"), ("cluster.nic.cc.name", "'dcqcn'")),
    (
        "selector",
        setp("cluster.nic.multipath.selector", "sprya"),
        ("cluster.nic.multipath.selector", "'spray'"),
    ),
    (
        "topology",
        setp("cluster.topology.name", "leaf-spin"),
        ("cluster.topology.name", "'leaf-spine'"),
    ),
    (
        "preset",
        both(setp("cluster.topology", DELETE), setp("cluster.preset", "h800-deepp")),
        ("cluster.preset", "'h800-deepep'"),
    ),
    ("model", moe(model="deepseek-v4"), ("workload.moe.model", "deepseek-v3")),
    ("mode", moe(mode="deepep-fast"), ("workload.moe.mode",)),
    ("placement", moe(placement="round_robin"), ("workload.moe.placement", "'round-robin'")),
    ("skew", moe(skew={"kind": "zipfian"}), ("workload.moe.skew.kind", "'zipf'")),
    ("engine", setp("engine", "flwo"), ("engine", "'flow'")),
    ("phy", setp("cluster.nic.phy", "400GE"), ("cluster.nic.phy", "'400GbE'")),
    ("layout", setp("cluster.layout", "on-card"), ("cluster.layout", "'on-card-switch'")),
    ("rank-map", setp("cluster.rank_map", "by_node"), ("cluster.rank_map", "'by-node'")),
    (
        "pattern",
        setp("workload", {"synthetic": {"pattern": "alltoall"}}),
        ("workload.synthetic.pattern",),
    ),
    # unknown keys (did-you-mean from the model's fields)
    ("key-nic", setp("cluster.nic.rat", 5), ("cluster.nic.rat", "'rate'")),
    ("key-top", setp("workloads", {}), ("workloads", "'workload'")),
    ("key-ecn", setp("cluster.switch.ecn.kmn", "1KB"), ("cluster.switch.ecn.kmn", "'kmin'")),
    ("key-sim", setp("sim.sample_intervall", "1us"), ("sim.sample_intervall", "'sample_interval'")),
    ("key-out", setp("outputs.plot", True), ("outputs.plot", "'plots'")),
    ("key-moe", moe(token_per_rank=4), ("workload.moe.token_per_rank", "'tokens_per_rank'")),
    ("key-cc", setp("cluster.nic.cc.param", {}), ("cluster.nic.cc.param", "'params'")),
    # bad units and values
    ("rate-unit", setp("cluster.nic.rate", "400Gbs"), ("cluster.nic.rate", "400Gbs")),
    ("rate-zero", setp("cluster.nic.rate", "0Gbps"), ("cluster.nic.rate",)),
    ("mtu-not-roce", setp("cluster.nic.mtu", "4KB"), ("cluster.nic.mtu", "RoCE")),
    ("mtu-word", setp("cluster.nic.mtu", "four"), ("cluster.nic.mtu", "four")),
    (
        "buffer-negative",
        setp("cluster.switch.buffer", "-1MiB"),
        ("cluster.switch.buffer", "negative"),
    ),
    ("latency-unit", setp("cluster.switch.latency", "600 parsecs"), ("cluster.switch.latency",)),
    ("latency-negative", setp("cluster.switch.latency", -1), ("cluster.switch.latency",)),
    ("latency-bool", setp("cluster.switch.latency", True), ("cluster.switch.latency", "boolean")),
    ("sample-zero", setp("sim.sample_interval", "0s"), ("sim.sample_interval",)),
    ("pps-unit", setp("cluster.nic.packet_rate", "400Mbps"), ("cluster.nic.packet_rate",)),
    (
        "size-fraction",
        setp("workload", {"synthetic": {"pattern": "uniform", "size": "1.5B"}}),
        ("workload.synthetic.size",),
    ),
    # negative or zero counts, wrong types
    ("tokens-negative", moe(tokens_per_rank=-5), ("workload.moe.tokens_per_rank",)),
    ("ep-zero", moe(ep_size=0), ("workload.moe.ep_size",)),
    ("ep-string", moe(ep_size="16"), ("workload.moe.ep_size",)),
    ("layers-float", moe(layers=1.5), ("workload.moe.layers",)),
    (
        "max-mean-low",
        moe(skew={"kind": "lognormal", "max_mean": 0.5}),
        ("workload.moe.skew.max_mean",),
    ),
    ("seed-negative", setp("seed", -1), ("seed",)),
    ("seed-string", setp("seed", "abc"), ("seed",)),
    ("paths-zero", setp("cluster.nic.multipath.paths", 0), ("cluster.nic.multipath.paths",)),
    ("pmax", setp("cluster.switch.ecn.pmax", 1.5), ("cluster.switch.ecn.pmax",)),
    (
        "ecn-order",
        setp("cluster.switch.ecn", {"kmin": "2MB", "kmax": "1MB"}),
        ("cluster.switch.ecn", "kmin"),
    ),
    (
        "pfc-order",
        setp("cluster.switch.pfc", {"enabled": True, "xoff": "1MB", "xon": "2MB"}),
        ("cluster.switch.pfc", "xon"),
    ),
    (
        "reliability",
        setp("cluster.nic.reliability", "gbn"),
        ("cluster.nic.reliability", "go-back-n"),
    ),
    ("formats", setp("outputs.formats", ["xlsx"]), ("outputs.formats[0]",)),
    ("cc-not-mapping", setp("cluster.nic.cc", "dcqcn"), ("cluster.nic.cc",)),
    ("name-slash", setp("name", "a/b"), ("name",)),
    ("cell-needs-host", setp("sim.cell", "64KiB"), ("sim", "endpoint")),
    # structure
    (
        "trace-missing",
        setp("workload.trace.path", "missing.csv"),
        ("workload.trace.path", "missing.csv"),
    ),
    ("workload-empty", setp("workload", {}), ("workload", "exactly one")),
    (
        "workload-two",
        setp("workload.synthetic", {"pattern": "uniform"}),
        ("workload", "exactly one"),
    ),
    ("cluster-nothing", setp("cluster", {"nic": {}}), ("cluster", "exactly one")),
    ("cluster-missing", setp("cluster", DELETE), ("cluster", "missing")),
    (
        "fault-link",
        setp("faults", [{"kind": "link_down", "link": ["a"], "at": "1us"}]),
        ("faults[0].link",),
    ),
    ("fault-kind", setp("faults", [{"kind": "explode"}]), ("faults[0]", "explode")),
    (
        "fault-window",
        setp("faults", [{"kind": "link_down", "link": ["a", "b"], "at": "5us", "until": "1us"}]),
        ("faults[0]", "until"),
    ),
    (
        "variant-unknown",
        both(setp("variants", {"big": {"seed": 2}}), setp("variant", "bgi")),
        ("variant", "'big'"),
    ),
    ("include-missing", setp("include", "nowhere.yaml"), ("include", "nowhere.yaml")),
    # the build step (topology builder) rejects a parameter
    (
        "topology-param",
        setp("cluster.topology.params", {"hosts": -3}),
        ("cluster.topology.params", "hosts"),
    ),
    (
        "topology-unknown-param",
        setp("cluster.topology.params", {"hostz": 4}),
        ("cluster.topology.params", "hostz"),
    ),
    ("nic-phy-mismatch", setp("cluster.nic.phy", "800GbE"), ("cluster.nic.phy", "400GbE")),
    ("nic-rate-mismatch", setp("cluster.nic.rate", "200Gbps"), ("cluster.nic.rate", "400Gbps")),
    ("too-many-ranks", moe(ep_size=64), ("workload.moe.ep_size", "4 GPUs")),
    # raw YAML problems
    ("yaml-bracket", text("name: x\ncluster: {topology: [\n"), ("YAML syntax error", "line")),
    ("yaml-tab", text("name: x\ncluster:\n\ttopology: star\n"), ("YAML syntax error", "line 3")),
    ("yaml-duplicate", text("name: x\nname: y\n"), ("duplicate key", "line 2")),
    ("yaml-list", text("- a\n- b\n"), ("mapping",)),
    ("yaml-colon", text("name: x\ncluster: a: b\n"), ("YAML syntax error", "line 2")),
]


def test_at_least_fifty_cases() -> None:
    assert len(CASES) >= 50
    assert len({c[0] for c in CASES}) == len(CASES)


@pytest.mark.parametrize(("case", "mutation", "expected"), CASES, ids=[c[0] for c in CASES])
def test_malformed_file_gives_clean_error(
    tmp_path: Path, case: str, mutation: Any, expected: tuple[str, ...]
) -> None:
    write_trace_csv(tmp_path / "trace.csv")
    path = tmp_path / f"{case}.yaml"
    if isinstance(mutation, str):
        path.write_text(mutation)
    else:
        path.write_text(yaml.safe_dump(mutation(base_doc()), sort_keys=False))
    result = CliRunner().invoke(app, ["validate", str(path)])
    out = result.output
    assert result.exit_code == 2, out
    assert "Traceback" not in out
    assert out.startswith("error: "), out
    body = out.strip()
    assert "\n" not in body, f"not one paragraph:\n{out}"
    assert str(path) in body or "command line" in body
    for piece in expected:
        assert piece in body, f"{piece!r} missing from: {body}"
    assert isinstance(result.exception, SystemExit)
