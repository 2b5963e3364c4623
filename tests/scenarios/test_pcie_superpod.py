"""Issue 16: which PCIe link binds on a SuperPoD node, checked against its closed-form capacity.

A small ``superpod-128`` (two pods of 16 accelerators, the preset's 400G SmartNIC as two
200GbE planes) runs a uniform all-to-all on the flow engine; every GPU receives the same bytes
from the other pod over RDMA, so each NIC card's receive DMA is a steady stream and the RDMA
completion time is its bytes over the narrowest rate on the way. The rates, from
docs/physics.md (written out here, not read from the model):

- the network: 400 Gb/s of MAC at MTU 4096 carries 4096 / (4096 + 82 + 86) of payload (RoCEv2
  framing, "Packet overhead", and the ACK of the same size of traffic the other way: one
  82 + 4 B ACK per packet, and in a uniform all-to-all every link carries as many ACKs as
  data packets), times the flow engine's efficiency of a shared fabric queue for DCQCN
  (fabric/flow/cc.py, measured by benchmarks/calibrate_cc.py);
- PCIe Gen5 x16: 32 GT/s x 16 lanes x 128/130 = 63.0 GB/s raw per direction, writes of MPS 256
  with a 24 B TLP header carry 256/280 of it: 57.6 GB/s ("PCIe 5.0"); a NIC transmits by
  reading GPU memory, and its read requests (24 B per 512 B, the default Max_Read_Request_Size)
  travel NIC -> GPU beside its receive writes, q = 24/512 x 256/280 of a write's cost per
  byte read ("PCIe reads");
- a Gen5 NVMe read: 14 GB/s ("PCIe 5.0", Micron 9550 class);
- the root complex's peer-to-peer forwarding per root port: 32 GB/s, an estimate [E]
  (nic/pcie/devices.py), the limit of GPU <-> NIC traffic with no PCIe switch.

Where each layout binds: with a switch (external board or on the NIC card) GPU and NIC share it,
the NIC's x16 link (57.6 GB/s) is wider than 400G (49 GB/s) and nothing on PCIe binds, unless a
GPU has a whole NIC to itself and reads from its SSD at the same time: the switch -> GPU x16 link
then carries 14 GB/s of SSD reads, the NIC's writes and the NIC's read requests for what the GPU
sends (as much as it receives in a uniform all-to-all): rx (1 + q) = 57.6 - 14, 41.8 GB/s. With two
GPUs per NIC the same reads fit (each GPU takes half the NIC's 49 GB/s). With no switch
(root-complex) all the NIC's receive crosses the CPU: 32 GB/s, whatever else runs. The on-card
switch's wider host link (x32 against x16) is crossed by none of this traffic, so on-card and
external switch give the same times in every case.
"""

from __future__ import annotations

import itertools

import pytest
from podsim.fabric.flow.cc import cc_efficiency
from podsim.scenarios.runner import run

GB = 1e9
NET = 400e9 / 8 * 4096 / (4096 + 82 + 86) * cc_efficiency("dcqcn")  # payload B/s, fabric
X16 = 32e9 * 16 * 128 / 130 / 8 * 256 / (256 + 24)  # Gen5 x16 write payload, B/s
REQ = 24 / 512 * 256 / 280  # read requests per byte read, in write-payload units
SSD = 14 * GB
ROOT_P2P = 32 * GB
MSG = 4 << 20
PER_POD = 16

SCENARIO = {
    "name": "pcie-superpod",
    "seed": 1,
    "engine": "flow",
    "cluster": {
        "preset": "superpod-128",
        "params": {"pods": 2, "gpus_per_pod": PER_POD},
        "rank_map": "contiguous",
        "nic": {"model": "smartnic-400g"},
        "layout_params": {"ssds": 8},
    },
    "workload": {"synthetic": {"pattern": "uniform", "size": MSG}},
    "outputs": {"plots": False},
}
CASES = list(itertools.product(("external-switch", "on-card-switch", "root-complex"), (2, 1),
                               (False, True)))  # fmt: skip


def nic_rx_rate(layout: str, gpus_per_nic: int, reads: bool) -> float:
    """Closed form: payload rate into one NIC card's GPUs (module docstring)."""
    if layout == "root-complex":
        return min(NET, ROOT_P2P)
    # what the switch -> GPU link leaves the NIC: with SSD reads it saturates, and the GPU's
    # receive writes share it with the read requests of its transmit (the same rate)
    per_gpu_link = (X16 - SSD) / (1 + REQ) if reads else X16
    return min(NET, X16, gpus_per_nic * per_gpu_link)


@pytest.fixture(scope="module")
def rdma_end() -> dict[tuple[str, int, bool], float]:
    """The last RDMA byte's arrival per case (seconds)."""
    out = {}
    for layout, gpn, reads in CASES:
        over = [f"cluster.layout={layout}", f"cluster.params.gpus_per_nic={gpn}"]
        if reads:
            over.append("workload.storage={reads_per_gpu: 1GiB}")
        res = run(SCENARIO, overrides=over)
        assert res.status == "complete"
        m = res.messages
        rdma = m[m["hop"] == "rdma"]
        assert len(rdma) == 2 * PER_POD * PER_POD
        out[(layout, gpn, reads)] = float(rdma["end_s"].max())
    return out


@pytest.mark.parametrize(("layout", "gpus_per_nic", "reads"), CASES)
def test_rdma_time_is_bytes_over_the_binding_rate(rdma_end, layout, gpus_per_nic, reads) -> None:
    # every GPU receives MSG from each of the other pod's GPUs; a card serves gpus_per_nic GPUs
    card_bytes = gpus_per_nic * PER_POD * MSG
    want = card_bytes / nic_rx_rate(layout, gpus_per_nic, reads)
    got = rdma_end[(layout, gpus_per_nic, reads)]
    # the model adds path latencies (a few us on a ms transfer), never takes away
    assert want <= got <= want * 1.01, (got, want)


def test_binding_cases_are_the_ones_the_closed_form_names(rdma_end) -> None:
    """PCIe binds where the closed form says so and nowhere else: the on-card and the external
    switch tie in every case; the root complex is slower in every case; reads slow a switched
    layout only with one GPU per NIC."""
    for gpn, reads in itertools.product((2, 1), (False, True)):
        ext = rdma_end[("external-switch", gpn, reads)]
        assert rdma_end[("on-card-switch", gpn, reads)] == pytest.approx(ext, rel=1e-9)
        assert rdma_end[("root-complex", gpn, reads)] > 1.3 * ext
    for layout in ("external-switch", "on-card-switch"):
        assert rdma_end[(layout, 2, True)] == pytest.approx(rdma_end[(layout, 2, False)], rel=1e-9)
        assert rdma_end[(layout, 1, True)] > 1.05 * rdma_end[(layout, 1, False)]
    # the root complex binds at the same 32 GB/s with or without reads
    for gpn in (2, 1):
        assert rdma_end[("root-complex", gpn, True)] == pytest.approx(
            rdma_end[("root-complex", gpn, False)], rel=1e-9
        )
