"""Check that an engine change leaves results bit-identical: capture every library scenario's
(and bench_engine's fabric rows') result files on one checkout, capture again on another, and
compare them file by file.

Usage:

    python benchmarks/same_results.py capture DIR [--only CASE ...] [--bench]
    python benchmarks/same_results.py compare DIR_BEFORE DIR_AFTER

``capture`` runs each case as ``podsim run NAME --set ... --out DIR/CASE -q`` (figures off:
they are drawings of the tables) with ``python -m podsim`` of the current interpreter: to capture
another checkout, copy it to a folder named ``podsim`` and put that folder's parent on
PYTHONPATH. The cases are every library scenario and variant (MoE and synthetic ones on the packet
engine, sized down where the library size takes minutes; the operation-graph workloads on the
engine their scenario names), plus PFC, credit flow control and the classic RoCE and CX-7 NIC
presets. ``--bench`` adds bench_engine.py's two 128-host fat-tree rows (about 25 s CPU each).

``compare`` reads every case found in both folders: ``summary.json`` must be equal except the
fields that measure the host rather than the simulation (wall time and event rate, the flow
solver's wall time, and the engine's event count, which changes when events are coalesced,
and the provenance: commit and date), every Parquet table must be equal (``DataFrame.equals``:
same values, same dtypes, NaN where NaN), ``resolved.yaml`` must resolve to the same scenario
(keys whose value is null are left out: a key added to the schema on main since the capture;
paths into the scenario library compare from the library on: the checkouts sit in different
folders) and every other file must be byte-identical. It prints each difference and exits 1 if
there is any.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd
import yaml

#: summary.json keys that measure the machine or the engine's bookkeeping, not the results
VOLATILE = {"wall_s", "events_per_s", "events", "provenance"}
#: the same, nested (dotted path from the top of summary.json)
VOLATILE_NESTED = {".engine_info.solver_wall_s"}

SMALL_MOE = ["workload.moe.tokens_per_rank=64"]

#: case name -> (scenario, overrides); every library scenario on the packet engine
CASES: dict[str, tuple[str, list[str]]] = {
    "quickstart": ("quickstart", []),
    "deepep-ep16": ("deepep-h800", ["variant=ep16", *SMALL_MOE]),
    "deepep-ep64": ("deepep-h800", ["variant=ep64", *SMALL_MOE]),
    **{
        f"incast-{v}": ("incast-cc", [f"variant={v}", "workload.synthetic.size=1MiB"])
        for v in ("dcqcn", "hpcc", "timely", "swift", "nscc", "rccc", "none")
    },
    "incast-pfc": (
        "incast-cc",
        [
            "workload.synthetic.size=1MiB",
            "cluster.switch.pfc.enabled=true",
            "cluster.switch.pfc.xoff=200KB",
            "cluster.switch.pfc.xon=100KB",
            "cluster.switch.ecn.enabled=false",
        ],
    ),
    "incast-roce": ("incast-cc", ["workload.synthetic.size=1MiB", "cluster.nic.model=roce"]),
    "incast-cx7": (
        "incast-cc",
        [
            "workload.synthetic.size=1MiB",
            "cluster.nic.model=cx7-ib",
            "cluster.switch.credit_buffer=256KiB",
        ],
    ),
    **{f"link-failure-{v}": ("link-failure", [f"variant={v}"]) for v in ("spray", "reps", "ecmp")},
    **{
        f"spray-vs-ecmp-{v}": ("spray-vs-ecmp", [f"variant={v}"])
        for v in ("ecmp", "spray", "reps", "adaptive", "bitmap")
    },
    **{
        f"storage-{v}": ("storage-contention", [f"variant={v}", *SMALL_MOE])
        for v in ("reads", "no-reads")
    },
    "superpod-moe": ("superpod-moe", ["workload.moe.tokens_per_rank=16"]),
    # operation-graph workloads (flow engine, as the library runs them)
    **{
        f"collectives-{v}": ("collectives", [f"variant={v}"])
        for v in ("ring", "tree", "hierarchical")
    },
    **{
        f"train-1t-moe-{v}": (
            "train-1t-moe",
            [f"variant={v}", "workload.training.microbatches=4", "engine=flow"],
        )
        for v in ("baseline", "ep-overlap", "gpipe")
    },
    "chakra-4rank": ("chakra-4rank", []),
    "kineto-2rank": ("kineto-2rank", []),
    "pd-4p4d": ("pd-4p4d", ["engine=flow"]),
}


def _podsim() -> list[str]:
    """``python -m podsim`` of this interpreter: PYTHONPATH may point it at another checkout."""
    return [sys.executable, "-m", "podsim"]


def capture(root: Path, only: list[str] | None, bench: bool) -> None:
    """Run the cases into ``root/<case>``."""
    root.mkdir(parents=True, exist_ok=True)
    names = [c for c in CASES if not only or c in only]
    for name in names:
        scenario, sets = CASES[name]
        # the packet engine unless the case names another (a later --set wins)
        args = [a for s in ["engine=packet", *sets, "outputs.plots=false"] for a in ("--set", s)]
        out = root / name
        cmd = [*_podsim(), "run", scenario, *args, "--out", str(out), "-q"]
        r = subprocess.run(cmd, capture_output=True, text=True)
        print(f"  {name}: exit {r.returncode}", flush=True)
        if r.returncode != 0:
            print(r.stdout[-2000:], r.stderr[-2000:])
    if bench:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from bench_engine import fabric_row

        tmp = (
            Path(tempfile.gettempdir()) / "podsim-same-results"
        )  # one path: resolved.yaml names it
        tmp.mkdir(exist_ok=True)
        for name, row in (("fat-tree-perm", "perm-reps"), ("fat-tree-a2a", "a2a-reps")):
            if only and name not in only:
                continue
            path, _ = fabric_row(name, row, tmp, 1)
            doc = yaml.safe_load(path.read_text())
            doc["outputs"] = {"plots": False}
            path.write_text(yaml.safe_dump(doc, sort_keys=False))
            cmd = [*_podsim(), "run", str(path), "--out", str(root / name), "-q"]
            r = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp)
            print(f"  {name}: exit {r.returncode}", flush=True)
            if r.returncode != 0:
                print(r.stdout[-2000:], r.stderr[-2000:])


def _diff_json(a: object, b: object, where: str, out: list[str]) -> None:
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if (where == "" and k in VOLATILE) or f"{where}.{k}" in VOLATILE_NESTED:
                continue
            if k not in a or k not in b:
                out.append(f"{where}.{k}: only in {'after' if k not in a else 'before'}")
            else:
                _diff_json(a[k], b[k], f"{where}.{k}", out)
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _diff_json(x, y, f"{where}[{i}]", out)
    elif a != b and not (a != a and b != b):  # NaN equals NaN here
        out.append(f"{where}: {a!r} -> {b!r}")


def _drop_nulls(doc: object) -> object:
    """``doc`` without mapping keys whose value is null (a key added to the schema since), and
    paths into the scenario library relative to it (two checkouts sit in different folders)."""
    if isinstance(doc, dict):
        return {k: _drop_nulls(v) for k, v in doc.items() if v is not None}
    if isinstance(doc, list):
        return [_drop_nulls(v) for v in doc]
    if isinstance(doc, str) and LIBRARY in doc:
        return doc[doc.index(LIBRARY) :]
    return doc


LIBRARY = "/scenarios/library/"


def compare_case(a: Path, b: Path) -> list[str]:
    """The differences between two result folders of one case."""
    diffs: list[str] = []
    files = sorted(
        {p.relative_to(a) for p in a.rglob("*") if p.is_file()}
        | {p.relative_to(b) for p in b.rglob("*") if p.is_file()}
    )
    for rel in files:
        if rel.parts[0] == "plots":
            continue
        fa, fb = a / rel, b / rel
        if not fa.exists() or not fb.exists():
            diffs.append(f"{rel}: only in {'after' if not fa.exists() else 'before'}")
        elif rel.name == "summary.json":
            _diff_json(json.loads(fa.read_text()), json.loads(fb.read_text()), "", diffs)
        elif rel.name == "resolved.yaml":  # the input echoed: keys new on main are null
            ya, yb = (_drop_nulls(yaml.safe_load(f.read_text())) for f in (fa, fb))
            if ya != yb:
                diffs.append(f"{rel}: resolved scenarios differ (besides keys that are null)")
        elif rel.suffix == ".parquet":
            da, db = pd.read_parquet(fa), pd.read_parquet(fb)
            if not da.equals(db):
                diffs.append(f"{rel}: tables differ")
        elif fa.read_bytes() != fb.read_bytes():
            diffs.append(f"{rel}: bytes differ")
    return diffs


def compare(before: Path, after: Path) -> int:
    """Compare every case present in both folders; 0 if all are identical."""
    bad = 0
    cases = sorted(p.name for p in before.iterdir() if (after / p.name).is_dir())
    for name in cases:
        diffs = compare_case(before / name, after / name)
        print(f"  {name}: {'identical' if not diffs else f'{len(diffs)} differences'}")
        for d in diffs[:20]:
            print(f"      {d}")
        bad += bool(diffs)
    print(f"{len(cases) - bad} of {len(cases)} cases identical")
    return 1 if bad or not cases else 0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("capture")
    c.add_argument("dir", type=Path)
    c.add_argument("--only", nargs="*", default=None)
    c.add_argument("--bench", action="store_true")
    d = sub.add_parser("compare")
    d.add_argument("before", type=Path)
    d.add_argument("after", type=Path)
    args = ap.parse_args()
    if args.cmd == "capture":
        capture(args.dir, args.only, args.bench)
    else:
        raise SystemExit(compare(args.before, args.after))


if __name__ == "__main__":
    main()
