"""The sampler: fixed-interval queue depth and tx counters into NumPy arrays."""

from __future__ import annotations

import numpy as np
import pytest
from podsim.fabric.counters import Sampler
from podsim.fabric.topology import star

from tests.fabric.fabric_testutil import build


def test_sampler_grid_and_arrays():
    env, net, hosts = build(star(hosts=3), mtu=4096)
    for s in ("nic0.p0", "nic1.p0"):
        hosts[s].add_message("nic2.p0", 50 * 4096)
    smp = Sampler(env, net, 1e-6)
    env.run()
    t = smp.times
    assert t[0] == 0.0
    assert np.allclose(np.diff(t), 1e-6, rtol=0, atol=1e-15)
    assert t[-1] <= env.now < t[-1] + 1e-6 + 1e-12  # stopped once the network went quiet
    q = smp.queue_bytes
    assert q.shape == (len(t), len(net.ports)) and q.dtype == np.int64
    tx = smp.tx_bytes
    assert (np.diff(tx, axis=0) >= 0).all()  # cumulative
    bn = net.downlink("nic2.p0")
    assert smp.queue_of(bn.name).max() > 0
    assert smp.queue_of(bn.name).max() <= bn.max_qbytes
    assert tx[-1, smp.port_names.index(bn.name)] <= bn.tx_bytes


def test_sampler_until_and_probes():
    env, net, hosts = build(star(hosts=2))
    hosts["nic0.p0"].add_message("nic1.p0", 100 * 4096)
    smp = Sampler(env, net, 0.5e-6, until=2e-6, probes={"d": lambda: hosts["nic1.p0"].rx_pkts})
    env.run()
    assert list(smp.times) == pytest.approx([0, 0.5e-6, 1e-6, 1.5e-6, 2e-6])
    assert list(smp.probe("d")) == sorted(smp.probe("d"))
    with pytest.raises(ValueError, match="no probe"):
        smp.probe("x")
    with pytest.raises(ValueError, match="not sampled"):
        smp.queue_of("nope")


def test_sampler_arguments():
    env, net, _ = build(star(hosts=2))
    with pytest.raises(ValueError, match="interval_s"):
        Sampler(env, net, 0.0)
    with pytest.raises(ValueError, match="network"):
        Sampler(env, None, 1e-6)
    smp = Sampler(env, ports=[net.ports[0]], interval_s=1e-6)
    env.run()
    assert smp.queue_bytes.shape == (1, 1)


def _bursts(skip_idle: bool) -> Sampler:
    """Two 2:1 incast bursts 200 us apart: a long idle gap in between."""
    env, net, hosts = build(star(hosts=3), mtu=4096)
    for start in (0.0, 200e-6):
        for s in ("nic0.p0", "nic1.p0"):
            hosts[s].add_message("nic2.p0", 20 * 4096, start_s=start)
    smp = Sampler(env, net, 1e-6, skip_idle=skip_idle, record_tx=False)
    env.run()
    return smp


def test_sampler_skip_idle_drops_only_all_zero_samples():
    full, skip = _bursts(False), _bursts(True)
    assert len(skip.times) < len(full.times) / 4  # the gap is most of the run
    # both lie on the same grid, so kept times match exactly
    idx = np.searchsorted(full.times, skip.times)
    assert (full.times[idx] == skip.times).all()
    assert (full.queue_bytes[idx] == skip.queue_bytes).all()
    dropped = np.setdiff1d(np.arange(len(full.times)), idx)
    assert dropped.size and not full.queue_bytes[dropped].any()
    assert skip.queue_bytes[skip.times > 200e-6].any()  # the second burst is seen
    with pytest.raises(ValueError, match="record_tx"):
        _ = skip.tx_bytes


def test_sampler_table_keeps_the_busiest_queues():
    smp = _bursts(False)
    tab = smp.table(keep=1)
    peak = smp.queue_bytes.max(axis=0)
    busiest = smp.port_names[int(np.argmax(peak))]
    assert list(tab.columns) == ["time_s", "port", "depth_bytes"]
    assert set(tab["port"]) == {busiest} and len(tab) == len(smp.times)
    assert tab["depth_bytes"].max() == peak.max()
    # ports that never queued are left out even when keep allows them
    queued = {n for n, p in zip(smp.port_names, peak, strict=True) if p}
    assert set(smp.table(keep=100)["port"]) == queued
