"""Cross-check against the UEC consortium's reference simulator (htsim): the same scenarios on
podsim's packet engine and on htsim, and their completion times side by side.

Usage: python benchmarks/validate_htsim.py [--htsim DIR] [--only ROW ...] [--seeds N]
       [--markdown] [--keep DIR]

Without ``--htsim`` it prints podsim's side only. ``DIR`` is the folder holding the htsim
binaries ``htsim_uec`` and ``htsim_roce`` the user built from the upstream repository
(benchmarks/README.md names the commit); the reference read for this script is
github.com/ultraethernet/uet-htsim at commit 40ccb05
(``htsim/sim/datacenter/main_uec.cpp``, ``main_roce.cpp``).

The scenario family is the one htsim's fat-tree generator builds: a 3-tier k=8 fat-tree of 128
hosts at 400 Gb/s, 1 us on every link (podsim: fibre at 5 ns/m plus the 400GbE FEC latency,
about 180 m + 101 ns), no switching latency,
4 KiB payload per packet. The traffic is generated once per seed by podsim's own pattern
functions (``workloads.synthetic``) and written to htsim's connection-matrix format, so both
simulators carry exactly the same flows between the same hosts (podsim's host ``nicN`` is
htsim's node N: both number hosts leaf by leaf, pod by pod). Rows:

=================  ======================================  =====================================
row                htsim                                   podsim
=================  ======================================  =====================================
perm-reps          htsim_uec, REPS, NSCC                   NIC ``uec`` (REPS, SR, NSCC)
perm-oblivious     htsim_uec, oblivious spraying, NSCC     ``uec`` with the ``spray`` selector
perm-single        htsim_uec, one entropy per flow, NSCC   ``uec`` with the ``ecmp`` selector
perm-roce-pfc      htsim_roce, ECMP, lossless (PFC), no CC NIC ``roce``, cc none, PFC on
perm-switch-ar     htsim_uec, switch AR per packet, NSCC   ``uec``, ``ecmp`` selector, AR switches
a2a-reps           htsim_uec, REPS, NSCC, all-to-all       ``uec``, all-to-all
=================  ======================================  =====================================

Like for like (each derived the way main_uec.cpp does, so both sides use the same values): htsim
runs with packet trimming off (``-disable_trim``; podsim's switches do not trim), so its queues
are 5 x BDP per port and ECN marks at dequeue, linearly from 0.2 to 0.8 BDP with probability 1
at the top (podsim also marks at dequeue); NSCC's constants in both come from htsim's network
RTT (``calculate_rtt``: twice the diameter's latency plus a data packet's and an ACK's
serialisation per hop), passed to podsim's NSCC as ``network_rtt_s``; 64 entropy values per flow
(htsim's ``-paths`` default); the receiver acknowledges every 16 KiB (htsim's
``UecSink::_bytes_unacked_threshold``: podsim's ``ack_coalesce: 4``) and at once on an ECN mark
or a reordering; without trimming (and without its optional SLEEK loss detection) htsim's UEC
source finds a loss only by its timeout, 15 us plus draining a full queue at each of 6 hops (391
us here): podsim gets that RTO, a reordering window no gap outlives and no tail-loss probe
before the RTO (``reorder_window_min``, the probe's floor: with the UEC ACK rules a2a-reps had
sent 157 spurious probes on 6 seeds). RoCE: PFC pauses an
input above 15 packets queued and resumes below 12 (main_roce.cpp defaults), an input counting a
frame until its last bit has left the egress (LosslessInputQueue releases it in completedService;
podsim's ``pfc.hold_until_sent``): it pauses one frame earlier and resumes with one frame less
queued, and those 11 frames drain before a resume's round trip (2 us) brings the next one, so
the bottleneck idles briefly in each pause cycle (2->1 incast across pods, 4 MiB each: podsim
183.5 us without the hold, 185.5 with it, htsim 187.1; within one leaf 179.4 vs 177.7, podsim's
frames being 0.4 % longer). One entropy value
(``perm-single``, ``perm-switch-ar``): htsim's source then has no other path, so podsim's NSCC
gets ``path_change_on_ecn: false`` (by default it re-hashes a single-path flow off a marked path,
which spread podsim's flows over more links than htsim's). Switch AR (``perm-switch-ar``):
htsim's FatTreeSwitch picks per packet at random among the egresses whose queue size, quantised
to four levels (< 5, 10, 20 % of the queue's capacity and above), is lowest; podsim's switches
get ``adaptive_routing_quantum`` = htsim's first level (5 % of the queue), a uniform band. With
exact bytes podsim's choice followed the packets' arrival order: the uplinks were balanced to
a packet, but not each flow over them, so the single paths down (spine to leaf) carried up to
22 % more than their share and queued up to 1.3 MB (seed 1: 123 us against 105).
Differences that remain: htsim's levels above the first are 10 and 20 % (podsim's bands are
uniform; the uplink queues stay in the first band here) and are refreshed every 100 ns (podsim's
are current); podsim's switches share one dynamic-threshold buffer where htsim's queues are
fixed per port (neither drops in these rows, the drops column shows it); headers are 64 B in
htsim and 82 B (RoCEv2 framing) in podsim, 0.4 % of serialisation at 4 KiB (htsim's RoCE packet
is 4096 B on the wire: 2 % less than podsim's).

Completion times are the sender's on both sides: htsim prints "finished at" when the
cumulative ACK covers the flow (uec.cpp ``UecSrc::checkFinished``, roce.cpp ``processAck``),
podsim's is ``qps.acked_s`` (``messages.end_s``, the receiver holding the last byte, is one ACK
trip earlier). Each link is 1 us in all: podsim's fibre is shortened by the PHY's FEC latency.

Target (issue 14): every row within 5 % on the makespan (the last flow's completion). Every
row depends on the seed: both simulators hash (flow, entropy) per hop with a random key per
switch (htsim's ``FatTreeSwitch::getNextHop``), which on a fat-tree is a uniform random path per
connection (tests/fabric/test_routing.py checks podsim's), so on one seed they collide different
flows as often as each other; rows whose flows take one path each (perm-single,
perm-roce-pfc) vary most (perm-single's makespan by about 8 % between seeds), but a sprayed
flow's entropy values also land on paths unevenly and the makespan, the slowest of 128 flows,
varies by about 3 % between seeds (perm-oblivious). Each row is averaged over ``--seeds``
(default 10) and the table gives each mean's standard error.

Switches store and forward on both sides: an htsim queue hands a packet to the next pipe
when its last bit is out (podsim's default cuts through, which shortened each hop by a
packet's serialisation: a single idle 4 MiB flow across pods finished 0.4 us earlier than with
store-and-forward, just cancelling its 18 B longer headers). Neither side models a QP-context
cache here: htsim has none, so podsim's NIC gets
``qp_miss_penalty: 0`` (its default fetches each QP's context over PCIe on first use, 1 us,
which delayed a2a-reps, 127 QPs per NIC at time 0, by about 8 us).
htsim's REPS ends its run on a retransmission timeout when trimming is off (uec_mp.cpp
``UecMpReps::processEv``): a seed where that happens has no htsim time, is counted in the
``htsim exited`` column and left out of htsim's mean; perm-single's 10 x BDP queues (htsim
``-q``, podsim the same per-port buffer and RTO) keep every seed of 1-40 loss-free.
"""

