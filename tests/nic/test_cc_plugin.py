"""User plug-ins: opt-in loading, type checks, the value guard and error attribution."""

from __future__ import annotations

import textwrap

import pytest
from podsim.fabric.registry import UnknownNameError
from podsim.nic.congestion import (
    CC_ALGORITHMS,
    CCEvent,
    CongestionControlError,
    GuardedCC,
    PluginError,
    load_plugin,
    make_cc,
)

PLUGIN_SRC = textwrap.dedent(
    """
    from podsim.nic.congestion import CongestionControl

    class FixedWindow(CongestionControl):
        name = "fixed-window"

        def __init__(self, packets=4):
            self.packets = packets

        def init_flow(self, flow, now):
            flow.window_bytes = self.packets * flow.mtu
            flow.priv = {"acks": 0}

        def on_ack(self, ev, flow):
            flow.priv["acks"] += 1
            if ev.ecn:
                flow.request_path_change(ev.path)

    class NanRate(CongestionControl):
        def on_ack(self, ev, flow):
            flow.rate_bps = float("nan")

    class NegativeWindow(CongestionControl):
        def on_cnp(self, ev, flow):
            flow.window_bytes = -1

    class InfRate(CongestionControl):
        def init_flow(self, flow, now):
            flow.rate_bps = float("inf")

    class Raises(CongestionControl):
        def on_timeout(self, ev, flow):
            return 1 / 0

    class NotACC:
        pass
    """
)


@pytest.fixture
def plugin_module(tmp_path, monkeypatch):
    (tmp_path / "my_cc_plugins.py").write_text(PLUGIN_SRC)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "my_cc_plugins"


def test_plugins_need_explicit_opt_in(plugin_module):
    with pytest.raises(PluginError, match="--allow-plugins"):
        load_plugin(f"{plugin_module}:FixedWindow")
    with pytest.raises(PluginError, match="--allow-plugins"):
        make_cc(f"{plugin_module}:FixedWindow")


def test_bad_specs_are_reported(plugin_module):
    with pytest.raises(PluginError, match=r"form 'package\.module:ClassName'"):
        load_plugin("no_colon_here", allow=True)
    with pytest.raises(PluginError, match="cannot import module 'no_such_mod_xyz'"):
        load_plugin("no_such_mod_xyz:Foo", allow=True)
    with pytest.raises(PluginError, match="has no attribute 'Missing'"):
        load_plugin(f"{plugin_module}:Missing", allow=True)
    with pytest.raises(PluginError, match="not a subclass"):
        load_plugin(f"{plugin_module}:NotACC", allow=True)


def test_fixed_window_plugin_drives_flows_through_the_public_api(plugin_module):
    cc = make_cc(f"{plugin_module}:FixedWindow", {"packets": 8}, allow_plugins=True)
    assert isinstance(cc, GuardedCC)
    f = cc.new_flow(42, 400e9, 5e-6, 4096)
    assert f.window_bytes == 8 * 4096
    assert f.may_send(4096, 7 * 4096) and not f.may_send(4096, 8 * 4096)
    cc.handle_ack(CCEvent(1e-6, bytes=4096, ecn=True, path=9), f)
    assert f.priv["acks"] == 1
    assert f.take_requests() and f.avoid_path == 9
    assert not cc.uses_tx
    with pytest.raises(ValueError, match=r"unknown parameter.*'window'.*accepted: packets"):
        make_cc(f"{plugin_module}:FixedWindow", {"window": 3}, allow_plugins=True)


@pytest.mark.parametrize(
    ("cls", "handler", "call", "what"),
    [
        ("NanRate", "on_ack", "handle_ack", "rate_bps=nan"),
        ("NegativeWindow", "on_cnp", "handle_cnp", "window_bytes=-1"),
    ],
)
def test_guard_rejects_invalid_values_naming_flow_handler_and_time(
    plugin_module, cls, handler, call, what
):
    cc = make_cc(f"{plugin_module}:{cls}", allow_plugins=True)
    f = cc.new_flow("qp7", 400e9, 5e-6, 4096)
    with pytest.raises(CongestionControlError) as err:
        getattr(cc, call)(CCEvent(1.5e-3), f)
    msg = str(err.value)
    for part in (f"{plugin_module}:{cls}", "'qp7'", handler, what, "0.0015"):
        assert part in msg, (part, msg)


def test_guard_checks_init_and_reraises_handler_exceptions(plugin_module):
    cc = make_cc(f"{plugin_module}:InfRate", allow_plugins=True)
    with pytest.raises(CongestionControlError, match=r"rate_bps=inf.*init_flow"):
        cc.new_flow(1, 400e9, 5e-6, 4096)
    cc = make_cc(f"{plugin_module}:Raises", allow_plugins=True)
    f = cc.new_flow(3, 400e9, 5e-6, 4096)
    with pytest.raises(CongestionControlError, match=r"ZeroDivisionError.*on_timeout.*flow 3") as e:
        cc.handle_timeout(CCEvent(2e-3), f)
    assert isinstance(e.value.__cause__, ZeroDivisionError)


def test_builtins_by_name_with_did_you_mean_and_optional_guard():
    assert set(CC_ALGORITHMS.names()) == {
        "none",
        "dcqcn",
        "hpcc",
        "timely",
        "swift",
        "nscc",
        "rccc",
    }
    with pytest.raises(UnknownNameError, match="Did you mean 'dcqcn'"):
        make_cc("dcqnc")
    cc = make_cc("dcqcn", guard=True)
    f = cc.new_flow(1, 100e9, 5e-6, 4096)
    cc.handle_cnp(CCEvent(0.0), f)
    assert f.rate_bps == 100e9 * (1 - 1023 / 1024 / 2)  # first cut: nvidia's initial alpha
    assert cc.requires_cnp and cc.uses_tx
