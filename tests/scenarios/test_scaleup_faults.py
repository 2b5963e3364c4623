"""Scale-up links fail and degrade like scale-out links (issue 16 item 2): the packet engine's
scale-up pipes take link_down / link_degrade / switch_down as capacity changes, traffic moves to
the GPU's other switch planes, and the run slows as the flow engine's does."""

from __future__ import annotations

import podsim
import pytest
import simpy
from podsim.fabric.scaleup import ScaleUpPipes
from podsim.fabric.superpod import superpod
from podsim.scenarios.cli.app import app
from typer.testing import CliRunner

N_BYTES = 1_000_000
RATE = 100e9 * 8  # 100 GB/s per GPU over two switch planes: 50 GB/s per link


def _transfer(change=None) -> float:
    """Completion time of one N_BYTES transfer gpu0 -> gpu1; ``change(pipes)`` runs at 5 us."""
    g = superpod(pods=1, gpus_per_pod=2, gpus_per_server=2, scaleup_rate="100GB/s",
                 scaleup_switches=2, scaleup_latency="200ns")  # fmt: skip
    env = simpy.Environment()
    pipes = ScaleUpPipes(env, g)
    done: list[float] = []
    pipes.send(0, 1, N_BYTES, lambda _a: done.append(env.now))
    if change is not None:

        def at_5us():
            yield env.timeout(5e-6)
            change(pipes)

        env.process(at_5us())
    env.run()
    (t,) = done
    return t - (pipes.latency[0] + pipes.latency[1])


def test_pipes_closed_form_link_down_degrade_restore() -> None:
    assert _transfer() == pytest.approx(8 * N_BYTES / RATE)  # 10 us at 100 GB/s
    sent = RATE * 5e-6 / 8  # bytes out by 5 us
    # sender's link to plane 0 down: the rest goes over plane 1 at 50 GB/s
    t = _transfer(lambda p: p.set_link_rate("gpu0", "su0.0", 0.0))
    assert t == pytest.approx(5e-6 + 8 * (N_BYTES - sent) / (RATE / 2))
    # the receiver's link counts too (ingress)
    t_rx = _transfer(lambda p: p.set_link_rate("su0.1", "gpu1", 0.0))
    assert t_rx == pytest.approx(t)
    # degraded to 12.5 GB/s: striped over both links, each stripe at the slow link's rate
    t = _transfer(lambda p: p.set_link_rate("gpu0", "su0.0", 12.5e9 * 8))
    assert t == pytest.approx(5e-6 + 8 * (N_BYTES - sent) / (2 * 12.5e9 * 8))

    # down and restored at once: no change
    def bounce(p: ScaleUpPipes) -> None:
        p.set_link_rate("gpu0", "su0.0", 0.0)
        p.set_link_rate("gpu0", "su0.0", p.nominal["gpu0", "su0.0"])

    t = _transfer(bounce)
    assert t == pytest.approx(8 * N_BYTES / RATE)


def test_pipes_refuse_unknown_links_and_negative_rates() -> None:
    g = superpod(pods=1, gpus_per_pod=2, gpus_per_server=2, scaleup_switches=2)
    pipes = ScaleUpPipes(simpy.Environment(), g)
    with pytest.raises(KeyError, match="no scale-up link"):
        pipes.set_link_rate("gpu0", "su9.9", 0.0)
    with pytest.raises(ValueError, match="must be >= 0"):
        pipes.set_link_rate("gpu0", "su0.0", -1.0)


#: one 16-accelerator NVLink domain of two switch planes at 50 GB/s per GPU: every EP16 message
#: is scale-up traffic, so the scale-up domain sets the layer time
BASE = [
    "cluster.preset=nvl72",
    "cluster.layout=null",
    "cluster.params={pods: 1, gpus_per_pod: 16, scaleup_rate: 50GB/s, scaleup_switches: 2}",
    "workload.moe.ep_size=16",
    "workload.moe.tokens_per_rank=32",
    "outputs.plots=false",
]


def _layer(engine: str, fault: str | None = None) -> dict:
    extra = [f"faults=[{fault}]"] if fault else []
    s = podsim.run("quickstart", overrides=[*BASE, f"engine={engine}", *extra]).summary
    assert s["status"] == "complete" and s["messages"]["unfinished"] == 0, s
    return s


DOWN = "{kind: link_down, link: [gpu0, su0.0]}"
DEGRADED = "{kind: link_degrade, link: [gpu0, su0.0], rate: 50Gbps}"
SWITCH = "{kind: switch_down, node: su0.1, at: 0us}"


def test_failed_scaleup_link_slows_the_packet_run_as_on_the_flow_engine() -> None:
    base = _layer("packet")["sim_time_s"]
    times = {}
    for name, fault in (("down", DOWN), ("degraded", DEGRADED), ("switch", SWITCH)):
        s = _layer("packet", fault)
        times[name] = s["sim_time_s"]
        (rec,) = s["engine_info"]["scaleup_faults"]
        assert rec["target"] in ("gpu0-su0.0", "su0.1")
        flow = _layer("flow", fault)["sim_time_s"]
        assert times[name] == pytest.approx(flow, rel=0.02), name
    # gpu0 at half its bandwidth (traffic moved to plane 1) slows the layer; a 50 Gb/s stripe
    # (6.25 GB/s x 2 planes) slows it more; a whole plane down halves every GPU
    assert base < times["down"] < times["degraded"]
    assert times["switch"] > times["down"]
    # a fault that ends early costs less than a permanent one
    brief = _layer("packet", "{kind: link_down, link: [gpu0, su0.0], at: 0us, until: 60us}")
    assert base < brief["sim_time_s"] < times["down"]


def _validate(*overrides: str):
    args = ["validate", "quickstart"]
    for o in overrides:
        args += ["--set", o]
    return CliRunner().invoke(app, args, terminal_width=200)


def test_bit_errors_on_a_scaleup_link_are_refused_at_the_key() -> None:
    r = _validate("faults=[{kind: ber, link: [gpu0, su0.0], pre_fec_ber: 1e-5}]")
    assert r.exit_code == 2, r.output
    out = " ".join(r.output.split())
    assert "key faults[0].link" in out and "scale-up link" in out and "Traceback" not in out


def test_scaleup_faults_validate_on_the_packet_engine() -> None:
    r = _validate("engine=packet", "faults=[{kind: link_down, link: [gpu0, su0.0], until: 9us}]")
    assert r.exit_code == 0, r.output
