"""Robust input, property-based (hypothesis): every valid scenario runs, every invalid one is
a clean error.

* Valid scenarios are drawn from a small space (star or leaf-spine, NIC or line-rate host
  endpoint, every CC and path selector, MTUs, synthetic patterns or a generated trace file,
  optional faults and stragglers) at tiny sizes; each runs to a clean end and passes the
  invariant checks.
* Invalid scenarios are valid ones with one mutation that is always wrong (an unknown key, a
  value of the wrong type, a quantity with a bad unit, a negative size); ``podsim validate``
  must exit with status 2 and a one-paragraph message naming the key, without a traceback.
* Trace files with corrupt content (missing columns, garbage cells, NaN, negative or
  out-of-range values, unknown phases/hops, random bytes, empty files) are clean errors naming
  ``workload.trace.path``; valid random traces run.
* A user congestion-control plug-in that sets NaN or negative rates/windows stops the run with
  a clear error naming the plug-in, the handler and the time (exit 2).
"""

from __future__ import annotations

import copy
import tempfile
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import podsim
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from podsim.scenarios.cli.app import app
from typer.testing import CliRunner

FAST = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    derandomize=True,
)
RUNS = settings(FAST, max_examples=5)  # each example is a whole simulation

CCS = ["dcqcn", "hpcc", "none", "nscc", "rccc", "swift", "timely"]
SELECTORS = ["ecmp", "spray", "reps", "bitmap", "adaptive"]
TRACE_COLS = ["step", "layer", "phase", "src_rank", "dst_rank", "bytes", "tokens", "start_s",
              "hop"]  # fmt: skip


def write_trace(path: Path, ranks: int, rng: np.random.Generator, rows: int = 12) -> Path:
    src = rng.integers(0, ranks, rows)
    dst = rng.integers(0, ranks, rows)
    df = pd.DataFrame(
        {
            "step": 0,
            "layer": 0,
            "phase": rng.choice(["dispatch", "combine"], rows),
            "src_rank": src,
            "dst_rank": dst,
            "bytes": rng.integers(1, 20_000, rows),
            "tokens": rng.integers(0, 8, rows),
            "start_s": rng.choice([0.0, 1e-6], rows),
            "hop": np.where(src == dst, "local", "rdma"),
        }
    )
    df.to_csv(path, index=False)
    return path


@st.composite
def valid_docs(draw: st.DrawFn) -> dict[str, Any]:
    """A valid, tiny scenario (the trace file, when used, is written by the test)."""
    leaf_spine = draw(st.booleans())
    if leaf_spine:
        topo = {"name": "leaf-spine", "params": {"hosts_per_leaf": 2, "leaves": 2}}
        ranks, links = 4, [["leaf0", "spine0"], ["leaf1", "spine1"], ["nic0.p0", "leaf0"]]
    else:
        hosts = draw(st.integers(2, 4))
        topo = {"name": "star", "params": {"hosts": hosts}}
        ranks, links = hosts, [["nic0.p0", "leaf0"], ["nic1.p0", "leaf0"]]
    endpoint = draw(st.sampled_from(["nic", "host"]))
    sel = draw(st.sampled_from(SELECTORS))
    doc: dict[str, Any] = {
        "name": "prop",
        "seed": draw(st.integers(0, 2**31 - 1)),
        "engine": "packet",
        "cluster": {
            "topology": topo,
            "nic": {
                "mtu": draw(st.sampled_from(["1KiB", "2KiB", "4KiB", 4096])),
                "cc": {"name": draw(st.sampled_from(CCS))},
                "multipath": {"selector": sel, "paths": 1 if sel == "ecmp" else 16},
                "reliability": draw(st.sampled_from(["selective-repeat", "go-back-n"])),
            },
            "routing": {"reconvergence": draw(st.sampled_from(["0s", "5us", "1ms"]))},
        },
        "sim": {"endpoint": endpoint, "sample_interval": "2us", "time_limit": "2ms"},
        "outputs": {"formats": ["parquet"], "plots": False},
    }
    if draw(st.booleans()):
        compute = draw(st.sampled_from(["0s", "1us"]))
        doc["workload"] = {"trace": {"path": "trace.csv", "ranks": ranks, "compute_time": compute}}
    else:
        doc["workload"] = {
            "synthetic": {
                "pattern": draw(st.sampled_from(["uniform", "permutation", "incast"])),
                "size": draw(st.sampled_from(["4KiB", "10000", "32KiB"])),
            }
        }
    faults = []
    if draw(st.booleans()):
        link = draw(st.sampled_from(links))
        at = draw(st.sampled_from(["0s", "1us", "3us"]))
        faults.append({"kind": "link_down", "link": link, "at": at, "until": "20us"})
    if draw(st.booleans()):
        faults.append({"kind": "ber", "link": draw(st.sampled_from(links)),
                       "pre_fec_ber": draw(st.sampled_from([1e-4, 1e-3])),
                       "llr": draw(st.booleans())})  # fmt: skip
    if draw(st.booleans()):
        faults.append({"kind": "straggler", "rank": draw(st.integers(0, ranks - 1)),
                       "factor": draw(st.floats(1.0, 4.0))})  # fmt: skip
    if faults:
        doc["faults"] = faults
    return doc