from __future__ import annotations

import argparse
import math
import re
import resource
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from podsim.fabric.phy import PROPAGATION_S_PER_M, get_phy
from podsim.scenarios.build.cluster import assign_hops, build_cluster
from podsim.scenarios.engines import ENGINES, RunContext
from podsim.scenarios.input.loader import load_scenario
from podsim.scenarios.report.markdown import frame_to_markdown
from podsim.workloads import synthetic

K = 8  # fat-tree radix: 128 hosts, 3 tiers
PHY = "400GbE"  # the fat-tree builder's host_phy and fabric_phy defaults
HOSTS = K**3 // 4
LINK_BPS = 400e9
HOP_S = 1e-6  # htsim's -hop_latency default: 1 us per link
MSS = 4096  # payload per packet, both simulators
UEC_HDR = 64  # htsim's UEC header (UecBasePacket): MTU 4160 on the wire
UEC_ACK = 64  # htsim's UEC ACK size (UecBasePacket::get_ack_size)
DIAMETER_HOPS = 6  # host-leaf-spine-core-spine-leaf-host
PERM_BYTES = 4 << 20
A2A_PAIR_BYTES = 32 << 10  # 127 x 32 KiB per host: about the permutation's 4 MiB
ROCE_PFC_HIGH_PKTS = 15  # main_roce.cpp: high_pfc = 15 packets
ROCE_PFC_LOW_PKTS = 12  # main_roce.cpp: low_pfc = 12 packets
NONTRIM_QUEUE_BDP = 5  # main_uec.cpp DEFAULT_NONTRIMMING_QUEUESIZE_FACTOR
# perm-single's queues (htsim -q): room for the deepest queue podsim's shared buffer held on
# seeds 1-40 (1052 packets) [E], so that neither side drops and htsim's REPS, which ends the
# run on a timeout without trimming, finishes every seed (docstring)
ONE_PATH_QUEUE_BDP = 10
EVS = 64  # main_uec.cpp: path_entropy_size = 64
NO_REORDER_LOSS = 1e6  # smoothed RTTs: podsim's SR never declares a gap lost before the RTO
AR_FIRST_LEVEL = 0.05  # queue.cpp quantized_queuesize: level 0 below 5 % of maxsize
UEC_ACK_EVERY = 4  # uec.cpp UecSink::_bytes_unacked_threshold = 16384 B: an ACK per 4 packets


