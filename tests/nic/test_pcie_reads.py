"""GPUDirect RDMA transmit as PCIe DMA reads (issue 14): hand-computed closed forms.

Wire figures (docs/physics.md "PCIe reads"): Gen5 x16 raw 16 x 32 GT/s x 128/130 per
direction; a Completion-with-Data carries ``c`` payload bytes plus 20 B (3-DW header, framing,
sequence number, LCRC); a Memory Read request is 24 B (4-DW header) per MRRS bytes requested;
a posted write of MPS 256 B costs 280 B, the unit of a link direction's capacity.
"""

from __future__ import annotations

import pytest
from podsim.nic.pcie import PcieLink, Stream, on_card_switch, root_complex, solve_streams
from podsim.nic.pcie.devices import NicDma
from podsim.nic.pcie.layouts import build_layout

RAW16 = 16 * 32e9 * 128 / 130  # bits/s per direction of Gen5 x16 after line coding
WRITE16 = RAW16 * 256 / 280  # a direction's capacity: posted writes of MPS 256 B


def read(gpu: str = "gpu0", nic: str = "nic0", label: str = "tx") -> Stream:
    return Stream(gpu, nic, label=label, read=True)


def test_lone_read_reaches_the_completion_efficiency_rate():
    tree = on_card_switch(gpus=1, nics=1)
    res = solve_streams(tree, [read()])
    want = RAW16 * 256 / (256 + 20)  # 58.45 GB/s, above a write's 57.6 GB/s (3-DW header)
    assert res.rate_bps[0] == pytest.approx(want, rel=1e-12)
    assert res.bottleneck[0] in ("gpu0->sw0", "sw0->nic0")
    # the requests: 24 B per 512 B read travel NIC -> switch -> GPU, a share of the raw rate
    # (utilisation = load / capacity, both in write units, = request wire bits / raw bits)
    for hop in ("nic0->sw0", "sw0->gpu0"):
        assert res.utilisation()[hop] == pytest.approx(want * 24 / 512 / RAW16, rel=1e-12)
    assert PcieLink().read_bps(256) == pytest.approx(want, rel=1e-12)


def test_rcb_split_completions_leave_a_400g_nic_short():
    """Completions split at a 64 B Read Completion Boundary: 64/(64+20) of the raw rate,
    48.0 GB/s, below the 50 GB/s a 400GbE NIC moves: the NIC becomes PCIe-bound."""
    tree = on_card_switch(gpus=1, nics=1, nic_dma={"completion_bytes": 64})
    res = solve_streams(tree, [read()], nic_tx_bps=400e9)
    assert res.rate_bps[0] == pytest.approx(RAW16 * 64 / 84, rel=1e-12)
    assert res.rate_bps[0] < 400e9 and res.bottleneck[0] != "nic0.tx"


def test_bigger_read_requests_cost_less_reverse_bandwidth():
    small = solve_streams(on_card_switch(gpus=1, nics=1), [read()])
    big = solve_streams(
        on_card_switch(gpus=1, nics=1, nic_dma={"max_read_request_bytes": "4KiB"}), [read()]
    )
    assert big.rate_bps[0] == pytest.approx(small.rate_bps[0])  # data side unchanged
    assert big.utilisation()["nic0->sw0"] == pytest.approx(
        small.utilisation()["nic0->sw0"] * 512 / 4096
    )


def test_reads_and_receive_writes_share_the_reverse_direction():
    """TX reads and RX writes of one GPU/NIC pair: NIC -> GPU carries the writes plus the
    requests, rx + q tx = C with q = (24/512) x (256/280); max-min gives both C/(1+q)."""
    tree = on_card_switch(gpus=1, nics=1)
    res = solve_streams(tree, [read(), Stream("nic0", "gpu0", label="rx")])
    q = 24 / 512 * 256 / 280
    share = WRITE16 / (1 + q)
    assert res.rate_bps == pytest.approx([share, share], rel=1e-12)
    assert set(res.bottleneck) <= {"nic0->sw0", "sw0->gpu0"}
    # the read alone would have had more; the write alone the full write rate
    alone = solve_streams(tree, [Stream("nic0", "gpu0", label="rx")])
    assert alone.rate_bps[0] == pytest.approx(WRITE16)
    assert alone.rate_bps[0] > share
    # a receive capped below the link leaves the rest to the read, up to its own data path
    capped = solve_streams(tree, [read(), Stream("nic0", "gpu0", 20e9 * 8, label="rx")])
    assert capped.rate_bps[1] == pytest.approx(160e9)
    assert capped.rate_bps[0] == pytest.approx(min(RAW16 * 256 / 276, (WRITE16 - 160e9) / q))


def test_tag_window_binds_when_reads_are_slow():
    """32 tags x 512 B outstanding over a 20 us read: Little's law, tags x MRRS / round trip,
    where the round trip adds the request and completion paths (one 115 ns switch hop each)."""
    dma = {"read_tags": 32, "read_latency_s": "20us"}
    tree = on_card_switch(gpus=1, nics=1, nic_dma=dma)
    res = solve_streams(tree, [read()])
    rtt = 20e-6 + 2 * 115e-9
    assert tree.read_round_trip("gpu0", "nic0") == pytest.approx(rtt)
    assert res.rate_bps[0] == pytest.approx(32 * 512 * 8 / rtt, rel=1e-12)
    assert res.bottleneck[0] == "nic0.reads"
    # across the root complex the round trip is longer, so the same tags give less
    far = solve_streams(root_complex(gpus=1, nics=1, nic_dma=dma), [read()])
    rtt_far = 20e-6 + 2 * 250e-9
    assert far.rate_bps[0] == pytest.approx(32 * 512 * 8 / rtt_far, rel=1e-12)
    # with the default 256 tags and 1 us the window (about 100 GB/s) does not bind at x16
    assert solve_streams(on_card_switch(gpus=1, nics=1), [read()]).bottleneck[0] != "nic0.reads"


def test_tags_are_shared_by_the_nics_reads():
    dma = {"read_tags": 32, "read_latency_s": "20us"}
    tree = on_card_switch(gpus=2, nics=1, nic_dma=dma)
    res = solve_streams(tree, [read("gpu0"), read("gpu1")])
    rtt = 20e-6 + 2 * 115e-9
    assert res.rate_bps.sum() == pytest.approx(32 * 512 * 8 / rtt, rel=1e-12)


def test_nic_dma_config_round_trips_and_rejects_bad_values():
    tree = on_card_switch(gpus=1, nics=1, nic_dma={"max_read_request_bytes": 4096})
    again = build_layout(tree.to_dict())
    assert again.spec("nic0") == NicDma(max_read_request_bytes=4096)
    assert build_layout("on-card-switch").spec("nic0") == NicDma()
    for bad, key in [
        ({"max_read_request_bytes": 1000}, "max_read_request_bytes"),
        ({"read_tags": 0}, "read_tags"),
        ({"read_tags": True}, "read_tags"),
        ({"completion_bytes": 100}, "completion_bytes"),
        ({"read_latency_s": 0}, "read_latency_s"),
        ({"mrrs": 512}, "unknown nic_dma key"),
    ]:
        with pytest.raises(ValueError, match=key):
            on_card_switch(gpus=1, nics=1, nic_dma=bad)


def test_a_read_must_be_requested_by_a_nic():
    tree = on_card_switch(gpus=2, nics=1)
    with pytest.raises(ValueError, match="requested by a NIC"):
        solve_streams(tree, [Stream("gpu0", "gpu1", read=True)])