def materialise(doc: dict[str, Any], folder: Path) -> Path:
    if "trace" in doc["workload"]:
        write_trace(folder / "trace.csv", doc["workload"]["trace"]["ranks"],
                    np.random.default_rng(doc["seed"]))  # fmt: skip
    path = folder / "scenario.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def run_valid(doc: dict[str, Any]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = materialise(doc, Path(tmp))
        res = podsim.run(path)  # invariant checks on: a violation would raise
    s = res.summary
    assert s["status"] in ("complete", "stalled", "time-limit"), s["status"]
    info = s["engine_info"]
    assert info["invariant_checks"] >= 1
    unfinished = s["messages"]["unfinished"]
    # whatever did not complete failed with a reason (the final check guarantees it)
    assert unfinished == 0 or len(info.get("failed_messages", [])) >= 1


@RUNS
@given(doc=valid_docs())
def test_every_valid_scenario_runs(doc: dict[str, Any]) -> None:
    run_valid(doc)


@pytest.mark.slow
@settings(RUNS, max_examples=60, derandomize=False)
@given(doc=valid_docs())
def test_every_valid_scenario_runs_many(doc: dict[str, Any]) -> None:
    run_valid(doc)


# --------------------------------------------------------------------------- invalid


def _paths(node: Any, prefix: tuple = ()) -> list[tuple]:
    """Every key path of the document, except inside free-form ``params`` mappings."""
    out = []
    if isinstance(node, dict):
        for k, v in node.items():
            if k in ("params", "cost"):
                continue
            out.append((*prefix, k))
            out.extend(_paths(v, (*prefix, k)))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            if isinstance(v, dict):
                out.extend(_paths(v, (*prefix, i)))
    return out


def _get(doc: Any, path: tuple) -> Any:
    for k in path:
        doc = doc[k]
    return doc


def _dotted(path: tuple) -> str:
    out = ""
    for k in path:
        out += f"[{k}]" if isinstance(k, int) else (("." if out else "") + str(k))
    return out


QUANTITIES = {"mtu", "size", "sample_interval", "time_limit", "reconvergence", "at", "until",
              "compute_time"}  # fmt: skip


@st.composite
def invalid_docs(draw: st.DrawFn) -> tuple[dict[str, Any], str]:
    """A valid document with one always-wrong mutation, and the key path the error must name."""
    doc = copy.deepcopy(draw(valid_docs()))
    paths = _paths(doc)
    kind = draw(st.sampled_from(["unknown", "type", "unit", "negative"]))
    if kind == "unknown":
        parents = [()] + [p for p in paths if isinstance(_get(doc, p), dict)]
        parent = draw(st.sampled_from(parents))
        key = "zz_" + draw(st.text("abcdefgh_", min_size=1, max_size=8))
        _get(doc, parent)[key] = 1
        return doc, _dotted((*parent, key))
    if kind == "type":
        leaves = [p for p in paths if not isinstance(_get(doc, p), dict | list)]
        p = draw(st.sampled_from(leaves))
        _get(doc, p[:-1])[p[-1]] = {"not": ["a", "scalar"]}
        return doc, _dotted(p)
    quantities = [p for p in paths if p[-1] in QUANTITIES]
    p = draw(st.sampled_from(quantities))
    if kind == "unit":
        _get(doc, p[:-1])[p[-1]] = f"{draw(st.integers(1, 99))} parsecs"
    else:
        _get(doc, p[:-1])[p[-1]] = f"-{draw(st.integers(1, 99))}KiB" if p[-1] in (
            "mtu", "size") else f"-{draw(st.integers(1, 99))}us"  # fmt: skip
    return doc, _dotted(p)


def validate(path: Path) -> Any:
    return CliRunner().invoke(app, ["validate", str(path)])


@FAST
@given(case=invalid_docs())
def test_every_invalid_scenario_is_a_clean_error(case: tuple[dict[str, Any], str]) -> None:
    doc, key = case
    with tempfile.TemporaryDirectory() as tmp:
        path = materialise(doc, Path(tmp))
        r = validate(path)
    assert r.exit_code == 2, (key, r.output)
    out = " ".join(r.output.split())
    assert "Traceback" not in out and "internal error" not in out
    assert key in out or key.split("[")[0] in out, (key, out)


# --------------------------------------------------------------------------- traces