@dataclass(frozen=True)
class Row:
    """One comparison: the traffic, htsim's flags and podsim's NIC overrides."""

    name: str
    pattern: str  # permutation | all-to-all
    binary: str  # htsim_uec | htsim_roce
    htsim_args: tuple[str, ...]
    nic: dict[str, Any]
    roce: bool = False
    adaptive: bool = False  # switches route adaptively
    one_ev: bool = False  # htsim's source has one entropy value: NSCC cannot move the flow
    queue_bdp: int = NONTRIM_QUEUE_BDP  # each switch queue, in BDPs (htsim -q in packets)
    notes: str = ""


ROWS = (
    Row("perm-reps", "permutation", "htsim_uec", ("-load_balancing_algo", "reps"),
        {"model": "uec"}),
    Row("perm-oblivious", "permutation", "htsim_uec", ("-load_balancing_algo", "oblivious"),
        {"model": "uec", "multipath": {"selector": "spray"}}),
    Row("perm-single", "permutation", "htsim_uec",
        ("-load_balancing_algo", "reps", "-paths", "1"),
        {"model": "uec", "multipath": {"selector": "ecmp"}}, one_ev=True,
        queue_bdp=ONE_PATH_QUEUE_BDP),
    Row("perm-roce-pfc", "permutation", "htsim_roce", ("-strat", "ecmp_host", "-paths", "1"),
        {"model": "roce", "cc": {"name": "none"}}, roce=True),
    Row("perm-switch-ar", "permutation", "htsim_uec", ("-strat", "ecmp_ar"),
        {"model": "uec", "multipath": {"selector": "ecmp"}}, adaptive=True, one_ev=True),
    Row("a2a-reps", "all-to-all", "htsim_uec", ("-load_balancing_algo", "reps"),
        {"model": "uec"}),
)  # fmt: skip


# ---------------------------------------------------------------- htsim's derived quantities
def network_rtt_s() -> float:
    """htsim's network RTT (main_uec.cpp ``calculate_rtt``): twice the diameter's propagation
    plus one data packet's and one ACK's serialisation per hop of the diameter."""
    per_hop = ((MSS + UEC_HDR) + UEC_ACK) * 8 / LINK_BPS
    return 2 * DIAMETER_HOPS * HOP_S + DIAMETER_HOPS * per_hop


def bdp_packets() -> int:
    """main_uec.cpp ``calculate_bdp_pkt``: the network BDP in whole data packets."""
    return math.ceil(network_rtt_s() * LINK_BPS / 8 / (MSS + UEC_HDR))


def cable_m() -> float:
    """Fibre per link such that podsim's link latency is htsim's ``-hop_latency`` (1 us, all
    of a link's delay in htsim): podsim adds the PHY's FEC latency (one RS(544,514) codeword
    plus the decoder pipeline, about 101 ns at 400GbE) to the fibre's 5 ns/m, so the fibre is
    that much shorter (about 180 m)."""
    return (HOP_S - get_phy(PHY).fec_latency_s) / PROPAGATION_S_PER_M


