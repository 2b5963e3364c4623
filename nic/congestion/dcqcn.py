"""DCQCN (Zhu et al., SIGCOMM 2015): ECN-marked packets -> CNPs from the receiver -> rate cuts.

Reaction point (sender, :class:`DCQCN`). Its constants come from a named ``profile``
(:data:`PROFILES`; any parameter given explicitly overrides the profile's value):

* ``nvidia`` (the default): ConnectX firmware defaults as NVIDIA documents them (DOCA "DCQCN
  CC Parameters"; mlxconfig names in :data:`PROFILES`): alpha every 1 us with g = 5/1024
  (dce_tcp_g 1019), initial alpha 1023/1024, a cut at most every 4 us, increase timer 300 us and
  byte counter 32767 B with F = 1, additive / hyper increase 5 / 50 Mb/s (absolute, not scaled
  with the line rate), 1 Mb/s floor, and the target rate set to the current rate on a cut only
  if a rate increase (byte counter or timer) came since the previous cut (clamp_tgt_rate 0,
  clamp_tgt_rate_after_time_inc 1, as Mellanox describes them: "when receiving a CNP, the
  target rate is updated to be the current rate also if the last rate increase event was due
  to the timer, and not only due to the byte counter" [MLNX]); consecutive cuts with no
  increase between them keep the target, so a burst of cuts is undone by fast recovery towards
  the rate before the burst, while a cut after an increase remembers the reduced rate.
* ``paper``: Zhu et al.'s fast-recovery stages and byte counter (F = 5, B = 10 MB, g = 1/256,
  RT = RC on every cut) with the 50/50/55 us alpha/decrease/increase timers that HPCC's
  ``dcqcn_paper`` reads from the paper and a 100 Mb/s floor (HPCC's config_doc.txt). Until
  issue 14 this was the default, named ``default`` (still accepted as an alias).
* ``hpcc-ns3-paper``: exactly what HPCC's ns-3 simulator runs as ``--cc dcqcn_paper``
  (alibaba-edu/High-Precision-Congestion-Control, simulation/run.py at commit 9f4be2a: timers
  50/50/55 us, g = 1/256, FAST_RECOVERY_TIMES 1, MIN_RATE 1000 Mb/s, R_AI/R_HAI 5/50 Mb/s
  per 25 Gb/s of line rate; its RdmaHw model counts timer stages only, no byte counter).
* ``hpcc-ns3-mlx`` (alias ``ns3-hpcc``): HPCC's ``--cc dcqcn`` (same file: alpha every 1 us, a
  cut at most every 4 us, increase timer 300 us, F = 1, 1000 Mb/s floor, no byte counter), the
  setting the HPCC authors use for NVIDIA/Mellanox NICs.

The mechanism (all profiles; docs/physics.md "Congestion control"):

* alpha (congestion estimate) is updated by the alpha timer, every ``alpha_interval_s``:
  ``alpha = (1-g) alpha + g`` if a CNP arrived in the period, else ``alpha = (1-g) alpha``.
  alpha starts at ``initial_alpha`` on the first CNP (the timers start then, as in the ns-3
  model).
* On a CNP the rate is cut at most once per ``decrease_interval_s``: target ``RT = RC`` (with
  ``clamp_target`` "after-increase" only if a rate increase came since the previous cut, with
  "after-byte-counter" only if a byte-counter increase did: HPCC's RdmaHw clamps only when a
  timer stage came since the previous cut, the same rule for its timer-only model), current
  ``RC = RC (1 - alpha/2)`` (floored at ``min_rate_bps``). A CNP inside the interval leaves a
  pending cut applied when the interval ends. The paper cuts at once on the first CNP; so does
  this model (ns-3 waits for its decrease check).
* Rate increase runs on two clocks since the last cut: the increase timer (every
  ``increase_interval_s``) and the byte counter (every ``byte_counter_bytes``
  sent, the paper's B). With T and BC the number of expiries so far, each expiry does
  fast recovery ``RC = (RT + RC)/2`` while max(T, BC) < F, hyper increase
  ``RT += R_HAI`` when min(T, BC) > F, otherwise additive increase ``RT += R_AI``, each followed
  by ``RC = (RT + RC)/2``; RT is capped at line rate. R_AI and R_HAI are the profile's
  (``rai_bps``/``rhai_bps``), else 5 and 50 Mb/s x line/25G (HPCC's scaling, docs/physics.md).
  With ``byte_counter_bytes=None`` only the timer counts (T < F fast recovery, T = F additive,
  T > F hyper: the ns-3 Mellanox model).

Timers are lazy (see :mod:`nic.congestion.api`): the deadlines live in the flow's private state
and ``flow.timer_due_s`` is the earliest of the decrease and increase timers. The alpha timer
wakes nothing: alpha is read only by a cut, so the periods since the last CNP or cut are folded
in closed form (``alpha *= (1-g)^k``) when a CNP or a cut comes (with a 1 us alpha period a wake
per period would cost a NIC event every microsecond per QP); the increase timer stops once RC
and RT are both at line rate, since further expiries could not change anything before the next
cut (which resets the stages).

Notification point (receiver, :class:`CnpGenerator`): at most one CNP per QP per
``cluster.nic.cnp_interval`` (by default the profile's: NVIDIA's min_time_between_cnps, 4 us, for
``nvidia``; the paper's 50 us for the others; docs/physics.md), sent when a CE-marked data
packet arrives. The interval is a NIC parameter (the receiver's setting); a profile only gives
its default (:attr:`DCQCN.cnp_interval_s`).
"""