def trace_doc(folder: Path, name: str = "trace.csv") -> Path:
    doc = {
        "name": "t",
        "cluster": {"topology": {"name": "star", "params": {"hosts": 4}}},
        "workload": {"trace": {"path": name, "ranks": 4}},
        "sim": {"time_limit": "1ms"},
        "outputs": {"formats": ["parquet"], "plots": False},
    }
    p = folder / "scenario.yaml"
    p.write_text(yaml.safe_dump(doc))
    return p


def good_trace(rng: np.random.Generator) -> pd.DataFrame:
    df = pd.read_csv(write_trace(Path(tempfile.mkstemp(suffix=".csv")[1]), 4, rng))
    return df


CORRUPTIONS = ["drop_column", "garbage_cell", "nan_bytes", "negative", "rank_range",
               "bad_phase", "bad_hop", "inf_start"]  # fmt: skip


@FAST
@given(
    how=st.sampled_from(CORRUPTIONS),
    column=st.sampled_from(["step", "layer", "phase", "src_rank", "dst_rank", "bytes", "hop"]),
    row=st.integers(0, 11),
    seed=st.integers(0, 1000),
)
def test_corrupt_trace_content_is_a_clean_error(how: str, column: str, row: int, seed: int):
    rng = np.random.default_rng(seed)
    df = good_trace(rng).astype(object)
    numeric = ["step", "layer", "src_rank", "dst_rank", "bytes"]
    if how == "drop_column":
        df = df.drop(columns=[column])
    elif how == "garbage_cell":
        df.loc[row, column if column in numeric else "bytes"] = "12abc"
    elif how == "nan_bytes":
        df.loc[row, "bytes"] = np.nan
    elif how == "negative":
        df.loc[row, column if column in numeric else "bytes"] = -5
    elif how == "rank_range":
        df.loc[row, "dst_rank"] = 4 + row
    elif how == "bad_phase":
        df.loc[row, "phase"] = "warmup"
    elif how == "bad_hop":
        df.loc[row, "hop"] = "carrier-pigeon"
    else:
        df.loc[row, "start_s"] = "inf"
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        df.to_csv(folder / "trace.csv", index=False)
        r = validate(trace_doc(folder))
    assert r.exit_code == 2, (how, column, r.output)
    assert "workload.trace" in r.output and "Traceback" not in r.output


@settings(FAST, max_examples=25)
@given(data=st.binary(min_size=0, max_size=300), suffix=st.sampled_from([".csv", ".parquet"]))
def test_random_bytes_as_trace_file_are_a_clean_error(data: bytes, suffix: str):
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / f"trace{suffix}").write_bytes(data)
        r = validate(trace_doc(folder, f"trace{suffix}"))
    # random bytes can spell a valid empty CSV only by luck; they must never crash
    assert r.exit_code in (0, 2), r.output
    assert "Traceback" not in r.output and "internal error" not in r.output
    if r.exit_code == 2:
        assert "workload.trace" in r.output


@settings(RUNS, max_examples=4)
@given(seed=st.integers(0, 10_000))
def test_random_valid_traces_run(seed: int):
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        write_trace(folder / "trace.csv", 4, np.random.default_rng(seed))
        res = podsim.run(trace_doc(folder))
    assert res.summary["status"] == "complete"
    assert res.summary["messages"]["unfinished"] == 0


# --------------------------------------------------------------------------- CC plug-ins

PLUGIN = textwrap.dedent(
    """
    from podsim.nic.congestion import CongestionControl

    class NanRate(CongestionControl):
        def on_ack(self, ev, flow):
            flow.rate_bps = float("nan")

    class NegativeRate(CongestionControl):
        def on_ack(self, ev, flow):
            flow.rate_bps = -1e9

    class NegativeWindow(CongestionControl):
        def on_ack(self, ev, flow):
            flow.window_bytes = -4096
    """
)


@pytest.mark.parametrize(
    ("cls", "text"),
    [("NanRate", "rate_bps=nan"), ("NegativeRate", "rate_bps=-1"),
     ("NegativeWindow", "window_bytes=-4096")],
)  # fmt: skip
def test_cc_plugin_with_invalid_rates_is_stopped_clearly(tmp_path, monkeypatch, cls, text):
    mod = f"podsim_test_cc_{cls.lower()}"
    (tmp_path / f"{mod}.py").write_text(PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path))
    path = trace_doc(tmp_path)
    write_trace(tmp_path / "trace.csv", 4, np.random.default_rng(1))
    args = ["run", str(path), "--out", str(tmp_path / "o"), "-q", "--set",
            f"cluster.nic.cc.name={mod}:{cls}"]  # fmt: skip
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 2 and "--allow-plugins" in r.output  # no opt-in: refused
    r = CliRunner().invoke(app, [*args, "--allow-plugins"])
    out = " ".join(r.output.split())
    assert r.exit_code == 2, out
    assert "cluster.nic.cc.name" in out and f"{mod}:{cls}" in out and text in out
    assert "on_ack" in out and "at t=" in out and "Traceback" not in out
