"""Issue 5 at the scenario level: the node's PCIe tree shapes simulated runs (packet engine;
the closed forms that do not need per-rank goodput also on the flow engine, issue 16).

Every expected figure is a closed form computed here from the inputs: PCIe Gen5 link rates
from lanes x 32 GT/s x 128/130 x MPS/(MPS + 24 B), the NIC's RoCEv2 goodput MAC x MTU/(MTU+82),
the root complex's P2P limit and the SSD's read rate from their documented defaults.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from podsim.fabric.packet import RETH_BYTES, ROCE_OVERHEAD
from podsim.fabric.phy import get_phy
from podsim.nic.pcie.devices import NicDma, PcieSwitch, RootComplex, Ssd
from podsim.nic.transport.qp import ACK_WIRE_EXTRA
from podsim.scenarios.input.loader import load_scenario
from podsim.scenarios.runner import run

MTU = 4096
NIC_MAC_BPS = 400e9
#: bytes per bulk message: long enough that its idle latency (about 3.3 us on the on-card
#: switch: the transmit's read round trip, cold-QP misses, the switch, FEC) is < 2 % of its time
B = 8 << 20
TOL = 0.03


def link_rate(lanes: int, mps: int = 256, header: int = 24) -> float:
    """Gen5 effective payload rate per direction (docs/physics.md, "PCIe 5.0")."""
    return lanes * 32e9 * 128 / 130 * mps / (mps + header)


def goodput(mac_bps: float = NIC_MAC_BPS, mtu: int = MTU, acks: bool = False) -> float:
    """RoCEv2 payload rate of a port; ``acks``: the link also carries one ACK (82 B + AETH)
    per data packet of the reverse flow."""
    ack = ROCE_OVERHEAD + ACK_WIRE_EXTRA if acks else 0
    return mac_bps * mtu / (mtu + ROCE_OVERHEAD + ack)


def write_trace(path: Path, rows: list[tuple[int, int, int]]) -> str:
    pd.DataFrame(
        [
            {"step": 0, "layer": 0, "phase": "dispatch", "src_rank": a, "dst_rank": b,
             "bytes": n, "tokens": 0, "start_s": 0.0, "hop": "rdma"}
            for a, b, n in rows
        ]
    ).to_csv(path, index=False)  # fmt: skip
    return str(path)


STAR2 = {"name": "star", "params": {"hosts": 2}}  # two servers of one GPU and one NIC each
#: servers of two GPUs behind one NIC card
RAIL_SHARED = {"name": "rail", "params": {"servers": 3, "gpus_per_server": 2, "gpus_per_nic": 2}}


def scenario(trace: str, topology: dict, layout: str | None, ranks: int, *,
             layout_params: dict | None = None, storage: dict | None = None,
             endpoint: str = "nic", engine: str = "packet") -> dict:  # fmt: skip
    workload: dict = {"trace": {"path": trace, "ranks": ranks, "compute_time": "0us"}}
    if storage is not None:
        workload["storage"] = storage
    cluster: dict = {
        "topology": topology,
        "nic": {"mtu": "4KiB", "cc": {"name": "dcqcn"},
                "multipath": {"selector": "spray", "paths": 4}},
    }  # fmt: skip
    if layout is not None:
        cluster["layout"] = layout
        cluster["layout_params"] = layout_params or {}
    return {
        "name": "pcie",
        "seed": 1,
        "engine": engine,
        "cluster": cluster,
        "workload": workload,
        "sim": {"endpoint": endpoint},
        "outputs": {"plots": False, "queue_series": False},
    }


def fct(res) -> list[float]:
    return res.messages["fct_s"].tolist()


def net_goodput(res, side: str) -> list[float | None]:
    return res.summary["engine_info"]["pcie"]["gpu_network_goodput"][f"{side}_goodput_bps"]


ENGINES = pytest.mark.parametrize("engine", ["packet", "flow"])


@ENGINES
def test_root_complex_is_slower_than_on_card_switch_by_the_p2p_cap(
    tmp_path: Path, engine: str
) -> None:
    tr = write_trace(tmp_path / "t.csv", [(0, 1, B)])
    on_card = run(scenario(tr, STAR2, "on-card-switch", 2, engine=engine))
    rc = run(scenario(tr, STAR2, "root-complex", 2, engine=engine))
    p2p = RootComplex().p2p_limit_bps  # 32 GB/s per root port [E]
    # on-card switch: GPU -> switch -> NIC at x16 (57.6 GB/s) > 400G goodput: the NIC binds
    assert 8 * B / fct(on_card)[0] == pytest.approx(goodput(), rel=TOL)
    # root complex: GPU -> CPU -> NIC is held to the root port's P2P limit, both ends
    assert 8 * B / fct(rc)[0] == pytest.approx(p2p, rel=TOL)
    assert fct(rc)[0] / fct(on_card)[0] == pytest.approx(goodput() / p2p, rel=TOL)
    assert on_card.summary["pcie"]["gpu_nic_path_classes"] == ["PIX"]
    assert rc.summary["pcie"]["gpu_nic_path_classes"] == ["PHB"]


@ENGINES
def test_pcie_latency_is_a_read_round_trip_at_the_start_and_a_write_at_the_end(
    tmp_path: Path, engine: str
) -> None:
    """Transmit: the NIC reads the payload (request NIC -> GPU, the GPU's read latency,
    completion GPU -> NIC); receive: a posted write NIC -> GPU, one way."""
    tr = write_trace(tmp_path / "t.csv", [(0, 1, 64)])
    bare = fct(run(scenario(tr, STAR2, None, 2, engine=engine)))[0]
    hop = PcieSwitch().hop_latency_s  # 115 ns (Broadcom PEX89144 Gen5 [S])
    read = NicDma().read_latency_s  # 1 us [E]
    on_card = fct(run(scenario(tr, STAR2, "on-card-switch", 2, engine=engine)))[0]
    assert on_card - bare == pytest.approx((hop + read + hop) + hop, abs=1e-12)
    rc = fct(run(scenario(tr, STAR2, "root-complex", 2, engine=engine)))[0]
    cpu = RootComplex().latency_s  # GPU and NIC on root ports: the CPU's extra latency
    assert rc - bare == pytest.approx((cpu + read + cpu) + cpu, abs=1e-12)
    slow = {"nic_dma": {"read_latency_s": "3us"}}
    later = fct(run(scenario(tr, STAR2, "on-card-switch", 2, layout_params=slow, engine=engine)))
    assert later[0] - on_card == pytest.approx(2e-6, abs=1e-12)


@ENGINES
def test_one_small_message_by_hand(tmp_path: Path, engine: str) -> None:
    """64 B from GPU 0 to GPU 1, each behind an on-card switch, across one Ethernet switch:
    the read round trip, then the network (one frame's serialisation, propagation and FEC on
    both links, the switch's cut-through latency, the cold QP's context misses), then the
    receive's write."""
    tr = write_trace(tmp_path / "t.csv", [(0, 1, 64)])
    doc = scenario(tr, STAR2, "on-card-switch", 2, engine=engine)
    got = fct(run(doc))[0]
    sc, _ = load_scenario(doc)
    hop, read = PcieSwitch().hop_latency_s, NicDma().read_latency_s
    tx_dma = hop + read + hop  # request NIC -> switch -> GPU, read, completion back
    frame = 64 + ROCE_OVERHEAD + RETH_BYTES  # one RDMA WRITE frame (RETH on the first)
    serialise = 8 * frame / NIC_MAC_BPS
    phy = get_phy("400GbE")
    links = 2 * (2.0 * 5e-9 + phy.fec_latency_s)  # two 2 m links, 5 ns/m, RS-FEC each
    switch = sc.cluster.switch.latency  # 600 ns [E], cut-through
    # a cold QP: the sender waits one QP-context miss, the receiver one more (nothing behind
    # the only frame to hide it)
    qp = 2 * sc.cluster.nic.qp_miss_penalty
    rx_dma = hop  # NIC -> switch -> GPU, posted write
    assert got == pytest.approx(tx_dma + serialise + links + switch + qp + rx_dma, rel=1e-9)


