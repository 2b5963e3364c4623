"""User congestion-control plug-ins: opt-in loading and a guard that validates every handler.

A scenario may name a class as ``"module:Class"``; a YAML file alone never runs code, so
:func:`load_plugin` refuses unless the caller passes ``allow=True`` (the scenario layer does so only
for ``--allow-plugins``, docs/design.md "Extending"). A loaded plug-in runs inside
:class:`GuardedCC`: after every handler it checks the rate, window and credit the handler left
(NaN, infinite, negative or zero values are errors), and an exception inside a handler is
re-raised as
:class:`~podsim.nic.congestion.api.CongestionControlError` naming the algorithm, flow, handler and
simulated time - never swallowed.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from podsim.fabric.plugins import PluginError, load_class
from podsim.fabric.units import fmt_time
from podsim.nic.congestion.api import CCEvent, CongestionControl, CongestionControlError, FlowCC

__all__ = ["GuardedCC", "PluginError", "check_flow", "load_plugin"]


def load_plugin(spec: str, allow: bool = False) -> type[CongestionControl]:
    """The class named by ``spec`` (``"package.module:ClassName"``), checked to subclass
    :class:`CongestionControl` (:func:`podsim.fabric.plugins.load_class`). Raises
    :class:`PluginError` unless ``allow`` is True."""
    return load_class(spec, CongestionControl, "congestion-control", allow)


def _bad_number(x: Any, allow_zero: bool) -> bool:
    if x is None:
        return False
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return True
    if math.isnan(x) or math.isinf(x):
        return True
    return x < 0 if allow_zero else x <= 0


def check_flow(flow: FlowCC) -> str | None:
    """What is wrong with the knobs a handler left in ``flow``, or None if they are valid:
    rate and window None or finite and > 0; credit None or finite and >= 0; timer deadline a
    number (``inf`` allowed, NaN not)."""
    if _bad_number(flow.rate_bps, allow_zero=False):
        return f"rate_bps={flow.rate_bps!r} (expected None or a finite rate > 0)"
    if _bad_number(flow.window_bytes, allow_zero=False):
        return f"window_bytes={flow.window_bytes!r} (expected None or a finite size > 0)"
    if _bad_number(flow.credit_bytes, allow_zero=True):
        return f"credit_bytes={flow.credit_bytes!r} (expected None or a finite size >= 0)"
    t = flow.timer_due_s
    if isinstance(t, bool) or not isinstance(t, (int, float)) or math.isnan(t):
        return f"timer_due_s={t!r} (expected a time in seconds, or inf for none)"
    return None


class GuardedCC(CongestionControl):
    """Runs another algorithm's handlers with validation and error attribution."""

    def __init__(self, inner: CongestionControl, label: str | None = None) -> None:
        self.inner = inner
        self.label = label or getattr(inner, "name", None) or type(inner).__name__
        self.requires_rtt = inner.requires_rtt  # type: ignore[misc]
        self.requires_int = inner.requires_int  # type: ignore[misc]
        self.requires_cnp = inner.requires_cnp  # type: ignore[misc]
        self.requires_credit = inner.requires_credit  # type: ignore[misc]
        self.timer_interval_s = inner.timer_interval_s  # type: ignore[misc]

    @property
    def name(self) -> str:  # type: ignore[override]
        return self.label

    @property
    def uses_tx(self) -> bool:
        return self.inner.uses_tx

    def _fail(self, flow: FlowCC, handler: str, now: float, what: str) -> CongestionControlError:
        return CongestionControlError(
            f"congestion control {self.label!r} {what} in {handler} for flow {flow.flow_id!r} "
            f"at t={fmt_time(now)} ({now!r} s)"
        )

    def _run(self, handler: str, fn: Callable[..., None], now: float, flow: FlowCC, *args: Any):
        try:
            fn(*args)
        except CongestionControlError:
            raise
        except Exception as exc:
            raise self._fail(flow, handler, now, f"raised {type(exc).__name__}: {exc}") from exc
        problem = check_flow(flow)
        if problem is not None:
            raise self._fail(flow, handler, now, f"set an invalid value {problem}")

    def init_flow(self, flow: FlowCC, now: float) -> None:
        self._run("init_flow", self.inner.init_flow, now, flow, flow, now)

    def _timer(self, now: float, flow: FlowCC) -> None:
        if now >= flow.timer_due_s:
            self._run("on_timer", self.inner.on_timer, now, flow, now, flow)

    def handle_tx(self, ev: CCEvent, flow: FlowCC) -> None:
        self._timer(ev.now, flow)
        if flow.credit_bytes is not None:
            flow.credit_bytes -= ev.bytes
        self._run("on_tx", self.inner.on_tx, ev.now, flow, ev, flow)

    def handle_ack(self, ev: CCEvent, flow: FlowCC) -> None:
        self._timer(ev.now, flow)
        self._run("on_ack", self.inner.on_ack, ev.now, flow, ev, flow)

    def handle_nack(self, ev: CCEvent, flow: FlowCC) -> None:
        self._timer(ev.now, flow)
        self._run("on_nack", self.inner.on_nack, ev.now, flow, ev, flow)

    def handle_cnp(self, ev: CCEvent, flow: FlowCC) -> None:
        self._timer(ev.now, flow)
        self._run("on_cnp", self.inner.on_cnp, ev.now, flow, ev, flow)

    def handle_rtt(self, ev: CCEvent, flow: FlowCC) -> None:
        self._timer(ev.now, flow)
        self._run("on_rtt", self.inner.on_rtt, ev.now, flow, ev, flow)

    def handle_timeout(self, ev: CCEvent, flow: FlowCC) -> None:
        self._timer(ev.now, flow)
        self._run("on_timeout", self.inner.on_timeout, ev.now, flow, ev, flow)

    def handle_credit(self, ev: CCEvent, flow: FlowCC) -> None:
        self._timer(ev.now, flow)
        flow.credit_bytes = (flow.credit_bytes or 0) + ev.bytes
        self._run("on_credit", self.inner.on_credit, ev.now, flow, ev, flow)

    def handle_tick(self, now: float, flow: FlowCC) -> None:
        self._timer(now, flow)

    def __repr__(self) -> str:
        return f"<GuardedCC {self.label!r} around {self.inner!r}>"
