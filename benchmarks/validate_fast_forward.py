"""The steady-state fast-forward against the full packet run on the library scenarios (issue 18).

Usage: python benchmarks/validate_fast_forward.py [--only NAME ...] [--small] [--keep DIR]

Every library scenario whose engine is ``packet`` runs twice as a user runs it (``podsim run
NAME --out DIR -q`` in a child process, figures off): once as it is, once with
``sim.fast_forward.enabled=true``. The table gives each run's CPU seconds (the child's own
rusage), the jumps taken and the share of the simulated time they skipped, and the fast
run's relative differences from the full run (bench_engine.py's ``differences``: simulated
time, the worst phase completion time, bytes on the links; issue 18 asks for at most 2 %).
``--small`` uses the reduced sizes of tests/scenarios/test_library.py (quick, but short runs
have little steady state to skip). A scenario whose sim.endpoint is ``host`` is listed as not
applicable (the fast-forward needs the NIC transport).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_engine as be  # a sibling script


def small_sizes() -> dict[str, list[str]]:
    root = Path(__file__).resolve().parents[1]
    sys.path.insert(0, str(root / "tests" / "scenarios"))
    from test_library import SMALL  # the reduced sizes the library test runs

    return SMALL


def main() -> None:
    from podsim.scenarios.input.loader import library_names, load_scenario

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="*", default=None)
    ap.add_argument("--small", action="store_true", help="the library test's reduced sizes")
    ap.add_argument("--keep", type=Path, default=None, help="keep the results")
    args = ap.parse_args()
    podsim = shutil.which("podsim")
    if podsim is None:
        raise SystemExit("the podsim command is not on PATH: pip install -e . first")
    sizes = small_sizes() if args.small else {}
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        work = args.keep or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        for name in library_names():
            if args.only and name not in args.only:
                continue
            sets = sizes.get(name, [])
            sc, _ = load_scenario(name, sets)
            if sc.engine != "packet":
                continue
            rec: dict[str, object] = {"scenario": name}
            if sc.sim.endpoint != "nic":
                rows.append({**rec, "note": "endpoint host: not applicable"})
                continue
            base = [podsim, "run", name, "--set", "outputs.plots=false", "--force", "-q"]
            for s in sets:
                base += ["--set", s]
            full, fast = work / f"{name}-full", work / f"{name}-ff"
            u = be.run_child([*base, "--out", str(full)], work)
            f = be.run_child(
                [*base, "--set", "sim.fast_forward.enabled=true", "--out", str(fast)], work
            )
            if u.returncode or f.returncode:
                rows.append({**rec, "note": f"failed: {(u.output or f.output)[-300:]}"})
                continue
            rec.update({"full CPU s": u.cpu_s, "ff CPU s": f.cpu_s})
            rec.update(be.differences(full, fast))
            print(f"  {name}: {rec}", flush=True)
            rows.append(rec)
    print()
    print(pd.DataFrame(rows).to_string(index=False, float_format=lambda x: f"{x:,.2f}"))


if __name__ == "__main__":
    main()
