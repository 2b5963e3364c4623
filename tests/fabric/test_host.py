"""The minimal line-rate host: segmentation, start times, completion, spray modes."""

from __future__ import annotations

import math

import pytest
from podsim.fabric.host import Host, message_table
from podsim.fabric.topology import leaf_spine, star

from tests.fabric.fabric_testutil import OVERHEAD, build


def test_segmentation_and_completion():
    env, _net, hosts = build(star(hosts=2), mtu=1000)
    m = hosts["nic0.p0"].add_message("nic1.p0", 2500)
    env.run()
    assert m.pkts == 3 and m.sent == 2500 and m.rx_bytes == 2500 and m.done
    h0, h1 = hosts["nic0.p0"], hosts["nic1.p0"]
    assert h0.sent_bytes == 2500 and h0.sent_pkts == 3 and h0.sent_all
    assert h1.delivered_bytes == 2500 and h1.rx_pkts == 3 and h1.received == [m]
    # the last packet (500 B) follows two 1000 B ones back to back; cut-through, so only its
    # own (shorter) serialisation adds at the last hop
    ser = lambda w: 8 * w / 400e9  # noqa: E731
    assert m.t_first_rx == h1.lat_max  # sent at t=0
    assert m.t_done == pytest.approx(m.t_first_rx + ser(1000 + OVERHEAD) + ser(500 + OVERHEAD))
    assert h1.lat_max - h1.lat_min == pytest.approx(ser(1082) - ser(582))


def test_messages_run_fifo_by_start_time():
    env, _net, hosts = build(star(hosts=2), mtu=4096)
    h = hosts["nic0.p0"]
    late = h.add_message("nic1.p0", 4096, start_s=10e-6)
    early = h.add_message("nic1.p0", 4096, start_s=2e-6)
    env.run()
    assert [m.id for m in h.messages] == [early.id, late.id]
    assert early.t_first_tx == 2e-6 and late.t_first_tx == 10e-6
    assert early.t_done < late.t_done
    df = message_table([h])
    assert list(df.start_s) == [2e-6, 10e-6] and (df.rx_bytes == df.bytes).all()


def test_back_to_back_messages_keep_line_rate():
    env, _net, hosts = build(star(hosts=2), mtu=4096)
    h = hosts["nic0.p0"]
    ms = [h.add_message("nic1.p0", 10 * 4096) for _ in range(3)]
    env.run()
    ser = 8 * (4096 + OVERHEAD) / 400e9
    assert ms[2].t_last_rx - ms[0].t_first_rx == pytest.approx(29 * ser, rel=1e-9)


def test_incomplete_message_stays_nan():
    env, net, hosts = build(star(hosts=2))
    net.set_link_state("nic0.p0", "leaf0", up=False)
    m = hosts["nic0.p0"].add_message("nic1.p0", 4096)
    env.run()
    assert not m.done and math.isnan(m.t_done) and net.dropped_bytes() == 4096


@pytest.mark.parametrize("mode", ["none", "random", "paths", False, True])
def test_spray_modes(mode):
    g = leaf_spine(hosts_per_leaf=1, leaves=2, spines=4)
    env, net, hosts = build(g, spray=mode, mtu=64)
    hosts["nic0.p0"].add_message("nic1.p0", 400 * 64)
    env.run()
    counts = [net.port("leaf0", f"spine{j}").tx_pkts for j in range(4)]
    assert sum(counts) == 400
    if mode in ("none", False):
        assert sorted(counts) == [0, 0, 0, 400]
    elif mode == "paths":
        assert counts == [100, 100, 100, 100]
    else:
        assert min(counts) > 50


def test_bad_arguments():
    _env, net, hosts = build(star(hosts=2))
    h = hosts["nic0.p0"]
    with pytest.raises(ValueError, match="size"):
        h.add_message("nic1.p0", 0)
    with pytest.raises(ValueError, match="start_s"):
        h.add_message("nic1.p0", 10, start_s=-1)
    with pytest.raises(ValueError, match="dst"):
        h.add_message(7, 10)
    with pytest.raises(ValueError, match="spray"):
        Host(net, "nic1.p0", spray="sometimes")
    with pytest.raises(ValueError, match="mtu"):
        Host(net, "nic1.p0", mtu=0)
