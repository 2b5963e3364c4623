"""Golden differential: are two commits' results bit-identical on the library scenarios?

Usage (run the dump with each commit's own install, e.g. two git worktrees):

    python benchmarks/golden.py dump OUT.json [--packet-only]
    python benchmarks/golden.py compare BEFORE.json AFTER.json

``dump`` runs every built-in scenario (its first variants, and the flow and bound engines on
the default variant) at the sizes below and writes, per run, the SHA-256 of every result table
(as CSV) and the summary without its wall-clock fields. ``compare`` prints each difference,
table by table and summary key by key, and exits 1 if a table differs. A refactoring that
claims "results unchanged" shows an empty table difference here.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from typing import Any

#: library scenario -> overrides that keep a run to seconds (the files hold the documented sizes)
SIZES: dict[str, list[str]] = {
    "quickstart": [],
    "deepep-h800": ["workload.moe.tokens_per_rank=64"],
    "superpod-moe": ["engine=flow"],
    "incast-cc": [],
    "spray-vs-ecmp": [],
    "link-failure": [],
    "storage-contention": ["workload.moe.tokens_per_rank=64"],
}
#: summary keys that measure the machine, not the model
WALL_KEYS = ("wall_s", "events_per_s", "solver_wall_s", "scenario_file", "provenance")


def _strip(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _strip(v) for k, v in obj.items() if k not in WALL_KEYS}
    return obj


def dump(path: str, packet_only: bool) -> None:
    import podsim
    from podsim.scenarios.input.loader import library_names, variant_names

    os.environ.setdefault("MPLBACKEND", "Agg")
    out: dict[str, Any] = {}
    for name in sorted(library_names()):
        variants = [None, *(variant_names(name) or [])][:3]
        for variant in variants:
            base = [*SIZES.get(name, []), "outputs.plots=false"]
            base += [f"variant={variant}"] if variant else []
            engines = [None] if variant or packet_only else [None, "flow", "bound"]
            for engine in engines:
                key = f"{name}|{variant or '-'}|{engine or 'default'}"
                overrides = base + ([f"engine={engine}"] if engine else [])
                try:
                    res = podsim.run(name, overrides=overrides)
                except podsim.ScenarioError as exc:
                    out[key] = {"refused": str(exc).split(": ", 1)[-1]}
                    print(f"{key:<40} refused", flush=True)
                    continue
                tables = {
                    t: hashlib.sha256(df.to_csv(index=False).encode()).hexdigest()
                    for t, df in res.tables().items()
                    if df is not None
                }
                out[key] = {"summary": _strip(res.summary), "tables": tables}
                print(f"{key:<40} makespan {res.summary.get('makespan_s')}", flush=True)
    with open(path, "w") as fh:
        json.dump(out, fh, indent=1, sort_keys=True, default=str)


def _diff(a: Any, b: Any, where: str, lines: list[str]) -> None:
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                lines.append(f"  {where}{k}: only in {'before' if k in a else 'after'}")
            else:
                _diff(a[k], b[k], f"{where}{k}.", lines)
    elif a != b:
        lines.append(f"  {where.rstrip('.')}: {str(a)[:60]} -> {str(b)[:60]}")


def compare(before: str, after: str) -> int:
    with open(before) as fa, open(after) as fb:
        a, b = json.load(fa), json.load(fb)
    tables_differ = 0
    for key in sorted(set(a) | set(b)):
        lines: list[str] = []
        _diff(a.get(key, {}), b.get(key, {}), "", lines)
        if lines:
            tables_differ += any(line.lstrip().startswith("tables.") for line in lines)
            print(key)
            print("\n".join(lines))
    print(f"{len(set(a) | set(b))} runs; result tables differ in {tables_differ}")
    return 1 if tables_differ else 0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("dump", help="run the library and write hashes and summaries")
    d.add_argument("out")
    d.add_argument("--packet-only", action="store_true", help="skip the flow and bound runs")
    c = sub.add_parser("compare", help="compare two dumps")
    c.add_argument("before")
    c.add_argument("after")
    args = ap.parse_args()
    if args.cmd == "dump":
        dump(args.out, args.packet_only)
    else:
        sys.exit(compare(args.before, args.after))


if __name__ == "__main__":
    main()