@pytest.mark.parametrize("nic_lanes", [8, 16])
def test_two_gpus_sharing_one_nic_each_get_half(tmp_path: Path, nic_lanes: int) -> None:
    # ranks 0 and 1 sit behind NIC card 0 and send to servers 1 and 2 at the same time
    tr = write_trace(tmp_path / "t.csv", [(0, 2, B), (1, 4, B)])
    res = run(scenario(tr, RAIL_SHARED, "on-card-switch", 6,
                       layout_params={"nic_lanes": nic_lanes}))  # fmt: skip
    shared = min(link_rate(nic_lanes), goodput())  # the card switch -> NIC link or the NIC
    tx = net_goodput(res, "tx")
    for rank in (0, 1):
        assert tx[rank] == pytest.approx(shared / 2, rel=TOL)
    if nic_lanes == 8:  # the x8 link binds below the NIC's goodput: PCIe sets the rate
        assert shared == link_rate(8) < goodput()


def test_ssd_read_lowers_goodput_only_when_the_shared_link_saturates(tmp_path: Path) -> None:
    # rank 1 receives from rank 0 and sends to it while reading from the SSD on its NIC card
    tr = write_trace(tmp_path / "t.csv", [(0, 1, B), (1, 0, B)])
    read = {"reads_per_gpu": "1GiB", "start": "0us", "ranks": [1]}
    gpu_link = link_rate(16)  # card switch -> GPU, shared by NIC writes and SSD reads

    def rx_tx(ssd: dict, storage: dict | None) -> tuple[float, float]:
        lp = {"ssds": 1, "ssd": ssd}
        res = run(scenario(tr, STAR2, "on-card-switch", 2, layout_params=lp, storage=storage))
        return net_goodput(res, "rx")[1], net_goodput(res, "tx")[1]

    base_rx, base_tx = rx_tx({}, None)
    net = goodput(acks=True)  # both directions busy: each link also carries the other's ACKs
    assert base_rx == pytest.approx(net, rel=TOL)
    # 14 GB/s SSD + 400G NIC > x16: the link saturates and the NIC gets what the SSD leaves
    ssd = Ssd().read_bps
    assert net + ssd > gpu_link
    rx, tx = rx_tx({}, read)
    # the link also carries the transmit's read requests (24 B per 512 B read, in write
    # units q = 24/512 x 256/280): rx + q tx = link - SSD, and max-min holds the read, whose
    # requests cross the saturated link, to the same share as the writes
    q = 24 / 512 * 256 / 280
    share = (gpu_link - ssd) / (1 + q)
    assert rx == pytest.approx(share, rel=TOL)
    assert base_rx - rx == pytest.approx(net - share, rel=0.15)
    assert tx == pytest.approx(share, rel=TOL) and tx < base_tx
    # a 5 GB/s read fits next to the NIC: no change at all
    slow = 5e9 * 8
    assert net + slow < gpu_link
    rx_slow, _ = rx_tx({"read_bps": "5GB/s"}, read)
    assert rx_slow == pytest.approx(base_rx, rel=1e-9)