def queue_bytes(bdps: int = NONTRIM_QUEUE_BDP) -> int:
    """Each switch queue of htsim's UEC fat-tree without trimming: 5 x BDP packets by default
    (``-q`` sets another number of packets)."""
    return bdps * bdp_packets() * (MSS + UEC_HDR)


def uec_min_rto_s(bdps: int = NONTRIM_QUEUE_BDP) -> float:
    """htsim's UEC retransmission timeout (main_uec.cpp: 15 us plus draining a full queue at
    each of 6 hops, ``_min_rto = 15 us + queuesize x 6 x 8 / linkspeed``)."""
    return 15e-6 + queue_bytes(bdps) * DIAMETER_HOPS * 8 / LINK_BPS


def ar_band_bytes() -> int:
    """htsim's adaptive routing compares queue sizes quantised to levels whose first step is 5 %
    of the queue's capacity (queue.cpp ``BaseQueue::quantized_queuesize``: < 5, 10, 20 % and
    above); podsim's ``adaptive_routing_quantum`` takes that first step as its (uniform) band."""
    return math.ceil(AR_FIRST_LEVEL * queue_bytes())


def uec_switch(bdps: int = NONTRIM_QUEUE_BDP) -> dict[str, Any]:
    """Queue and ECN settings of htsim's UEC fat-tree without trimming, as podsim keys."""
    pkt = MSS + UEC_HDR
    bdp = bdp_packets()
    return {
        "latency": "0ns",
        "store_and_forward": True,  # htsim's queue serialises a whole packet before its pipe
        "buffer": None,  # per-port buffer x ports, shared (htsim: fixed per port)
        "buffer_per_port": f"{queue_bytes(bdps)}B",
        "ecn": {
            "enabled": True,
            "kmin": f"{math.ceil(0.2 * bdp) * pkt}B",
            "kmax": f"{math.ceil(0.8 * bdp) * pkt}B",
            "pmax": 1.0,
        },
        "pfc": {"enabled": False},
    }


def roce_switch() -> dict[str, Any]:
    """htsim's RoCE fat-tree: lossless input queues pausing at 15 packets, resuming at 12."""
    return {
        "latency": "0ns",
        "store_and_forward": True,  # htsim's queue serialises a whole packet before its pipe
        "ecn": {"enabled": False},
        "pfc": {
            "enabled": True,
            "xoff": f"{ROCE_PFC_HIGH_PKTS * MSS}B",
            "xon": f"{ROCE_PFC_LOW_PKTS * MSS}B",
            "hold_until_sent": True,  # LosslessInputQueue releases in completedService
        },
    }


# ---------------------------------------------------------------- the traffic
def traffic(pattern: str, seed: int) -> pd.DataFrame:
    """The trace both simulators carry (ranks = hosts)."""
    if pattern == "permutation":
        return synthetic.permutation(HOSTS, PERM_BYTES, seed=seed)
    if pattern == "all-to-all":
        return synthetic.uniform_all_to_all(HOSTS, A2A_PAIR_BYTES)
    raise ValueError(f"unknown pattern {pattern!r}")


def connection_matrix(trace: pd.DataFrame, host_of_rank: np.ndarray) -> str:
    """htsim's connection-matrix text: every flow starts at time 0."""
    t = trace[trace["bytes"] > 0]
    lines = [f"Nodes {HOSTS}", f"Connections {len(t)}"]
    for i, (s, d, b) in enumerate(zip(t["src_rank"], t["dst_rank"], t["bytes"], strict=True)):
        lines.append(f"{host_of_rank[s]}->{host_of_rank[d]} id {i + 1} start 0 size {b}")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- podsim's side
@dataclass
class Side:
    makespan_s: float = math.nan
    mean_fct_s: float = math.nan
    flows: int = 0
    drops: int = 0
    retx: int = 0
    cpu_s: float = math.nan
    extra: dict[str, Any] = field(default_factory=dict)


def podsim_scenario(row: Row, seed: int) -> Any:
    """The row's podsim scenario (validated)."""
    sc, _ = load_scenario(podsim_doc(row, seed))
    return sc


