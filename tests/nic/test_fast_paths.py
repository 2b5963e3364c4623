"""The transport's speed-ups change no result: run control without a per-event predicate, NIC
timers without cancelled heap entries, DCQCN's skipped TX handler, the merged responder state."""

from __future__ import annotations

import simpy
from podsim.fabric.kernel import Callback, StopRun, call_at, run, stop_after_event
from podsim.fabric.network import Network
from podsim.fabric.topology import build_topology
from podsim.nic.congestion.dcqcn import DCQCN
from podsim.nic.nic import NicConfig, RdmaNetwork


def make(cfg: NicConfig, topo: str = "star", **topo_kw) -> tuple[Network, RdmaNetwork]:
    env = simpy.Environment()
    net = Network(env, build_topology(topo, **topo_kw), seed=1)
    return net, RdmaNetwork(net, cfg, seed=1)


# ---------------------------------------------------------------- kernel: stop_after_event
def test_stop_after_event_ends_run_after_the_current_event_only() -> None:
    """The stop check is urgent: it runs after the event that asked for it, before an ordinary
    event scheduled earlier for the same time; later events stay on the heap."""
    env = simpy.Environment()
    seen: list[str] = []
    call_at(env, 1.0, lambda _: (seen.append("a"), stop_after_event(env)))
    call_at(env, 1.0, lambda _: seen.append("b"))  # same time, scheduled before the check
    call_at(env, 2.0, lambda _: seen.append("c"))
    run(env)
    assert seen == ["a"] and env.now == 1.0 and len(env._queue) == 2
    run(env)  # the rest runs on the next call
    assert seen == ["a", "b", "c"]


def test_stop_after_event_check_false_keeps_running_and_stoprun_is_caught() -> None:
    env = simpy.Environment()
    seen: list[float] = []
    call_at(env, 1.0, lambda _: stop_after_event(env, lambda: False))
    call_at(env, 2.0, lambda _: seen.append(env.now))
    run(env, until=5.0)
    assert seen == [2.0] and env.now == 5.0  # numeric until: ends at until as usual

    def boom(_: object) -> None:
        raise StopRun

    call_at(env, 6.0, boom)
    call_at(env, 7.0, lambda _: seen.append(env.now))
    run(env, until=10.0)
    assert env.now == 6.0 and seen == [2.0]  # stopped at the raising event, not at until
    assert isinstance(env._queue[0][3], Callback)


# ---------------------------------------------------------------- RdmaNetwork.run
def test_run_stops_at_the_last_completion_and_leaves_later_events() -> None:
    net, rdma = make(NicConfig(cc="dcqcn"), hosts=3)
    env = net.env
    late: list[float] = []
    call_at(env, 1.0, lambda _: late.append(env.now))  # far after the transfers
    msgs = [rdma.post(0, 1, 1 << 20), rdma.post(2, 1, 64 << 10)]
    t = rdma.run()
    assert t == env.now == max(m.done_s for m in msgs)
    assert not late and rdma.pending == 0
    m = rdma.post(1, 0, 4096)  # a second run picks up where the first stopped
    assert rdma.run() == m.done_s < 1.0 and not late


def test_run_continues_when_a_completion_posts_more_work() -> None:
    """A message posted from an on_done callback in the event that completed the last one
    keeps the run going (the stop check sees it pending), as a per-event predicate would."""
    net, rdma = make(NicConfig(cc="none"), hosts=2)
    follow: list = []

    def chain(msg) -> None:
        if len(follow) < 3:
            follow.append(rdma.post(1, 0, 8192))

    rdma.on_done.append(chain)
    first = rdma.post(0, 1, 8192)
    rdma.run()
    assert len(follow) == 3 and all(m.done for m in follow)
    assert net.env.now == follow[-1].done_s > first.done_s


# ---------------------------------------------------------------- NIC timers
def test_nic_timer_rearms_leave_no_cancelled_events_on_the_heap() -> None:
    """QPs re-arm their RTO/TLP timers whenever the NIC's timer wakes (every ~RTO per QP);
    those re-arms must not leave a cancelled far-future event each on the event heap."""
    net, rdma = make(
        NicConfig(cc="dcqcn", rto_min_s=10e-6), "leaf-spine", hosts_per_leaf=4, leaves=2
    )
    env = net.env
    for i in range(8):
        for j in range(8):
            if i != j:
                rdma.post(i, j, 512 << 10)
    worst = [0]

    def sample(_: object) -> None:
        dead = sum(isinstance(e[3], Callback) and e[3].fn.__name__ == "_noop" for e in env._queue)
        worst[0] = max(worst[0], dead)
        if rdma.pending:
            call_at(env, env.now + 2e-6, sample)

    call_at(env, 1e-6, sample)
    rdma.run()
    fired = sum(q.snd.timeouts + q.tlp_probes for q in rdma._qp_list)
    assert env.now > 5 * 10e-6  # the timers had time to fire and re-arm many times
    assert worst[0] <= len(rdma.nics), (worst[0], fired)


# ---------------------------------------------------------------- DCQCN's TX handler
def test_dcqcn_skips_on_tx_until_a_cnp_with_identical_results(monkeypatch) -> None:
    """A DCQCN flow's on_tx only counts bytes once a CNP made it active, so the flow says
    ``tx_events = False`` until then and the NIC skips the handler (still running due timers).
    Forcing every TX event through gives bit-identical results."""

    def incast():
        _net, rdma = make(NicConfig(cc="dcqcn", selector="spray"), hosts=9)
        for i in range(1, 9):
            rdma.post(i, 0, 1 << 20)
        rdma.run()
        return rdma

    calls = [0]
    orig_on_tx = DCQCN.on_tx

    def counting_on_tx(self, ev, flow):
        calls[0] += 1
        orig_on_tx(self, ev, flow)

    monkeypatch.setattr(DCQCN, "on_tx", counting_on_tx)
    lazy = incast()
    lazy_calls = calls[0]
    q = lazy.qp_table()
    assert (q.cnps_rcvd > 0).any()  # the incast congests: some flows became active
    for qp in lazy._qp_list:
        assert qp.fcc.tx_events == (qp.cnps_rcvd > 0)

    orig_init, orig_cnp = DCQCN.init_flow, DCQCN.on_cnp

    def init_eager(self, flow, now):
        orig_init(self, flow, now)
        flow.tx_events = True

    def cnp_eager(self, ev, flow):
        orig_cnp(self, ev, flow)
        flow.tx_events = True

    monkeypatch.setattr(DCQCN, "init_flow", init_eager)
    monkeypatch.setattr(DCQCN, "on_cnp", cnp_eager)
    calls[0] = 0
    eager = incast()
    assert calls[0] == int(eager.qp_table().tx_pkts.sum()) > lazy_calls
    assert lazy.message_table().equals(eager.message_table())
    assert lazy.qp_table().equals(eager.qp_table())


# ---------------------------------------------------------------- responder state
def test_responder_state_is_one_object_with_the_reliability_view() -> None:
    _net, rdma = make(NicConfig(cc="none"), hosts=2)
    m = rdma.post(0, 1, 3 * 4096 + 100)
    rdma.run()
    rq = m.qp.rx
    assert rq.rel is rq
    assert rq.rel.delivered_bytes == rq.rx_bytes == m.size and rq.rx_pkts == m.npkts
    assert m.t_delivered < m.done_s
