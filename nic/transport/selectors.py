"""Multipath path selectors: which entropy value (EV) each packet of a QP carries.

Switches hash a packet's (flow, EV) to pick among equal-cost next hops (fabric.routing), so an
EV names a path without the sender knowing the topology -- the UEC model (docs/physics.md,
"Multipath": "each packet carries an entropy value (EV) that switches hash on") [S]. A
multi-plane NIC (one port per plane) also takes the plane from the EV (``ev % planes``, see
:meth:`PathSelector.plane_of`), so spraying spreads over planes and an EV penalty avoids a bad
plane as well.

Each QP owns one selector instance. The transport calls :meth:`PathSelector.next_ev` once per
packet and feeds back what the EV's packets experienced: :meth:`on_ack` (with the ECN echo),
:meth:`on_nack` (a NACK), :meth:`on_loss` (a packet that vanished, found by SACK-based loss
detection), :meth:`on_timeout` (RTO) and :meth:`on_path_change` (the congestion control asks to
leave the EV). Built-ins (registry
:data:`PATH_SELECTORS`):

``ecmp``      one EV per QP: the classic RoCE baseline (one path per flow). On an RTO it draws
              a new EV ("re-hash", like PLB/flowlet repathing), which is how a flow stuck on a
              dead link eventually escapes.
``spray``     oblivious per-packet spraying round-robin over ``n_evs`` EVs (UEC oblivious
              spraying; AWS SRD sprays over many paths [S]).
``bitmap``    UEC-style penalties per EV: ECN +1, NACK +4, timeout or a vanished packet +15
              (capped at 15; UEC detects a vanished packet with a per-packet timer);
              a penalised EV is skipped, each skip paying back one point, so bad EVs rest for
              a time proportional to their penalty [S: docs/physics.md penalty values].
``reps``      REPS (recycled entropy packet spraying): EVs whose ACK came back without ECN go
              into a small ring (8 entries) and are reused; with nothing to recycle a fresh
              random EV explores. After a timeout it "freezes": it keeps cycling the cached good
              EVs without consuming them and does not explore for ``freeze_s``.
``adaptive``  least recently congested path: each EV remembers when it last signalled
              congestion (ECN now, NACK/timeout count as later so they rest longer); each packet
              compares the round-robin candidate with one random other EV and takes the one
              congested least recently (power of two choices), so congested EVs are avoided
              while clean ones are sprayed evenly.

All randomness comes from the ``random.Random`` passed in (one per QP, seeded by the NIC), so
runs are reproducible.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Callable
from typing import Any, ClassVar

from podsim.fabric.plugins import is_plugin_spec, load_class
from podsim.fabric.registry import Registry

__all__ = [
    "EV_SPACE",
    "PATH_SELECTORS",
    "AdaptiveSelector",
    "BitmapSelector",
    "EcmpSelector",
    "PathSelector",
    "RepsSelector",
    "SpraySelector",
    "make_selector",
    "randbelow",
    "selector_class",
]

#: EVs are 16-bit (the UDP source port of RoCEv2 / the UEC entropy field).
EV_SPACE = 1 << 16

PATH_SELECTORS: Registry[type[PathSelector]] = Registry("path selector")


def randbelow(getrandbits: Callable[[int], int], n: int) -> int:
    """``rng.randrange(n)`` for an int ``n >= 1``, given ``rng.getrandbits``: the same draw
    from the same bits (CPython's ``Random._randbelow_with_getrandbits``: ``n.bit_length()``
    random bits, rejected until below ``n``) without ``randrange``'s argument checks, two
    Python calls less on a per-packet path. A test checks it against ``randrange``."""
    k = n.bit_length()
    r = getrandbits(k)
    while r >= n:
        r = getrandbits(k)
    return r


class PathSelector:
    """Base class: a per-QP EV chooser. Subclasses override :meth:`next_ev` and feedback.

    ``n_evs`` is the number of distinct EVs the QP may use (values ``0 .. n_evs-1``);
    ``PARAMS`` lists each subclass's extra parameters with their defaults.
    """

    __slots__ = ("n_evs", "planes", "rng")
    PARAMS: ClassVar[dict[str, Any]] = {}
    #: True if the selector keeps one path per QP (packets stay in order).
    single_path: ClassVar[bool] = False

    def __init__(self, n_evs: int, rng: random.Random, planes: int = 1) -> None:
        if isinstance(n_evs, bool) or not isinstance(n_evs, int) or not 1 <= n_evs <= EV_SPACE:
            raise ValueError(f"n_evs {n_evs!r}; expected an int in 1..{EV_SPACE}")
        if planes < 1:
            raise ValueError(f"planes {planes!r}; expected an int >= 1")
        self.n_evs = n_evs
        self.rng = rng
        self.planes = planes

    def next_ev(self, now: float) -> int:
        raise NotImplementedError

    def on_ack(self, ev: int, ecn: bool, now: float) -> None:
        """An ACK for a packet sent with ``ev`` came back (``ecn``: it was marked)."""

    def on_nack(self, ev: int, now: float) -> None:
        """A packet sent with ``ev`` was NACKed or detected lost."""

    def on_loss(self, ev: int, now: float) -> None:
        """A packet sent on ``ev`` vanished (declared lost by SACK-based detection, not
        NACKed): by default treated like a NACK."""
        self.on_nack(ev, now)

    def on_timeout(self, ev: int, now: float) -> None:
        """The QP timed out with a packet sent on ``ev`` in flight (called once per distinct
        EV in flight, like UEC's per-packet timers; -1 if unknown)."""

    def on_path_change(self, ev: int, now: float) -> None:
        """The congestion control asks to move off ``ev`` (UEC NSCC: ECN below target)."""

    def plane_of(self, ev: int) -> int:
        """The NIC plane (port) an EV uses on a multi-plane NIC."""
        return ev % self.planes


@PATH_SELECTORS.register("ecmp", "one EV per QP (classic RoCE); re-hash to a new EV on timeout")
class EcmpSelector(PathSelector):
    """One path per QP; a retransmission timeout re-hashes the QP onto a new random EV."""

    __slots__ = ("ev", "rehash_on_timeout")
    PARAMS: ClassVar[dict[str, Any]] = {"rehash_on_timeout": True}
    single_path = True

    def __init__(
        self, n_evs: int, rng: random.Random, planes: int = 1, rehash_on_timeout: bool = True
    ) -> None:
        super().__init__(n_evs, rng, planes)
        self.ev = rng.randrange(EV_SPACE)
        self.rehash_on_timeout = bool(rehash_on_timeout)

    def next_ev(self, now: float) -> int:
        return self.ev

    def on_timeout(self, ev: int, now: float) -> None:
        if self.rehash_on_timeout and (ev == self.ev or ev < 0):
            self._rehash()

    def on_path_change(self, ev: int, now: float) -> None:
        if ev == self.ev or ev < 0:
            self._rehash()

    def _rehash(self) -> None:
        old = self.ev
        while self.ev == old:
            self.ev = self.rng.randrange(EV_SPACE)


@PATH_SELECTORS.register("spray", "oblivious per-packet spraying round-robin over n_evs EVs")
class SpraySelector(PathSelector):
    """Round-robin over ``n_evs`` EVs starting at a random offset; ignores feedback."""

    __slots__ = ("i",)

    def __init__(self, n_evs: int, rng: random.Random, planes: int = 1) -> None:
        super().__init__(n_evs, rng, planes)
        self.i = rng.randrange(n_evs)

    def next_ev(self, now: float) -> int:
        ev = self.i
        self.i = ev + 1 if ev + 1 < self.n_evs else 0
        return ev


@PATH_SELECTORS.register(
    "bitmap", "UEC penalties per EV (ECN 1, NACK 4, timeout 15); skips penalised EVs"
)
class BitmapSelector(PathSelector):
    """Round-robin that skips EVs with a penalty, paying back one point per skip."""

    __slots__ = ("i", "max_penalty", "pen", "pen_ecn", "pen_nack", "pen_timeout")
    PARAMS: ClassVar[dict[str, Any]] = {
        "pen_ecn": 1,
        "pen_nack": 4,
        "pen_timeout": 15,
        "max_penalty": 15,
    }

    def __init__(
        self,
        n_evs: int,
        rng: random.Random,
        planes: int = 1,
        pen_ecn: int = 1,
        pen_nack: int = 4,
        pen_timeout: int = 15,
        max_penalty: int = 15,
    ) -> None:
        super().__init__(n_evs, rng, planes)
        for key, val in (
            ("pen_ecn", pen_ecn),
            ("pen_nack", pen_nack),
            ("pen_timeout", pen_timeout),
            ("max_penalty", max_penalty),
        ):
            if val < 0:
                raise ValueError(f"bitmap selector {key}={val!r}; expected an int >= 0")
        self.pen = [0] * n_evs
        self.pen_ecn = int(pen_ecn)
        self.pen_nack = int(pen_nack)
        self.pen_timeout = int(pen_timeout)
        self.max_penalty = int(max_penalty)
        self.i = rng.randrange(n_evs)

    def next_ev(self, now: float) -> int:
        pen = self.pen
        n = self.n_evs
        ev = self.i
        for _ in range(n):
            if pen[ev] == 0:
                break
            pen[ev] -= 1
            ev = ev + 1 if ev + 1 < n else 0
        self.i = ev + 1 if ev + 1 < n else 0
        return ev

    def _add(self, ev: int, points: int) -> None:
        if 0 <= ev < self.n_evs:
            p = self.pen[ev] + points
            self.pen[ev] = p if p < self.max_penalty else self.max_penalty

    def on_ack(self, ev: int, ecn: bool, now: float) -> None:
        if ecn:
            self._add(ev, self.pen_ecn)

    def on_nack(self, ev: int, now: float) -> None:
        self._add(ev, self.pen_nack)

    def on_loss(self, ev: int, now: float) -> None:
        # A vanished packet is what a UEC per-packet timer would catch: timeout penalty.
        self._add(ev, self.pen_timeout)

    def on_timeout(self, ev: int, now: float) -> None:
        self._add(ev, self.pen_timeout)


@PATH_SELECTORS.register("reps", "REPS: recycle EVs whose ACKs came back clean; freeze on failure")
class RepsSelector(PathSelector):
    """Recycled entropy packet spraying with a ring of ``ring_size`` clean EVs."""

    __slots__ = ("freeze_s", "frozen_until", "ring", "ring_size")
    PARAMS: ClassVar[dict[str, Any]] = {"ring_size": 8, "freeze_s": 100e-6}

    def __init__(
        self,
        n_evs: int,
        rng: random.Random,
        planes: int = 1,
        ring_size: int = 8,
        freeze_s: float = 100e-6,
    ) -> None:
        super().__init__(n_evs, rng, planes)
        if ring_size < 1:
            raise ValueError(f"reps ring_size {ring_size!r}; expected an int >= 1")
        if freeze_s < 0:
            raise ValueError(f"reps freeze_s {freeze_s!r}; expected seconds >= 0")
        self.ring_size = int(ring_size)
        self.ring: deque[int] = deque(maxlen=self.ring_size)
        self.freeze_s = float(freeze_s)
        self.frozen_until = -1.0

    def next_ev(self, now: float) -> int:
        ring = self.ring
        if ring:
            if now < self.frozen_until:
                ev = ring[0]
                ring.rotate(-1)  # reuse without consuming: no exploration while frozen
                return ev
            return ring.popleft()
        return randbelow(self.rng.getrandbits, self.n_evs)  # rng.randrange(n_evs)

    def on_ack(self, ev: int, ecn: bool, now: float) -> None:
        if not ecn and 0 <= ev < self.n_evs:
            self.ring.append(ev)

    def on_nack(self, ev: int, now: float) -> None:
        self._forget(ev)

    def on_timeout(self, ev: int, now: float) -> None:
        self._forget(ev)
        self.frozen_until = now + self.freeze_s

    def on_path_change(self, ev: int, now: float) -> None:
        self._forget(ev)

    def _forget(self, ev: int) -> None:
        if ev in self.ring:
            self.ring = deque((e for e in self.ring if e != ev), maxlen=self.ring_size)


@PATH_SELECTORS.register(
    "adaptive", "least recently congested EV (power of two choices over n_evs EVs)"
)
class AdaptiveSelector(PathSelector):
    """Prefer the EV whose last congestion signal is oldest."""

    __slots__ = ("i", "last", "nack_hold_s", "timeout_hold_s")
    PARAMS: ClassVar[dict[str, Any]] = {"nack_hold_s": 20e-6, "timeout_hold_s": 200e-6}

    def __init__(
        self,
        n_evs: int,
        rng: random.Random,
        planes: int = 1,
        nack_hold_s: float = 20e-6,
        timeout_hold_s: float = 200e-6,
    ) -> None:
        super().__init__(n_evs, rng, planes)
        if nack_hold_s < 0 or timeout_hold_s < 0:
            raise ValueError(
                f"adaptive nack_hold_s={nack_hold_s!r}, timeout_hold_s={timeout_hold_s!r}; "
                "expected seconds >= 0"
            )
        self.last = [float("-inf")] * n_evs
        self.nack_hold_s = float(nack_hold_s)
        self.timeout_hold_s = float(timeout_hold_s)
        self.i = rng.randrange(n_evs)

    def next_ev(self, now: float) -> int:
        n = self.n_evs
        a = self.i
        self.i = a + 1 if a + 1 < n else 0
        if n == 1:
            return a
        last = self.last
        b = randbelow(self.rng.getrandbits, n)  # rng.randrange(n)
        return b if last[b] < last[a] else a

    def _mark(self, ev: int, t: float) -> None:
        if 0 <= ev < self.n_evs and t > self.last[ev]:
            self.last[ev] = t

    def on_ack(self, ev: int, ecn: bool, now: float) -> None:
        if ecn:
            self._mark(ev, now)

    def on_nack(self, ev: int, now: float) -> None:
        self._mark(ev, now + self.nack_hold_s)

    def on_loss(self, ev: int, now: float) -> None:
        self._mark(ev, now + self.timeout_hold_s)

    def on_timeout(self, ev: int, now: float) -> None:
        self._mark(ev, now + self.timeout_hold_s)


def selector_class(name: str, allow_plugins: bool = False) -> type[PathSelector]:
    """The selector class registered as ``name``, or a plug-in ``"package.module:Class"``
    subclassing :class:`PathSelector` (loaded only with ``allow_plugins``)."""
    if is_plugin_spec(name):
        return load_class(name, PathSelector, "path-selector", allow_plugins)
    return PATH_SELECTORS.get(name)


def make_selector(
    name: str,
    n_evs: int,
    rng: random.Random,
    planes: int = 1,
    params: dict[str, Any] | None = None,
    *,
    allow_plugins: bool = False,
) -> PathSelector:
    """Build the selector registered as ``name`` (or the plug-in it names, with
    ``allow_plugins``) with ``params`` (checked against its PARAMS)."""
    cls = selector_class(name, allow_plugins)
    params = dict(params or {})
    unknown = sorted(set(params) - set(cls.PARAMS))
    if unknown:
        known = (
            f"it takes {', '.join(sorted(cls.PARAMS))}" if cls.PARAMS else "it takes no parameters"
        )
        raise ValueError(f"path selector {name!r} has no parameter(s) {unknown}; {known}")
    return cls(n_evs, rng, planes, **params)