def podsim_doc(row: Row, seed: int, workload: dict[str, Any] | None = None) -> dict[str, Any]:
    """The row's podsim scenario as a document (``workload`` replaces the placeholder; the
    comparison itself hands the engine the trace directly)."""
    nic = {**row.nic, "mtu": f"{MSS}B", "multipath": {**row.nic.get("multipath", {})}}
    nic["qp_miss_penalty"] = "0s"  # htsim models no QP-context cache (docstring)
    nic["multipath"]["paths"] = EVS
    if not row.roce:
        nic["ack_coalesce"] = UEC_ACK_EVERY
        # loss only by timeout, as htsim's UEC source without trimming and without SLEEK:
        # its RTO, and a reordering window no gap outlives
        nic["rto"] = f"{uec_min_rto_s(row.queue_bdp) * 1e9:.0f}ns"
        nic["reorder_window"] = NO_REORDER_LOSS
        # and no tail-loss probe before it (its floor is the reordering window's): htsim's UEC
        # source without SLEEK sends none, and podsim's fired spuriously behind deep incasts
        nic["reorder_window_min"] = nic["rto"]
        cc: dict[str, Any] = {"network_rtt_s": network_rtt_s()}
        if row.one_ev:
            # htsim's -paths 1 (and ecmp_ar) gives the source one entropy value, so an ECN
            # mark below target has no other path to move to; podsim's NSCC would re-hash
            cc["path_change_on_ecn"] = False
        nic["cc"] = {"name": "nscc", "params": cc}
    cable = f"{cable_m():.6g}m"
    return {
        "name": f"htsim-{row.name}",
        "seed": seed,
        "engine": "packet",
        "cluster": {
            "topology": {
                "name": "fat-tree",
                "params": {
                    "k": K,
                    "nic_cable": cable,
                    "leaf_spine_cable": cable,
                    "spine_core_cable": cable,
                },
            },
            "nic": nic,
            "switch": {
                **(roce_switch() if row.roce else uec_switch(row.queue_bdp)),
                "adaptive_routing": row.adaptive,
                **({"adaptive_routing_quantum": f"{ar_band_bytes()}B"} if row.adaptive else {}),
            },
        },
        "workload": workload or {"synthetic": {"pattern": "uniform"}},
        "outputs": {"plots": False},
    }


def host_index(cluster: Any) -> np.ndarray:
    """Rank -> host number (``nic17.p0`` -> 17)."""
    out = np.empty(cluster.num_ranks, dtype=np.int64)
    for r, ports in enumerate(cluster.rank_ports):
        m = re.fullmatch(r"nic(\d+)\.p\d+", ports[0])
        if m is None:
            raise RuntimeError(f"rank {r} is on {ports[0]!r}, not a fat-tree host port")
        out[r] = int(m.group(1))
    return out


def run_podsim(row: Row, seed: int) -> tuple[Side, str]:
    """podsim's packet engine on the row; also returns htsim's connection matrix."""
    sc = podsim_scenario(row, seed)
    cluster = build_cluster(sc, HOSTS)
    tr = traffic(row.pattern, seed).copy()
    tr["phase"] = "other"
    tr = assign_hops(tr, cluster)
    tr = tr[tr["bytes"] > 0].reset_index(drop=True)
    cm = connection_matrix(tr, host_index(cluster))
    ctx = RunContext(sc, cluster, tr, _no_compute())
    c0 = time.process_time()
    out = ENGINES.get("packet")(ctx)
    cpu = time.process_time() - c0
    s = out.summary(cluster.num_ranks)
    m = out.messages
    # htsim prints "finished at" when the sender's cumulative ACK covers the flow (uec.cpp
    # UecSrc::checkFinished, roce.cpp RoceSrc::processAck), so podsim's side is the sender's
    # too: qps.acked_s, one ACK's trip after messages.end_s (the receiver holding the last byte)
    done = out.qps["acked_s"].to_numpy(float)
    post = m.groupby(["src_rank", "dst_rank"])["post_s"].min()
    post = post.loc[list(zip(out.qps["src_rank"], out.qps["dst_rank"], strict=True))].to_numpy()
    side = Side(
        makespan_s=float(done.max()),
        mean_fct_s=float((done - post).mean()),
        flows=len(m),
        drops=int(s["counters"]["drops"]),
        retx=int(s["counters"]["retransmitted_packets"]),
        cpu_s=cpu,
    )
    if (m["status"] != "complete").any():
        side.extra["unfinished"] = int((m["status"] != "complete").sum())
    return side, cm


