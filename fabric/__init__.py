"""podsim: fabric package (the network substrate on SimPy + networkx).

Packet-level engine, public API (SI units: seconds, bytes, bit/s, metres)
------------------------------------------------------------------------
``podsim.fabric.packet``
    ``Packet(size, src, dst, flow=0, psn=0, ev=0, kind=DATA, overhead=ROCE_OVERHEAD, ts=0.0,
    meta=None, int_rec=None)`` -- ``__slots__`` object; ``wire = max(size + overhead, 84)``.
    Fields ``size wire kind flow src dst psn ev ecn ts ts_echo int_rec meta`` (``link`` and
    ``callbacks`` belong to the fabric). Kinds ``DATA ACK NACK CNP PROBE`` (+ ``PAUSE RESUME``,
    switch-made). Constants ``ROCE_OVERHEAD = 82``, ``RETH_BYTES = 16``, ``MIN_WIRE_BYTES = 84``.
``podsim.fabric.network``
    ``Network(env, graph, switch_config=None, seed=0, *, switch_configs=None,
    include_scaleup=False)`` -- ports per directed link, switches, ECMP tables.
    ``attach(endpoint, receiver) -> Port`` (receiver.receive(pkt) or a callable gets every
    packet for the endpoint; returns its uplink), ``uplink(ep)``, ``downlink(ep)``,
    ``port(u, v)``, ``endpoint_id(name)``, ``endpoint_name(id)``, ``endpoints``, ``switches``,
    ``ports``, ``routing``, ``paths(src, dst)``, ``route(src, dst, flow, ev)``,
    ``path_evs(src, dst, flow) -> {path index: ev}``, ``unloaded_latency(path, wire)``,
    ``base_rtt(src, dst, data_wire, ack_wire=84)``, ``set_link_state(u, v, up, reroute=True)``,
    ``dropped_bytes()``, ``dropped_packets()``, ``bytes_in_flight(kind=DATA)``,
    ``packet_hops()``, ``port_table() -> DataFrame``.
``podsim.fabric.port``
    ``Port`` (one direction of a link): ``send(pkt)`` (unbounded NIC-side queue; strict
    priority control > DATA), pull model ``port.source = fn`` (called whenever the port is about
    to go idle and not paused; returns a Packet or None) plus ``kick()`` when the source has
    data again; ``idle``, ``busy_until``, ``qbytes``, ``queued_packets``, ``paused``,
    ``serialisation_s(wire)``, ``arrival_delay_s(wire)``; counters ``tx_bytes tx_pkts drops
    drop_bytes ecn_marks pauses_sent pauses_rcvd paused_s max_qbytes mac_frames``.
``podsim.fabric.switch``
    ``SwitchConfig(latency_s, store_and_forward, buffer_bytes, buffer_per_port_bytes, dt_alpha,
    ecn, ecn_kmin_bytes, ecn_kmax_bytes, ecn_pmax, pfc, pfc_xoff_bytes, pfc_xon_bytes)`` (each
    default declared with its source, ``podsim docs``), ``buffer_for(ports)``,
    ``SwitchConfig.from_mapping({...human strings...})``;
    ``Switch`` (``used``, ``max_used``, ``buffer_bytes``, ``noroute_drops``, ``select``).
``podsim.fabric.routing``
    ``Routing``: ``next_hops(switch, dst_id)``, ``paths``, ``route``, ``path_evs``,
    ``set_link(u, v, up)``, ``link_is_up``.
``podsim.fabric.host``
    ``Host(network, endpoint, *, mtu=4096, overhead=82, spray="none"|"random"|"paths",
    telemetry=False, trace=False)``, ``add_message(dst, size, start_s=0.0) -> Message``;
    ``make_hosts``, ``conservation``, ``message_table``.
``podsim.fabric.counters``
    ``Sampler(env, network, interval_s, *, ports=None, probes=None, start_s=None, until=None,
    skip_idle=False, record_tx=True)``: ``times``, ``queue_bytes``, ``tx_bytes``,
    ``probe(name)``, ``queue_of(port_name)``, ``table(keep)``.
``podsim.fabric.faults``
    ``FaultInjector(network, faults=(), *, reconvergence_s=0.0, seed=0, watch_flows=True)``
    with ``LinkDown(link=(u, v), at, until)``, ``LinkDegrade(link, rate_bps, ...)``,
    ``LinkBer(link, pre_fec_ber, llr=False, burst_len=1, ...)``, ``SwitchDown(node, ...)``,
    ``NicDown(node, ...)`` (``FAULT_KINDS`` registry, ``make_fault(kind, **params)``);
    ``add(fault)``, ``records``, ``log``, ``table()``, ``flow_table()``, ``summary()``.
``podsim.fabric.invariants``
    ``Checker(network, *, endpoints=(), skip=())``: ``check_all(final=False,
    status="complete")`` raises ``InvariantViolation`` (time, queues, links, delivery,
    end_to_end, messages); ``HostEndpoints(network, hosts, injector=None)``;
    ``run_checked(env, until=None, checker=None, check_every=200_000, stop=None)``;
    ``explain_unfinished(...)``.
``podsim.fabric.kernel``
    ``call_later(env, delay, fn, arg)``, ``call_at(env, when, fn, arg)`` -> ``Callback``
    (``cancel()``), ``run(env, until=None)`` (SimPy-compatible inlined loop),
    ``events_scheduled(env)``.
"""