@ENGINES
def test_storage_reads_are_reported(tmp_path: Path, engine: str) -> None:
    tr = write_trace(tmp_path / "t.csv", [(0, 1, B)])  # lasts longer than the reads
    read = {"reads_per_gpu": "64KiB", "start": "1us"}
    doc = scenario(tr, STAR2, "on-card-switch", 2, layout_params={"ssds": 1}, storage=read,
                   engine=engine)  # fmt: skip
    res = run(doc)
    again = run(doc)  # same seed: bit-identical
    pd.testing.assert_frame_equal(res.messages, again.messages)
    reads = res.summary["engine_info"]["pcie"]["storage_reads"]
    assert reads == again.summary["engine_info"]["pcie"]["storage_reads"]
    assert [r["rank"] for r in reads] == [0, 1]
    ssd = Ssd()
    # SSD -> card switch -> GPU at the SSD's media rate (the x16 GPU link has room for it next
    # to the NIC), then the path's switch hop and the SSD's read latency
    want = 8 * (64 << 10) / ssd.read_bps + ssd.read_latency_s + PcieSwitch().hop_latency_s
    for r in reads:
        assert r["start_s"] == pytest.approx(1e-6)
        assert r["bytes_done"] == r["bytes"] == 64 << 10
        assert r["end_s"] - r["start_s"] == pytest.approx(want, rel=1e-9)


@pytest.mark.parametrize(("endpoint", "engine"), [("nic", "packet"), ("host", "packet"),
                                                   ("nic", "flow")])  # fmt: skip
def test_same_card_gpu_pairs_take_pcie_time(tmp_path: Path, endpoint: str, engine: str) -> None:
    tr = write_trace(tmp_path / "t.csv", [(0, 1, B)])  # ranks 0 and 1 share NIC card 0
    oc = run(scenario(tr, RAIL_SHARED, "on-card-switch", 6, endpoint=endpoint, engine=engine))
    want = 8 * B / link_rate(16) + PcieSwitch().hop_latency_s  # GPU -> card switch -> GPU
    assert fct(oc)[0] == pytest.approx(want, rel=1e-9)
    rc = run(scenario(tr, RAIL_SHARED, "root-complex", 6, endpoint=endpoint, engine=engine))
    root = RootComplex()
    assert fct(rc)[0] == pytest.approx(8 * B / root.p2p_limit_bps + root.latency_s, rel=1e-9)
    info = oc.summary["engine_info"]
    assert info["pcie_local_messages"] == 1 and info["pcie"]["p2p_bytes"] == B
    # without a node layout there is no tree to cross: delivered at once, as before
    bare = scenario(tr, RAIL_SHARED, None, 6, endpoint=endpoint, engine=engine)
    assert fct(run(bare))[0] == 0.0


def test_tree_is_solved_per_active_set_not_per_message(tmp_path: Path) -> None:
    tr = write_trace(tmp_path / "t.csv", [(0, 1, 16 << 10)] * 40)
    res = run(scenario(tr, STAR2, "on-card-switch", 2))
    p = res.summary["engine_info"]["pcie"]
    # streams become active when the first message posts and idle after the last completes
    assert p["resolves"] <= 4 < len(res.messages)
    assert p["solves"] <= 2
