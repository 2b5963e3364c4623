"""Every invariant is broken on purpose by a fault-injected model, and the run stops.

Each test builds a small network, injects one specific bug (a port that loses or duplicates a
packet silently, a switch that forgets to release its buffer, an event scheduled in the past,
an endpoint that swallows data, a sender that gives up silently) and checks that
:class:`podsim.fabric.invariants.InvariantViolation` names the right invariant, before the run's
natural end where the bug strikes mid-run. Control runs without the bug (including real
faults) pass every check.
"""

from __future__ import annotations

import pytest
from podsim.fabric.faults import FaultInjector, LinkBer, LinkDown
from podsim.fabric.host import Host
from podsim.fabric.invariants import (
    CHECKS,
    Checker,
    HostEndpoints,
    InvariantViolation,
    run_checked,
)
from podsim.fabric.kernel import call_at, run
from podsim.fabric.packet import Packet
from podsim.fabric.switch import SwitchPort
from podsim.fabric.topology import leaf_spine, star

from tests.fabric.fabric_testutil import build

MTU = 4096


def incast(n_pkts: int = 200, **kw):
    """nic0 and nic1 both send to nic2 through one switch: the egress queue builds."""
    env, net, hosts = build(star(hosts=3), mtu=MTU, **kw)
    msgs = [hosts[f"nic{i}.p0"].add_message("nic2.p0", n_pkts * MTU) for i in (0, 1)]
    checker = Checker(net, endpoints=[HostEndpoints(net, hosts.values())])
    return env, net, hosts, msgs, checker


def natural_end() -> float:
    env, *_ = incast()
    run(env)
    return env.now


def expect(check: str, env, checker, *, every: int = 50, final: bool = False) -> InvariantViolation:
    with pytest.raises(InvariantViolation) as info:
        run_checked(env, checker=checker, check_every=every)
        if final:
            checker.check_all(final=True)
    err = info.value
    assert err.check == check, str(err)
    assert f"invariant {check!r} violated" in str(err) and err.details
    return err


# --------------------------------------------------------------------------- controls


def test_clean_runs_pass_every_check():
    env, _net, _hosts, msgs, checker = incast()
    run_checked(env, checker=checker, check_every=20)
    checker.check_all(final=True)
    assert checker.checks_run > 10 and all(m.done for m in msgs)


def test_real_faults_pass_and_unfinished_messages_have_reasons():
    """A link cut (the host does not retransmit) and bit errors with and without LLR: bytes
    stay conserved, and every unfinished message is explained."""
    env, net, hosts = build(leaf_spine(hosts_per_leaf=2, leaves=2), mtu=MTU, spray="random")
    for i in range(2):
        hosts[f"nic{i}.p0"].add_message(f"nic{2 + i}.p0", 300 * MTU)
    inj = FaultInjector(
        net,
        [
            LinkDown(link=("leaf0", "spine0"), at=5e-6, until=30e-6),
            LinkBer(link=("leaf1", "spine1"), pre_fec_ber=2e-3, llr=True),
            LinkBer(link=("leaf1", "nic3.p0"), pre_fec_ber=1.6e-3),
        ],
        reconvergence_s=5e-6,
    )
    checker = Checker(net, endpoints=[HostEndpoints(net, hosts.values(), injector=inj)])
    run_checked(env, checker=checker, check_every=50)
    checker.check_all(final=True)
    fails = checker.failures()
    assert len(fails) == 2 and all("lost to" in reason for *_, reason in fails)


# --------------------------------------------------------------------------- time


def test_time_going_backward_stops_the_run():
    """A port with a negative propagation delay schedules arrivals in the past."""
    env, net, _hosts, msgs, checker = incast()
    net.port("leaf0", "nic2.p0")._after = -5e-6
    err = expect("time", env, checker)
    assert "before" in err.summary or "ran after" in err.summary
    assert not any(m.done for m in msgs)


def test_check_time_sees_a_pending_event_in_the_past_and_a_clock_rewind():
    env, _net, _hosts, _msgs, checker = incast(n_pkts=4)
    run(env, until=1e-6)
    checker.check_all()
    env._queue.insert(0, (0.5e-6, 1, -1, Packet(64, 0, 1)))  # bypasses call_at's guard
    with pytest.raises(InvariantViolation, match="before now") as info:
        checker.check_all()
    assert info.value.check == "time"
    env._queue.pop(0)
    env._now = 0.2e-6  # the clock itself went back
    with pytest.raises(InvariantViolation, match="backward"):
        checker.check_time()


# --------------------------------------------------------------------------- queues


class _LeakyPort(SwitchPort):
    """A switch egress that forgets to release one byte of shared buffer per packet."""

    __slots__ = ()

    def _tx_done(self, ev: object) -> None:
        had = bool(self._q or self._hq)
        super()._tx_done(ev)
        if had:
            self.switch.used += 1