from __future__ import annotations

import difflib
import math
from typing import Any

from podsim.nic.congestion._check import in_range, positive
from podsim.nic.congestion.api import CCEvent, CongestionControl, FlowCC
from podsim.nic.congestion.registry import CC_ALGORITHMS

__all__ = ["CNP_INTERVAL_S", "DCQCN", "PROFILES", "CnpGenerator"]

_INF = math.inf

#: the notification point's least time between two CNPs to one QP when the profile names none:
#: 50 us (Zhu et al., SIGCOMM 2015, section 3; docs/physics.md)
CNP_INTERVAL_S = 50e-6


class _DcqcnState:
    __slots__ = (
        "active",
        "alpha",
        "alpha_cnp",
        "alpha_due",
        "bc_bytes",
        "bc_stage",
        "dec_due",
        "inc_due",
        "last_dec",
        "rai",
        "rhai",
        "t_stage",
        "target",
    )

    def __init__(self, line: float, rai: float, rhai: float) -> None:
        self.active = False
        self.alpha = 1.0
        self.alpha_cnp = False
        self.alpha_due = _INF
        self.dec_due = _INF
        self.inc_due = _INF
        self.last_dec = -_INF
        self.target = line
        self.t_stage = 0
        self.bc_stage = 0
        self.bc_bytes = 0
        self.rai = rai
        self.rhai = rhai


_HPCC = "HPCC ns-3, simulation/run.py (alibaba-edu/High-Precision-Congestion-Control@9f4be2a)"
_NVIDIA = (
    "NVIDIA, DCQCN CC Parameters (DOCA SDK documentation, networking-docs.nvidia.com/doca/"
    "archive/3-4-0/dcqcn-cc-parameters; ConnectX-4 and later)"
)
_NVIDIA_FW = (
    "ConnectX firmware defaults as `mlxconfig -q` prints them (RPG_TIME_RESET 300, "
    "RPG_BYTE_RESET 32767, RPG_THRESHOLD 1, RPG_AI_RATE 5, RPG_HAI_RATE 50, CLAMP_TGT_RATE 0, "
    "CLAMP_TGT_RATE_AFTER_TIME_INC 1), the same names as NVIDIA's page's Rate Increase table"
)

_MLNX = (
    "Mellanox's DCQCN parameter descriptions (clamp_tgt_rate, clamp_tgt_rate_after_time_inc) "
    "as ConWeave's ns-3 quotes them (conweave-project/conweave-ns3@236a801, "
    "scratch/network-load-balance.cc); since the previous cut as in its rdma-hw.cc "
    "(m_rpTimeStage != 0)"
)