def _no_compute() -> pd.DataFrame:
    return pd.DataFrame({"step": [], "layer": [], "rank": [], "compute_s": []})


# ---------------------------------------------------------------- htsim's side
def htsim_command(row: Row, binary: Path, cm: Path, seed: int) -> list[str]:
    common = ["-tm", str(cm), "-nodes", str(HOSTS), "-tiers", "3",
              "-linkspeed", f"{LINK_BPS / 1e6:.0f}", "-hop_latency", f"{HOP_S * 1e6:g}",
              "-switch_latency", "0", "-seed", str(seed), "-end", "100000"]  # fmt: skip
    if row.roce:
        return [str(binary), *common, "-mtu", str(MSS), *row.htsim_args]
    # -mtu counts the header (main_uec.cpp: _mss = _mtu - _hdr_size; its default 4150 would
    # leave 4086 B of payload)
    queue = [] if row.queue_bdp == NONTRIM_QUEUE_BDP else ["-q", str(row.queue_bdp * bdp_packets())]
    return [str(binary), *common, "-mtu", str(MSS + UEC_HDR), "-sender_cc_only",
            "-sender_cc_algo", "nscc", "-disable_trim", *queue, *row.htsim_args]  # fmt: skip


FINISH = re.compile(r"finished at ([0-9.eE+-]+)")
REPS_EXIT = "REPS currently requires trimming"
START_FINISH = re.compile(r"start ([0-9.eE+-]+) .*finished at ([0-9.eE+-]+)")


