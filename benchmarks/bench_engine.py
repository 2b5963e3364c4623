"""Packet-engine speed on whole runs: CPU seconds, packet-hops per CPU-second and peak memory of
a complete ``podsim run``, next to htsim's CPU on the same scenario (issue 18).

Usage: python benchmarks/bench_engine.py [--htsim DIR] [--only ROW ...] [--deepep] [--keep DIR]
                                        [--fast-forward] [--repeat N]

Rows (``--only`` picks some):

- ``fat-tree-perm``: the 128-host k=8 fat-tree permutation of 4 MiB per host (UEC NIC: REPS,
  selective repeat, NSCC; 1 us links, no switch latency): validate_htsim.py's ``perm-reps``;
- ``fat-tree-a2a``: the same fabric, every host sends 32 KiB to every other host (4 MiB per
  host): validate_htsim.py's ``a2a-reps``;
- ``deepep-ep64`` (with ``--deepep``; long): the ``deepep-h800`` library scenario at EP 64 with
  DeepEP's published 4096 tokens per rank on the packet engine (``--force``: its size estimate
  asks for it).

Each row runs as a user runs it: the scenario (and its traffic, as a trace file) written to a
folder, then ``podsim run FILE --out DIR -q`` in a child process with figures drawn, timed by
the child's own resource usage (``os.wait4``: user + system CPU, peak resident memory), with
Python's bytecode cache on as in an installed podsim (:func:`child_env`). A
packet-hop is one packet's transmission on one scale-out link, data, ACKs and control
included: the sum of ``tx_packets`` over the scale-out links of ``links.parquet``. With
``--htsim DIR`` (validate_htsim.py's binaries, benchmarks/README.md) the fabric rows also run
on htsim_uec with validate_htsim.py's like-for-like flags, and the table gives htsim's CPU and
podsim's CPU as a multiple of it. CPU, not wall time, because the machine may be shared.

The fixed cost. A ``podsim run`` pays for the interpreter, the imports the run and its outputs
need (pydantic, networkx, pandas with pyarrow, matplotlib), the cluster build, the tables and
the figures, whatever the traffic; htsim pays almost nothing (a C++ binary that prints
its flows). Each fabric row therefore also runs its *floor*: the same scenario with every flow
cut to one packet (``MSS`` bytes), on both simulators, and the table gives the floor's CPU and
the *marginal* figures, what the traffic itself costs: packet-hops per CPU-second of the run
minus its floor, and podsim's marginal CPU as a multiple of htsim's. ``--repeat N`` runs each
child N times, interleaved, and keeps each one's least CPU (a shared machine's CPU time varies by
10-20 % between identical runs; interference only ever adds).

``--fast-forward`` runs every row a second time with ``sim.fast_forward.enabled=true`` (the
steady-state fast-forward, :mod:`podsim.nic.fastforward`) and adds its CPU, the CPU ratio and
how far its results are from the full run's: the simulated time, each phase's completion time
and the bytes on the links (relative differences, in %; issue 18 asks for at most 2 %).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
import validate_htsim as vh  # a sibling script
from podsim.scenarios.report.markdown import frame_to_markdown


@dataclass(frozen=True)
class Usage:
    cpu_s: float
    max_rss_bytes: int
    returncode: int
    output: str


def child_env() -> dict[str, str]:
    """The environment of the timed runs: Python's bytecode cache on, as in an installed
    podsim. An installed podsim and its libraries have their ``.pyc`` files beside their
    sources (pip writes them); a sandbox that sets ``PYTHONDONTWRITEBYTECODE`` would make every
    run compile podsim's sources again (about 0.2 s of CPU, not the run's), so podsim's are
    compiled here, beside its sources (``__pycache__``, ignored by git), before the first run.
    No ``PYTHONPYCACHEPREFIX``: Python then looks for every module's cache under the prefix
    only, and each timed run in a new ``work`` compiled NumPy, pandas, matplotlib and the rest
    (a 128-host permutation measured 9.9-10.1 s of CPU against 7.7 s with a warm cache)."""
    import podsim

    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")
    }
    package = Path(podsim.__file__).resolve().parent
    # (an editable checkout holds its venv, tests and benchmarks too: not podsim's modules)
    skip = r"/(\.venv|\.git|tests|benchmarks|docs)/"
    subprocess.run([sys.executable, "-m", "compileall", "-q", "-x", skip, str(package)],
                   env=env, check=True)  # fmt: skip
    return env


def run_child(cmd: list[str], cwd: Path, env: dict[str, str] | None = None) -> Usage:
    """Run ``cmd`` and return its own CPU time and peak memory (Linux reports KiB)."""
    with tempfile.TemporaryFile(mode="w+") as log:
        p = subprocess.Popen(cmd, cwd=cwd, stdout=log, stderr=subprocess.STDOUT, text=True, env=env)
        _, status, ru = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        log.seek(0)
        text = log.read()
    return Usage(ru.ru_utime + ru.ru_stime, ru.ru_maxrss * 1024, p.returncode, text)


def packet_hops(out: Path) -> int:
    links = pd.read_parquet(out / "links.parquet")
    return int(links.loc[links["kind"] == "scaleout", "tx_packets"].sum())


def differences(full: Path, fast: Path) -> dict[str, float]:
    """Relative differences (%) of the fast-forward run in ``fast`` from the full run in
    ``full``: simulated time, the worst phase completion time, link bytes."""
    a = json.loads((full / "summary.json").read_text())
    b = json.loads((fast / "summary.json").read_text())

    def pct(x: float, y: float) -> float:
        return 100.0 * (y - x) / x if x else math.nan

    out = {"sim time diff %": pct(a["sim_time_s"], b["sim_time_s"])}
    phases = [
        pct(a["phases"][p]["completion_time_s"], b["phases"][p]["completion_time_s"])
        for p in a.get("phases", {})
        if a["phases"][p].get("completion_time_s") and p in b.get("phases", {})
    ]
    out["worst phase diff %"] = max(phases, key=abs) if phases else math.nan
    la = pd.read_parquet(full / "links.parquet")["tx_bytes"].sum()
    lb = pd.read_parquet(fast / "links.parquet")["tx_bytes"].sum()
    out["link bytes diff %"] = pct(float(la), float(lb))
    ff = b["engine_info"].get("fast_forward", {})
    out["jumps"] = ff.get("jumps", 0)
    out["skipped time %"] = 100.0 * ff.get("skipped_time_s", 0.0) / b["sim_time_s"]
    return out


def fabric_row(
    name: str, row_name: str, work: Path, seed: int, flow_bytes: int | None = None
) -> tuple[Path, str]:
    """The validate_htsim row as a scenario file with its traffic as a trace; returns the
    file and htsim's connection matrix for the same flows. ``flow_bytes`` sets every flow's
    size (the floor runs: one packet per flow)."""
    from podsim.scenarios.build.cluster import build_cluster

    row = next(r for r in vh.ROWS if r.name == row_name)
    trace = vh.traffic(row.pattern, seed)
    trace = trace[trace["bytes"] > 0].reset_index(drop=True)
    if flow_bytes is not None:
        trace["bytes"] = flow_bytes
    trace_path = work / f"{name}.parquet"
    trace.to_parquet(trace_path, index=False)
    doc = vh.podsim_doc(row, seed, {"trace": {"path": trace_path.name, "ranks": vh.HOSTS}})
    doc["name"] = name
    doc["outputs"] = {"plots": True}
    path = work / f"{name}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    cluster = build_cluster(vh.podsim_scenario(row, seed), vh.HOSTS)
    return path, vh.connection_matrix(trace, vh.host_index(cluster))


def least(runs: list[Usage]) -> Usage:
    """The run with the least CPU of ``runs`` (each must have succeeded)."""
    return min(runs, key=lambda u: u.cpu_s)


def marginal(full: float, floor: float, count: float = 1.0) -> float:
    """``count`` per unit of ``full - floor`` (NaN when the difference is not positive)."""
    d = full - floor
    return count / d if d > 0 else math.nan


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--htsim", type=Path, default=None, help="folder of htsim_uec")
    ap.add_argument("--only", nargs="*", default=None,
                    choices=["fat-tree-perm", "fat-tree-a2a", "deepep-ep64"])  # fmt: skip
    ap.add_argument("--deepep", action="store_true", help="also run deepep-ep64 (long)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--keep", type=Path, default=None, help="keep the scenarios and results")
    ap.add_argument("--fast-forward", action="store_true",
                    help="also run each row with sim.fast_forward on and compare")  # fmt: skip
    ap.add_argument("--repeat", type=int, default=1,
                    help="run each child N times, interleaved, and keep its least CPU")  # fmt: skip
    args = ap.parse_args()
    if args.repeat < 1:
        raise SystemExit(f"--repeat {args.repeat}: give 1 or more")
    podsim = shutil.which("podsim")
    if podsim is None:
        raise SystemExit("the podsim command is not on PATH: pip install -e . first")
    rows = ["fat-tree-perm", "fat-tree-a2a"] + (["deepep-ep64"] if args.deepep else [])
    if args.only:
        rows = [r for r in [*rows, "deepep-ep64"] if r in args.only]
    from podsim.fabric import compiled  # the child runs the same install, in the same environment

    done = compiled.compiled_modules()
    print(f"packet engine: {len(done)} of {len(compiled.MODULES)} modules compiled "
          f"({compiled.ENV_PURE}=1 runs pure Python)", flush=True)  # fmt: skip
    table = []
    with tempfile.TemporaryDirectory() as tmp:
        work = args.keep or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        env = child_env()
        for name in rows:
            out = work / f"out-{name}"
            floor_cmd = cm = floor_cm = row = None
            if name == "deepep-ep64":
                cmd = [podsim, "run", "deepep-h800", "--set", "variant=ep64", "--set",
                       "workload.moe.tokens_per_rank=4096", "--force",
                       "--out", str(out), "-q"]  # fmt: skip
            else:
                source = {"fat-tree-perm": "perm-reps", "fat-tree-a2a": "a2a-reps"}[name]
                path, cm = fabric_row(name, source, work, args.seed)
                cmd = [podsim, "run", str(path), "--out", str(out), "-q"]
                row = next(r for r in vh.ROWS if r.name == source)
                floor_path, floor_cm = fabric_row(f"{name}-floor", source, work, args.seed, vh.MSS)
                floor_out = work / f"out-{name}-floor"
                floor_cmd = [podsim, "run", str(floor_path), "--out", str(floor_out), "-q"]
            runs: dict[str, list[Usage]] = {"full": [], "floor": []}
            htsim: dict[str, list[float]] = {"full": [], "floor": []}
            for _ in range(args.repeat):
                for kind, c, m in (("full", cmd, cm), ("floor", floor_cmd, floor_cm)):
                    if c is None:
                        continue
                    u = run_child(c, work, env)
                    if u.returncode != 0:
                        raise SystemExit(
                            f"{name} ({kind}): podsim run failed ({u.returncode}):\n"
                            f"{u.output[-2000:]}"
                        )
                    runs[kind].append(u)
                    if args.htsim is not None and row is not None:
                        keep = args.keep if kind == "full" else None  # (same file names)
                        h = vh.run_htsim(row, args.htsim, m, args.seed, keep)
                        htsim[kind].append(h.cpu_s)
            u = least(runs["full"])
            hops = packet_hops(out)
            rec = {
                "row": name,
                "podsim CPU s": u.cpu_s,
                "packet-hops": hops,
                "hops per CPU-s": hops / u.cpu_s,
                "peak memory MiB": u.max_rss_bytes / 2**20,
            }
            if floor_cmd is not None:
                floor = least(runs["floor"]).cpu_s
                floor_hops = packet_hops(floor_out)
                rec["floor CPU s"] = floor
                rec["marginal hops per CPU-s"] = marginal(u.cpu_s, floor, hops - floor_hops)
            if htsim["full"]:
                h, h_floor = min(htsim["full"]), min(htsim["floor"])
                rec["htsim CPU s"] = h
                rec["podsim / htsim CPU"] = u.cpu_s / h if h > 0 else math.nan
                rec["htsim floor CPU s"] = h_floor
                rec["marginal podsim / htsim"] = marginal(h, h_floor, u.cpu_s - floor)
            print(f"  {name}: {u.cpu_s:.1f} s CPU, {hops:,} packet-hops", flush=True)
            if args.fast_forward:
                fast = work / f"out-{name}-ff"
                i = cmd.index("--out")
                ff_cmd = [*cmd[:i], "--set", "sim.fast_forward.enabled=true", "--out", str(fast),
                          *cmd[i + 2 :]]  # fmt: skip
                f = run_child(ff_cmd, work, env)
                if f.returncode != 0:
                    raise SystemExit(
                        f"{name} (fast-forward): podsim run failed:\n{f.output[-2000:]}"
                    )
                rec["ff CPU s"] = f.cpu_s
                rec["full / ff CPU"] = u.cpu_s / f.cpu_s if f.cpu_s > 0 else math.nan
                rec.update(differences(out, fast))
                print(f"  {name} fast-forward: {f.cpu_s:.1f} s CPU, sim time "
                      f"{rec['sim time diff %']:+.2f} %, worst phase "
                      f"{rec['worst phase diff %']:+.2f} %", flush=True)  # fmt: skip
            table.append(rec)
    df = pd.DataFrame(table)
    print()
    if args.markdown:
        print(frame_to_markdown(df, digits=1))
    else:
        print(df.to_string(index=False, float_format=lambda x: f"{x:,.1f}"))


if __name__ == "__main__":
    main()