#: named parameter sets (SI units); ``source`` says where each comes from. ``rai_bps`` /
#: ``rhai_bps`` None: 5 / 50 Mb/s per 25 Gb/s of line rate (HPCC's scaling); ``clamp_target``
#: "always": every cut sets RT = RC (the paper; NVIDIA's clamp_tgt_rate = 1),
#: "after-increase": only when a rate increase (byte counter or timer) came since the previous
#: cut (clamp_tgt_rate = 0 with clamp_tgt_rate_after_time_inc = 1 [MLNX]),
#: "after-byte-counter": only when a byte-counter increase did (clamp_tgt_rate_after_time_inc = 0)
PROFILES: dict[str, dict[str, Any]] = {
    "nvidia": {
        # dce_tcp_g = 1019 (fixed point, 10 fraction bits): alpha = (1019/1024) alpha
        # (+ 5/1024 on a CNP), i.e. the paper's form with g = 5/1024 [NVIDIA]
        "g": 5.0 / 1024.0,
        "alpha_interval_s": 1e-6,  # dce_tcp_rtt = 1 us [NVIDIA]
        "decrease_interval_s": 4e-6,  # rate_reduce_monitor_period = 4 us [NVIDIA]
        "increase_interval_s": 300e-6,  # rpg_time_reset = 300 us [NVIDIA_FW]
        "fast_recovery_stages": 1,  # rpg_threshold = 1 [NVIDIA_FW]
        "byte_counter_bytes": 32767,  # rpg_byte_reset = 32767 B [NVIDIA_FW]
        "min_rate_bps": 1e6,  # rpg_min_rate = 1 Mb/s [NVIDIA]
        "rai_bps": 5e6,  # rpg_ai_rate = 5 Mb/s, not scaled with line rate [NVIDIA_FW]
        "rhai_bps": 50e6,  # rpg_hai_rate = 50 Mb/s [NVIDIA_FW]
        "initial_alpha": 1023.0 / 1024.0,  # initial_alpha_value = 1023 [NVIDIA]
        "clamp_target": "after-increase",  # clamp_tgt_rate 0, ..._after_time_inc 1 [NVIDIA_FW]
        # the notification point's min_time_between_cnps = 4 us [NVIDIA_FW]: the receiving
        # NIC's CNP interval unless cluster.nic.cnp_interval sets one
        "cnp_interval_s": 4e-6,
        # rpg_gd = 11 (Gd = 2: cut RC (1 - alpha/2)) and rpg_min_dec_fac = 50 % (a cut keeps
        # at least half the rate: (1 - alpha/2) >= 1/2 always) are the mechanism itself;
        # rate_to_set_on_first_cnp = 0 (no special first rate) likewise [NVIDIA]
        "source": f"{_NVIDIA}; {_NVIDIA_FW}; clamp rule: {_MLNX}",
    },
    "paper": {
        "g": 1.0 / 256.0,
        "alpha_interval_s": 50e-6,
        "decrease_interval_s": 50e-6,
        "increase_interval_s": 55e-6,
        "fast_recovery_stages": 5,
        "byte_counter_bytes": 10_000_000,
        "min_rate_bps": 100e6,
        "rai_bps": None,
        "rhai_bps": None,
        "initial_alpha": 1.0,
        "clamp_target": "always",
        "source": "Zhu et al., SIGCOMM 2015: g = 1/256, F = 5, B = 10 MB, RT = RC on every cut; "
        "timers 50/50/55 us as HPCC's dcqcn_paper reads the paper; 100 Mb/s floor of HPCC's "
        "config_doc.txt [E: the paper gives no floor]",
    },
    "hpcc-ns3-paper": {
        "g": 1.0 / 256.0,
        "alpha_interval_s": 50e-6,
        "decrease_interval_s": 50e-6,
        "increase_interval_s": 55e-6,
        "fast_recovery_stages": 1,
        "byte_counter_bytes": None,
        "min_rate_bps": 1e9,
        "rai_bps": None,
        "rhai_bps": None,
        "initial_alpha": 1.0,
        "clamp_target": "always",
        "source": f"{_HPCC}: --cc dcqcn_paper",
    },
    "hpcc-ns3-mlx": {
        "g": 1.0 / 256.0,
        "alpha_interval_s": 1e-6,
        "decrease_interval_s": 4e-6,
        "increase_interval_s": 300e-6,
        "fast_recovery_stages": 1,
        "byte_counter_bytes": None,
        "min_rate_bps": 1e9,
        "rai_bps": None,
        "rhai_bps": None,
        "initial_alpha": 1.0,
        "clamp_target": "always",
        "source": f"{_HPCC}: --cc dcqcn",
    },
}

