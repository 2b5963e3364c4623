from __future__ import annotations

import pytest
from podsim.nic.pcie import PcieLink
from podsim.nic.pcie.link import ENCODING, GT_PER_S

GB = 8e9  # bits/s in one GB/s


@pytest.mark.parametrize(("lanes", "gbytes"), [(4, 15.75), (8, 31.5), (16, 63.0), (32, 126.0)])
def test_gen5_raw_rate_matches_physics(lanes, gbytes):
    link = PcieLink(lanes=lanes)
    assert link.raw_bps == pytest.approx(lanes * 32e9 * 128 / 130)
    assert link.raw_bps / GB == pytest.approx(gbytes, rel=2e-3)  # docs/physics.md rounds to 0.1 %


@pytest.mark.parametrize(("mps", "eff"), [(256, 0.914), (512, 0.955)])
def test_tlp_efficiency_from_mps_and_header(mps, eff):
    link = PcieLink(mps=mps)
    assert link.tlp_efficiency == pytest.approx(mps / (mps + 24))
    assert link.tlp_efficiency == pytest.approx(eff, abs=5e-4)


def test_x16_mps256_effective_rate_is_57_6_gbytes():
    link = PcieLink(lanes=16, gen=5, mps=256, header_bytes=24)
    assert link.effective_bps == pytest.approx(16 * 32e9 * ENCODING * 256 / 280)
    assert link.effective_bps / GB == pytest.approx(57.6, abs=0.05)


def test_header_ecrc_and_dllp_overheads():
    base = PcieLink(header_bytes=20)
    assert base.tlp_efficiency == pytest.approx(256 / 276)
    ecrc = PcieLink(header_bytes=20, ecrc=True)
    assert ecrc.tlp_overhead_bytes == 24 and ecrc.tlp_efficiency == pytest.approx(256 / 280)
    d = PcieLink(dllp_overhead=0.03)
    assert d.effective_bps == pytest.approx(PcieLink().effective_bps * 0.97)


def test_generations_scale_with_transfer_rate():
    assert PcieLink(gen=4).raw_bps == pytest.approx(PcieLink(gen=5).raw_bps / 2)
    assert PcieLink(gen=3).raw_bps == pytest.approx(16 * GT_PER_S[3] * ENCODING)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"lanes": 12}, "lanes"),
        ({"gen": 6}, "gen"),
        ({"mps": 300}, "mps"),
        ({"dllp_overhead": 1.0}, "dllp_overhead"),
        ({"latency_s": -1.0}, "latency_s"),
    ],
)
def test_bad_link_parameters(kwargs, match):
    with pytest.raises(ValueError, match=match):
        PcieLink(**kwargs)


def test_from_dict_parses_units_and_rejects_unknown_keys():
    link = PcieLink.from_dict({"lanes": 8, "mps": "512B", "latency_s": "5ns"})
    assert (link.lanes, link.mps, link.latency_s) == (8, 512, pytest.approx(5e-9))
    assert PcieLink.from_dict(link.to_dict()) == link
    with pytest.raises(ValueError, match="unknown PCIe link key"):
        PcieLink.from_dict({"width": 16})
    with pytest.raises(ValueError, match="lanes must be an integer"):
        PcieLink.from_dict({"lanes": "16"})


def test_device_specs_must_be_mappings() -> None:
    from podsim.nic.pcie.devices import Ssd

    with pytest.raises(ValueError, match=r"the SSD must be a mapping of its fields \(read_bps"):
        Ssd.from_dict(3)  # type: ignore[arg-type]
