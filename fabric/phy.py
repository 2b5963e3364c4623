"""Ethernet PHY profiles: MAC rate, lane structure, FEC latency and loss.

Figures come from docs/physics.md ("400GbE over 112G PAM4"):

* 400GbE MAC rate 400 Gb/s; line rate = MAC x 257/256 (256b/257b transcoding) x 544/514
  (RS(544,514) "KP4" FEC) = 425 Gb/s = 4 lanes x 106.25 Gb/s PAM4 (53.125 GBd). [S/D]
* 800GbE = 8 x 106.25 Gb/s; 1.6TbE = 8 x 212.5 Gb/s; 200GbE = 4 x 53.125 Gb/s. [S/D]
* RS(544,514) uses 10-bit symbols and corrects up to t = 15 symbol errors per 5440-bit
  codeword; a typical pre-FEC BER operating point is 2e-4, post-FEC frame error target 1e-13. [S]
* 200GBASE-R and faster interleave two RS(544,514) codewords symbol by symbol (IEEE 802.3
  clause 119.2.4: the FEC encoder's output alternates the 10-bit symbols of codewords A and B,
  so a burst error is split between two codewords); a frame sits at an arbitrary offset in the
  codeword stream. A frame of L transcoded bits therefore spans 1 + L/G interleaved groups of
  G = 2 x 5140 payload bits on average and touches both codewords of each group: about 8.5
  codewords for a 4 KiB RoCE frame (not 7) and 2.1 for an ACK (not 1). [S]
* FEC + PCS latency per hop: collecting one codeword at 106.25 Gb/s takes 51.2 ns; 60-120 ns in
  total per hop is a fair default [D/E]. We model it as the codeword collection time at one
  lane's rate plus a fixed 50 ns decoder/PCS pipeline [E], which gives 101.2 ns for 112G-class
  lanes; every profile's value can be overridden.
* Ultra Ethernet link-level retry (LLR): the sender keeps a retry buffer and resends only a
  corrupted frame, at a cost of about one link round trip plus the frame's serialisation. [S]

Serialisation uses the MAC rate on wire bytes (payload + headers + 20 B preamble/IFG), so the
FEC and transcoding overheads are inside the lane rate and do not slow the MAC down.

The error model assumes independent bit errors (no burst/DFE error propagation): a 10-bit
symbol is wrong with probability 1 - (1 - BER)^10, and a codeword is lost when more than t of
its 544 symbols are wrong (binomial tail). Real links with error bursts lose more; an optional
``burst_len`` parameter spreads errors into bursts of that many symbols (a pessimistic bound).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from podsim.fabric.params import param
from podsim.fabric.registry import Registry

#: Propagation delay in optical fibre or copper, seconds per metre (docs/physics.md: 5 ns/m [S]).
PROPAGATION_S_PER_M = 5e-9
#: Preamble + start-of-frame delimiter + minimum inter-frame gap, bytes on the wire per frame.
PREAMBLE_IFG_BYTES = 20

RS_N_SYMBOLS = 544
RS_K_SYMBOLS = 514
RS_T = 15
RS_SYMBOL_BITS = 10
CODEWORD_BITS = RS_N_SYMBOLS * RS_SYMBOL_BITS  # 5440
#: Fixed decoder + PCS pipeline latency added to the codeword collection time [E].
FEC_PIPELINE_S = 50e-9


@dataclass(frozen=True)
class PhyProfile:
    """One Ethernet PHY: rates in bit/s, latencies in seconds.

    Every field is declared with :func:`podsim.fabric.params.param`. A scenario chooses a
    profile by name (the topology's ``phy`` parameters); what defines the profile (rates, lanes,
    modulation, FEC code) comes with the choice, and the FEC latency may be overridden per
    profile (``cluster.phys``).
    """

    name: str = param(key=None, kind="name", doc="set by choosing the profile (podsim list phy)")
    mac_rate_bps: float = param(
        key=None, kind="rate", doc="set by choosing the profile: the MAC rate (e.g. 400 Gb/s)"
    )
    lanes: int = param(key=None, kind="int", doc="set by choosing the profile: SerDes lanes")
    lane_rate_bps: float = param(
        key=None, kind="rate", doc="set by choosing the profile: signalling rate per lane"
    )
    modulation: str = param(key=None, kind="choice", doc="set by choosing the profile (PAM4)")
    fec: str = param(key=None, kind="choice", doc="set by choosing the profile: the FEC code")
    fec_latency_s: float = param(
        key="fec_latency", kind="time", minimum=0,
        doc="latency the FEC adds per hop (codeword collection, decoding, PCS)",
        source="[E] one RS(544,514) codeword at the lane rate + 50 ns decoder/PCS pipeline "
        "(docs/physics.md '400GbE over 112G PAM4')",
    )  # fmt: skip
    fec_interleave: int = param(
        1, key=None, kind="int",
        doc="set by choosing the profile: RS codewords interleaved symbol by symbol",
        source="IEEE 802.3 clause 119.2.4 (200GBASE-R/400GBASE-R PCS: two codewords, "
        "10-bit symbol interleave; 800GBASE-R and 1.6TBASE-R run clause-119-style FEC "
        "flows); 1 where a single codeword is not interleaved",
    )  # fmt: skip
    description: str = param("", key=None, kind="choice", doc="set by choosing the profile")
    preamble_ifg_bytes: int = param(
        PREAMBLE_IFG_BYTES, key=None, kind="size",
        doc="set by the Ethernet standard: 8 B preamble + SFD and a 12 B inter-frame gap "
        "(IEEE 802.3), part of the 82 B RoCEv2 wire overhead",
    )  # fmt: skip

    @property
    def line_rate_bps(self) -> float:
        """Aggregate signalling rate of all lanes (e.g. 425 Gb/s for 400GbE)."""
        return self.lanes * self.lane_rate_bps

    def serialisation_s(self, wire_bytes: int) -> float:
        """Time to put ``wire_bytes`` (frame + preamble/IFG) on the wire at the MAC rate."""
        return 8.0 * wire_bytes / self.mac_rate_bps

    def with_overrides(self, **fields: float | str) -> PhyProfile:
        """A copy with some fields replaced (a scenario overriding FEC latency, say)."""
        return replace(self, **fields)

    # --- errors -------------------------------------------------------------------------
    def _groups(self, frame_bytes: int) -> tuple[int, float]:
        """(k, f): a frame spans k + 1 interleaved codeword groups with probability 1 - f and
        k + 2 with probability f, for a start offset uniform over a group (L = (k + f) G)."""
        bits = frame_bytes * 8 * 257 / 256  # after 256b/257b transcoding
        span = bits / (self.fec_interleave * RS_K_SYMBOLS * RS_SYMBOL_BITS)
        k = math.floor(span)
        return k, span - k

    def mean_codewords_per_frame(self, frame_bytes: int) -> float:
        """RS codewords a frame touches on average: every codeword of each interleaved group
        it overlaps, the groups counted over a uniformly random start offset (1 + L/G of them).

        Assumes the frame's share of a group covers one symbol of each of its codewords (all
        but a sliver of under ``fec_interleave`` symbols at its ends, < 0.2 % of offsets)."""
        if self.fec == "none":
            return 0.0
        k, f = self._groups(frame_bytes)
        return self.fec_interleave * (k + 1 + f)

    def codeword_loss_prob(self, pre_fec_ber: float, burst_len: int = 1) -> float:
        """Probability that one RS(544,514) codeword is uncorrectable.

        With ``burst_len`` b > 1, errors arrive as bursts that each corrupt b consecutive
        symbols: burst events happen with per-symbol probability p_sym / b, and the codeword
        fails when more than t / b bursts land in it.
        """
        _check_ber(pre_fec_ber)
        if pre_fec_ber == 0.0:
            return 0.0
        p_sym = -math.expm1(RS_SYMBOL_BITS * math.log1p(-pre_fec_ber))
        from scipy.stats import binom  # deferred: scipy.stats costs ~0.3 s to import

        if burst_len <= 1:
            return float(binom.sf(RS_T, RS_N_SYMBOLS, p_sym))
        p_burst = min(1.0, p_sym / burst_len)
        return float(binom.sf(RS_T // burst_len, RS_N_SYMBOLS, p_burst))

    def frame_loss_prob(self, frame_bytes: int, pre_fec_ber: float, burst_len: int = 1) -> float:
        """Probability that a frame of ``frame_bytes`` is lost (FCS failure after FEC).

        Without FEC, any bit error loses the frame; with RS(544,514), any uncorrectable codeword
        the frame touches does (see :meth:`mean_codewords_per_frame`: interleave and a random
        start offset in the codeword stream).
        """
        _check_ber(pre_fec_ber)
        if self.fec == "none":
            return -math.expm1(frame_bytes * 8 * math.log1p(-pre_fec_ber))
        p_cw = self.codeword_loss_prob(pre_fec_ber, burst_len)
        if p_cw >= 1.0:  # every codeword uncorrectable (log1p(-1) is -inf)
            return 1.0
        # lost unless every codeword it touches decodes: (k + 1) or (k + 2) groups of
        # fec_interleave codewords, by where the frame starts (1 - (1-p)^n without underflow)
        k, f = self._groups(frame_bytes)
        per_group = self.fec_interleave * math.log1p(-p_cw)
        return (1.0 - f) * -math.expm1((k + 1) * per_group) + f * -math.expm1((k + 2) * per_group)

    def llr_retry_cost_s(self, frame_bytes: int, length_m: float) -> float:
        """Extra delay that one link-level retry adds to a corrupted frame.

        One link round trip (propagation and FEC both ways, the NACK is small) plus the
        serialisation of the resent frame.
        """
        return self.link_rtt_s(length_m) + self.serialisation_s(
            frame_bytes + self.preamble_ifg_bytes
        )

    def link_rtt_s(self, length_m: float) -> float:
        """Round trip of a link of ``length_m``: propagation and FEC both ways (what a frame
        sent back, a NACK or a PAUSE, takes to act on the sender, and back)."""
        return 2.0 * (length_m * PROPAGATION_S_PER_M + self.fec_latency_s)


def _check_ber(ber: float) -> None:
    if not (0.0 <= ber < 1.0) or math.isnan(ber):
        raise ValueError(f"pre-FEC BER {ber!r} must be in [0, 1)")


def _fec_latency(lane_rate_bps: float) -> float:
    return CODEWORD_BITS / lane_rate_bps + FEC_PIPELINE_S


def _eth(name: str, mac: float, lanes: int, lane: float, desc: str) -> PhyProfile:
    # every Ethernet profile here is 200GBASE-R or faster: two codewords interleaved
    return PhyProfile(
        fec_interleave=2,
        name=name,
        mac_rate_bps=mac,
        lanes=lanes,
        lane_rate_bps=lane,
        modulation="PAM4",
        fec="RS(544,514)",
        fec_latency_s=_fec_latency(lane),
        description=desc,
    )


PHYS: Registry[PhyProfile] = Registry("PHY profile")

for _p in (
    _eth("200GbE", 200e9, 4, 53.125e9, "200GBASE-R: 4 x 53.125 Gb/s PAM4, RS(544,514)"),
    _eth("400GbE", 400e9, 4, 106.25e9, "400GBASE-R: 4 x 106.25G PAM4 (112G SerDes), RS(544,514)"),
    _eth("800GbE", 800e9, 8, 106.25e9, "800GBASE-R: 8 x 106.25 Gb/s PAM4, RS(544,514)"),
    _eth("1.6TbE", 1.6e12, 8, 212.5e9, "1.6TBASE-R: 8 x 212.5G PAM4 (224G SerDes), RS(544,514)"),
    PhyProfile(
        name="scaleup",
        mac_rate_bps=0.0,
        lanes=0,
        lane_rate_bps=0.0,
        modulation="n/a",
        fec="none",
        fec_latency_s=0.0,
        description="scale-up (NVLink/UB-style) link: rate and latency come from the edge",
        preamble_ifg_bytes=0,
    ),
):
    PHYS.add(_p.name, _p, _p.description)


def derived_phy(name: str, **overrides: float) -> str:
    """Register (once) and name the profile ``name`` with ``overrides`` (field: value, e.g.
    ``fec_latency_s``); the name records the values, so equal overrides share one profile."""
    if not overrides:
        return name
    tag = ",".join(f"{k}={v!r}" for k, v in sorted(overrides.items()))
    new = f"{name}[{tag}]"
    if new not in PHYS:
        base = get_phy(name)
        PHYS.add(new, base.with_overrides(name=new, **overrides), f"{base.description} ({tag})")
    return new


def base_phy(name: str) -> str:
    """The profile a :func:`derived_phy` name was derived from (the name itself otherwise)."""
    return name.split("[", 1)[0]


def get_phy(name: str) -> PhyProfile:
    """The registered PHY profile ``name`` (unknown names raise with a did-you-mean)."""
    return PHYS.get(name)


def phy_for_rate(rate_bps: float) -> PhyProfile:
    """The Ethernet profile whose MAC rate is ``rate_bps`` (exact match)."""
    for name in PHYS:
        p = PHYS.get(name)
        if p.mac_rate_bps == rate_bps:
            return p
    raise ValueError(f"no Ethernet PHY profile runs at {rate_bps!r} bit/s")