def run_htsim(row: Row, bindir: Path, cm_text: str, seed: int, keep: Path | None) -> Side:
    binary = bindir / row.binary
    if not binary.is_file():
        raise SystemExit(f"--htsim {bindir}: no {row.binary} there (benchmarks/README.md)")
    with tempfile.TemporaryDirectory() as d:
        wd = Path(d)
        cm = wd / f"{row.name}.cm"
        cm.write_text(cm_text)
        cmd = htsim_command(row, binary.resolve(), cm, seed)
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        p = subprocess.run(cmd, cwd=wd, capture_output=True, text=True, check=False)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        log = p.stdout + p.stderr
        if keep is not None:
            keep.mkdir(parents=True, exist_ok=True)
            shutil.copy(cm, keep / cm.name)
            (keep / f"{row.name}-seed{seed}.log").write_text(" ".join(cmd) + "\n" + log)
    if p.returncode != 0 and REPS_EXIT in log:
        # uec_mp.cpp UecMpReps::processEv: a retransmission timeout without trimming ends the
        # run (REPS's freezing mode is implemented only with trimming); the timeout follows tail
        # drops where one-path flows overfill a per-port queue. No completion time exists.
        return Side(flows=len(FINISH.findall(log)), extra={"exited": REPS_EXIT})
    if p.returncode != 0:
        tail = "\n".join(log.splitlines()[-5:])
        raise SystemExit(f"{row.binary} failed (exit {p.returncode}):\n{tail}")
    ends = [float(x) * 1e-6 for x in FINISH.findall(log)]  # htsim prints microseconds
    side = Side(
        makespan_s=max(ends) if ends else math.nan,
        mean_fct_s=float(np.mean(ends)) if ends else math.nan,  # every flow starts at 0
        flows=len(ends),
        cpu_s=(after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
    )
    m = re.search(r"Rtx: (\d+)", log)
    side.retx = int(m.group(1)) if m else 0
    return side


# ---------------------------------------------------------------- the table
def rel(a: float, b: float) -> float:
    return (a - b) / b if b and math.isfinite(a) and math.isfinite(b) else math.nan


def mean_se(values: list[float]) -> tuple[float, float]:
    """Mean and standard error of the finite values (a run htsim ended early has none); the
    error is NaN below two values."""
    x = np.asarray([v for v in values if math.isfinite(v)], dtype=float)
    if len(x) == 0:
        return math.nan, math.nan
    se = float(x.std(ddof=1) / math.sqrt(len(x))) if len(x) > 1 else math.nan
    return float(x.mean()), se


def rel_se(a: float, a_se: float, b: float, b_se: float) -> float:
    """Standard error of ``rel(a, b)`` for independent means (first order): the two
    simulators' seeds draw their paths independently."""
    if not (b and math.isfinite(a_se) and math.isfinite(b_se)):
        return math.nan
    return (a / b) * math.sqrt((a_se / a) ** 2 + (b_se / b) ** 2)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--htsim", type=Path, default=None, help="folder of htsim_uec / htsim_roce")
    ap.add_argument("--only", nargs="*", default=None, choices=[r.name for r in ROWS])
    ap.add_argument("--seeds", type=int, default=10, help="seeds averaged on each row")
    ap.add_argument("--seed", type=int, default=1, help="first seed")
    ap.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    ap.add_argument("--keep", type=Path, default=None, help="keep htsim's logs and matrices")
    args = ap.parse_args()
    rows = [r for r in ROWS if not args.only or r.name in args.only]
    print(
        f"fat-tree k={K}: {HOSTS} hosts, {LINK_BPS / 1e9:.0f} Gb/s, {HOP_S * 1e6:g} us links; "
        f"htsim network RTT {network_rtt_s() * 1e6:.4f} us, BDP {bdp_packets()} packets"
    )
    table = []
    for row in rows:
        seeds = range(args.seed, args.seed + args.seeds)
        ps, hs = [], []
        for seed in seeds:
            p, cm = run_podsim(row, seed)
            ps.append(p)
            if args.htsim is not None:
                hs.append(run_htsim(row, args.htsim, cm, seed, args.keep))
            h = hs[-1] if hs else None
            line = f"  {row.name} seed {seed}: podsim {p.makespan_s * 1e6:.2f} us"
            line += f" ({p.cpu_s:.1f} s CPU)"
            if h is not None and "exited" in h.extra:
                line += f", htsim exited ({h.extra['exited']}; {h.flows} flows had finished)"
            elif h is not None:
                line += f", htsim {h.makespan_s * 1e6:.2f} us ({h.cpu_s:.1f} s CPU)"
            print(line, flush=True)
        pm, pm_se = mean_se([p.makespan_s for p in ps])
        hm, hm_se = mean_se([h.makespan_s for h in hs])
        pf, pf_se = mean_se([p.mean_fct_s for p in ps])
        hf, hf_se = mean_se([h.mean_fct_s for h in hs])
        table.append(
            {
                "row": row.name,
                "seeds": len(ps),
                "flows": ps[0].flows,
                "podsim makespan us": pm * 1e6,
                "podsim SE": pm_se * 1e6,
                "htsim makespan us": hm * 1e6,
                "htsim SE": hm_se * 1e6,
                "makespan error %": 100 * rel(pm, hm),
                "error SE %": 100 * rel_se(pm, pm_se, hm, hm_se),
                "podsim mean FCT us": pf * 1e6,
                "htsim mean FCT us": hf * 1e6,
                "FCT error %": 100 * rel(pf, hf),
                "FCT error SE %": 100 * rel_se(pf, pf_se, hf, hf_se),
                "podsim drops/retx": f"{sum(p.drops for p in ps)}/{sum(p.retx for p in ps)}",
                "htsim retx": sum(h.retx for h in hs) if hs else "-",
                "htsim exited": sum("exited" in h.extra for h in hs) if hs else "-",
                "podsim CPU s": sum(p.cpu_s for p in ps),
                "htsim CPU s": sum(h.cpu_s for h in hs) if hs else math.nan,
            }
        )
    df = pd.DataFrame(table)
    if args.htsim is None:
        df = df[[c for c in df.columns if not c.startswith("htsim") and "error" not in c]]
    fmt = {c: "{:.1f}" for c in df.columns if df[c].dtype.kind == "f"}
    print()
    if args.markdown:
        print(frame_to_markdown(df, digits=1))
    else:
        print(df.to_string(index=False, formatters={c: f.format for c, f in fmt.items()}))
    if args.htsim is not None:
        worst = df["makespan error %"].abs().max()
        print(f"\nworst makespan error {worst:.1f} % (target: within 5 % on every row)")


if __name__ == "__main__":
    main()