class _NegativePort(SwitchPort):
    """A switch egress that subtracts a packet's bytes twice from its queue."""

    __slots__ = ()

    def _tx_done(self, ev: object) -> None:
        had = bool(self._q or self._hq)
        super()._tx_done(ev)
        if had:
            self.qbytes -= MTU


def _infect(port: SwitchPort, cls: type) -> None:
    port.__class__ = cls
    port._txcb = (port._tx_done,)


@pytest.mark.pure_python  # changes a port's class
@pytest.mark.parametrize("cls", [_LeakyPort, _NegativePort])
def test_buffer_or_queue_accounting_bug_stops_the_run(cls: type):
    env, net, _hosts, _msgs, checker = incast()
    _infect(net.port("leaf0", "nic2.p0"), cls)
    err = expect("queues", env, checker)
    assert "leaf0" in str(err)
    assert env.now < natural_end()


# --------------------------------------------------------------------------- links


def test_a_link_that_loses_a_packet_silently_stops_the_run():
    env, net, _hosts, _msgs, checker = incast()
    p = net.port("nic0.p0", "leaf0")
    inner = p.receiver
    seen = [0]

    def lossy(pkt: Packet) -> None:
        seen[0] += 1
        if seen[0] != 30:  # the 30th packet vanishes: no counter knows
            inner(pkt)

    p.set_receiver(lossy)
    err = expect("links", env, checker)
    assert "switch leaf0" in str(err)
    assert env.now < natural_end()


def test_a_link_that_duplicates_a_packet_stops_the_run():
    env, net, _hosts, _msgs, checker = incast()
    p = net.port("nic1.p0", "leaf0")
    inner = p.receiver

    def twice(pkt: Packet) -> None:
        inner(pkt)
        if pkt.psn == 10:
            dup = Packet(pkt.size, pkt.src, pkt.dst, pkt.flow, pkt.psn, pkt.ev, meta=pkt.meta)
            dup.link = pkt.link
            inner(dup)

    p.set_receiver(twice)
    expect("links", env, checker)


# --------------------------------------------------------------------------- delivery


def test_data_delivered_twice_to_the_application_stops_the_run():
    """The last packet of a message reaches the host twice (a receiver bug)."""
    env, net, _hosts, msgs, checker = incast()
    p = net.downlink("nic2.p0")
    inner = p.receiver

    def twice(pkt: Packet) -> None:
        inner(pkt)
        if pkt.psn == msgs[0].pkts - 1 and pkt.flow == msgs[0].flow and pkt.size:
            inner(pkt)

    p.set_receiver(twice)
    err = expect("delivery", env, checker)
    assert "completed twice" in str(err) or "delivered of" in str(err)


# --------------------------------------------------------------------------- end to end


def test_an_endpoint_that_swallows_data_stops_the_run():
    """The fabric delivered a packet, but the receiver never counted it."""
    env, net, hosts, _msgs, checker = incast()
    h = hosts["nic2.p0"]
    real = h.receive
    n = [0]

    def receive(pkt: Packet) -> None:
        n[0] += 1
        if n[0] != 25:
            real(pkt)

    net.downlink("nic2.p0").set_receiver(receive)
    err = expect("end_to_end", env, checker)
    assert "difference +4096 B" in str(err)
    assert env.now < natural_end()


# --------------------------------------------------------------------------- messages


class _QuitterHost(Host):
    """A sender that silently stops one packet short of every message."""

    def _pull(self):
        m = self._cur
        if m is not None and m.size - m.sent <= self.mtu:
            self._cur = None
            return None
        return super()._pull()


def test_a_message_that_neither_completes_nor_fails_stops_the_run():
    env, net, hosts = build(star(hosts=2), mtu=MTU)
    net.port("nic0.p0", "leaf0").source = None
    q = _QuitterHost(net, "nic0.p0", mtu=MTU)
    m = q.add_message("nic1.p0", 10 * MTU)
    checker = Checker(net, endpoints=[HostEndpoints(net, [q, hosts["nic1.p0"]])])
    err = expect("messages", env, checker, final=True)
    assert "neither completed nor failed" in str(err) and "message 0" in str(err)
    assert not m.done


def test_time_limit_explains_unfinished_messages():
    env, _net, _hosts, _msgs, checker = incast()
    run(env, until=2e-6)
    with pytest.raises(InvariantViolation):
        checker.check_all(final=True)  # status "complete" but messages are open: a bug
    checker.check_all(final=True, status="time-limit")
    assert all("time limit" in r for *_, r in checker.failures("time-limit"))


def test_skipping_checks_and_names():
    env, net, _hosts, _msgs, _checker = incast()
    with pytest.raises(ValueError, match="unknown invariant"):
        Checker(net, skip=["tiem"])
    net.port("leaf0", "nic2.p0")._after = -5e-6
    quiet = Checker(net, skip=CHECKS)
    call_at(env, 0.0, lambda _: None)
    run(env, until=3e-6)
    quiet.check_all(final=True)  # every check skipped: nothing raised
    assert quiet.checks_run == 1