#: other names of a profile: ``default`` was the name of ``paper`` before the profiles were
#: named after their sources; ``ns3-hpcc`` is HPCC's ``--cc dcqcn``, the DCQCN its paper runs
ALIASES: dict[str, str] = {"default": "paper", "ns3-hpcc": "hpcc-ns3-mlx"}

#: the profile a DCQCN gets when none is named: ConnectX firmware defaults (issue 14)
DEFAULT_PROFILE = "nvidia"

_CLAMPS = ("always", "after-increase", "after-byte-counter")

_UNSET: Any = object()


@CC_ALGORITHMS.register(
    "dcqcn",
    "DCQCN: ECN/CNP-driven rate control; profiles nvidia (default), paper, hpcc-ns3-paper, "
    "hpcc-ns3-mlx (alias ns3-hpcc)",
)
class DCQCN(CongestionControl):
    """DCQCN reaction point; pair it with a :class:`CnpGenerator` at the receiver."""

    name = "dcqcn"
    timer_interval_s = 50e-6
    requires_cnp = True

    def __init__(
        self,
        profile: str = DEFAULT_PROFILE,
        g: float = _UNSET,
        alpha_interval_s: float = _UNSET,
        decrease_interval_s: float = _UNSET,
        increase_interval_s: float = _UNSET,
        fast_recovery_stages: int = _UNSET,
        byte_counter_bytes: int | None = _UNSET,
        rai_bps: float | None = _UNSET,
        rhai_bps: float | None = _UNSET,
        min_rate_bps: float = _UNSET,
        initial_alpha: float = _UNSET,
        clamp_target: str = _UNSET,
    ) -> None:
        a = self.name
        names = [*PROFILES, *ALIASES]
        if profile not in names:
            close = difflib.get_close_matches(str(profile), names, n=2, cutoff=0.4)
            hint = f" Did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
            raise ValueError(
                f"{a}: unknown profile {profile!r}.{hint} Profiles: {', '.join(names)}"
            )
        profile = ALIASES.get(profile, profile)
        base = PROFILES[profile]
        self.profile = profile
        given = {
            "g": g,
            "alpha_interval_s": alpha_interval_s,
            "decrease_interval_s": decrease_interval_s,
            "increase_interval_s": increase_interval_s,
            "fast_recovery_stages": fast_recovery_stages,
            "byte_counter_bytes": byte_counter_bytes,
            "min_rate_bps": min_rate_bps,
            "rai_bps": rai_bps,
            "rhai_bps": rhai_bps,
            "initial_alpha": initial_alpha,
            "clamp_target": clamp_target,
        }
        # the profile's value for every parameter not given explicitly
        v = {k: base[k] if x is _UNSET else x for k, x in given.items()}
        in_range(a, "g", v["g"], 1e-9, 1.0)
        for key in ("alpha_interval_s", "decrease_interval_s", "increase_interval_s"):
            positive(a, key, v[key])
        stages = v["fast_recovery_stages"]
        if isinstance(stages, bool) or not isinstance(stages, int):
            raise ValueError(f"{a}: fast_recovery_stages={stages!r} must be an int")
        in_range(a, "fast_recovery_stages", stages, 0, 1_000)
        positive(a, "byte_counter_bytes", v["byte_counter_bytes"], allow_none=True)
        positive(a, "rai_bps", v["rai_bps"], allow_none=True)
        positive(a, "rhai_bps", v["rhai_bps"], allow_none=True)
        positive(a, "min_rate_bps", v["min_rate_bps"])
        in_range(a, "initial_alpha", v["initial_alpha"], 0.0, 1.0)
        if v["clamp_target"] not in _CLAMPS:
            close = difflib.get_close_matches(str(v["clamp_target"]), _CLAMPS, n=1, cutoff=0.4)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            raise ValueError(
                f"{a}: clamp_target={v['clamp_target']!r} must be one of "
                f"{', '.join(_CLAMPS)}.{hint}"
            )
        self.g = float(v["g"])
        self.alpha_interval_s = float(v["alpha_interval_s"])
        self.decrease_interval_s = float(v["decrease_interval_s"])
        self.increase_interval_s = float(v["increase_interval_s"])
        self.fast_recovery_stages = stages
        self.byte_counter_bytes = v["byte_counter_bytes"]
        self.rai_bps = v["rai_bps"]
        self.rhai_bps = v["rhai_bps"]
        self.min_rate_bps = float(v["min_rate_bps"])
        self.initial_alpha = float(v["initial_alpha"])
        self.clamp_target = v["clamp_target"]
        self._clamp_always = self.clamp_target == "always"
        # with "after-increase" a timer increase counts too (clamp_tgt_rate_after_time_inc 1)
        self._clamp_on_timer_increase = self.clamp_target == "after-increase"
        #: the receiving NIC's CNP interval when the scenario sets none (cluster.nic.cnp_interval)
        self.cnp_interval_s = float(base.get("cnp_interval_s", CNP_INTERVAL_S))

    # ------------------------------------------------------------------ handlers
    def init_flow(self, flow: FlowCC, now: float) -> None:
        line = flow.line_rate_bps
        scale = line / 25e9
        rai = self.rai_bps if self.rai_bps is not None else 5e6 * scale
        rhai = self.rhai_bps if self.rhai_bps is not None else 50e6 * scale
        flow.priv = _DcqcnState(line, rai, rhai)
        flow.rate_bps = line
        flow.window_bytes = None
        flow.tx_events = False  # on_tx counts bytes only once active (the first CNP)

    def on_cnp(self, ev: CCEvent, flow: FlowCC) -> None:
        s: _DcqcnState = flow.priv
        now = ev.now
        if not s.active:
            s.active = True
            flow.tx_events = self.byte_counter_bytes is not None
            s.alpha = self.initial_alpha
            s.alpha_cnp = False
            s.alpha_due = now + self.alpha_interval_s
            self._decrease(s, flow, now)
        else:
            self._fold_alpha(s, now)  # the CNP belongs to the period running now
            s.alpha_cnp = True
            if now >= s.last_dec + self.decrease_interval_s:
                self._decrease(s, flow, now)
            elif s.dec_due == _INF:
                s.dec_due = s.last_dec + self.decrease_interval_s
        flow.timer_due_s = min(s.dec_due, s.inc_due)

    def on_tx(self, ev: CCEvent, flow: FlowCC) -> None:
        s: _DcqcnState = flow.priv
        bc = self.byte_counter_bytes
        if not s.active or bc is None:
            return
        s.bc_bytes += ev.bytes
        while s.bc_bytes >= bc:
            s.bc_bytes -= bc
            self._increase(s, flow)
            s.bc_stage += 1

    def on_timer(self, now: float, flow: FlowCC) -> None:
        s: _DcqcnState = flow.priv
        while True:
            td, ti = s.dec_due, s.inc_due
            t = min(td, ti)
            if t > now:
                break
            if td == t:
                self._fold_alpha(s, td)  # the cut uses alpha as of its instant
                self._decrease(s, flow, td)
            else:
                self._increase(s, flow)
                s.t_stage += 1
                line = flow.line_rate_bps
                if flow.rate_bps >= line and s.target >= line:
                    s.inc_due = _INF
                else:
                    s.inc_due = ti + self.increase_interval_s
        flow.timer_due_s = min(s.dec_due, s.inc_due)

    def _fold_alpha(self, s: _DcqcnState, now: float) -> None:
        """Apply the alpha updates of every period that ended at or before ``now``.

        alpha only matters when a cut reads it, so its timer needs no event of its own: the
        periods since the last fold are applied here in closed form (only the first can hold a
        CNP: a CNP folds first), and the flow is not woken every ``alpha_interval_s``."""
        ta = s.alpha_due
        if ta > now:
            return
        ai = self.alpha_interval_s
        k = int((now - ta) // ai) + 1
        one_minus_g = 1.0 - self.g
        alpha = s.alpha
        if s.alpha_cnp:
            s.alpha_cnp = False
            alpha = (one_minus_g * alpha + self.g) * one_minus_g ** (k - 1)
        else:
            alpha *= one_minus_g**k
        s.alpha = alpha
        s.alpha_due = ta + k * ai

    # ------------------------------------------------------------------ internals
    def _decrease(self, s: _DcqcnState, flow: FlowCC, now: float) -> None:
        rc = flow.rate_bps
        # RT = RC unless the profile clamps only after an increase (NVIDIA's clamp_tgt_rate 0)
        # and none came since the previous cut: consecutive cuts then keep the target
        if (
            self._clamp_always
            or s.bc_stage > 0
            or (self._clamp_on_timer_increase and s.t_stage > 0)
        ):
            s.target = rc
        flow.rate_bps = max(self.min_rate_bps, rc * (1.0 - s.alpha / 2.0))
        s.last_dec = now
        s.dec_due = _INF
        s.t_stage = 0
        s.bc_stage = 0
        s.bc_bytes = 0
        s.inc_due = now + self.increase_interval_s

    def _increase(self, s: _DcqcnState, flow: FlowCC) -> None:
        f = self.fast_recovery_stages
        t = s.t_stage
        bc = s.bc_stage if self.byte_counter_bytes is not None else t
        hi, lo = (t, bc) if t >= bc else (bc, t)
        line = flow.line_rate_bps
        if hi < f:
            pass  # fast recovery: move halfway back to the target
        elif lo > f:
            s.target = min(line, s.target + s.rhai)
        else:
            s.target = min(line, s.target + s.rai)
        flow.rate_bps = min(line, 0.5 * (s.target + flow.rate_bps))

    def alpha(self, flow: FlowCC, now: float | None = None) -> float:
        """The flow's alpha (for tests and traces): as of ``now`` (its updates are lazy), or as
        of its last cut or CNP when ``now`` is None."""
        if now is not None:
            self._fold_alpha(flow.priv, now)
        return flow.priv.alpha

    def target_rate(self, flow: FlowCC) -> float:
        """The flow's current target rate RT."""
        return flow.priv.target


class CnpGenerator:
    """DCQCN notification point of one receiving NIC: decides when to send a CNP.

    Call :meth:`on_data` for every arriving data packet; it returns True when the NIC must send a
    CNP to that QP's sender now: the packet is CE-marked and no CNP went to that QP within the
    last ``interval_s`` (50 us, paper and docs/physics.md).
    """

    __slots__ = ("_last", "cnps", "interval_s")

    def __init__(self, interval_s: float = CNP_INTERVAL_S) -> None:
        positive("CnpGenerator", "interval_s", interval_s)
        self.interval_s = float(interval_s)
        self._last: dict[Any, float] = {}
        self.cnps = 0

    def on_data(self, qp: Any, ecn: bool, now: float) -> bool:
        if not ecn:
            return False
        last = self._last.get(qp)
        if last is not None and now - last < self.interval_s:
            return False
        self._last[qp] = now
        self.cnps += 1
        return True

    def forget(self, qp: Any) -> None:
        """Drop a finished QP's state."""
        self._last.pop(qp, None)
