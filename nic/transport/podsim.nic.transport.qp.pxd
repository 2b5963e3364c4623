# C layout of podsim.nic.transport.qp for the optional compiled build (Cython augmenting .pxd;
# the .py beside it is the source, README "Compiled packet engine"). PSNs, counters and wire
# bytes are 64-bit integers, times doubles (the "not yet" times NaN or inf), flags C booleans;
# flow labels (beyond 2^64), SACK bitmaps and payload sizes stay Python objects.

cimport cython
from podsim.fabric.packet cimport Packet
from podsim.nic.transport.reliability cimport ReceiverReliability, SenderReliability

cdef class RdmaPacket(Packet):
    cdef public long long dpsn, flags
    cdef public object aux, rq

cdef class Message:
    cdef public long long end_psn, first_psn, npkts, opcode, retx_pkts, skipped
    cdef public double done_s, post_s, start_s, t_delivered
    cdef public object error, id, qp, size, tag

cdef class RecvQp(ReceiverReliability):
    cdef public double _next_delivered, rx_hold
    cdef public long long ack_pkts, cnps, nacks, rx_bytes, rx_pkts

cdef class QueuePair:
    cdef public bint _cc_ack, _cc_tx, _fetched, _plain_fcc, _sel_ack, _std_ack, _tlp_ok
    cdef public bint queued, reorders, want_int
    cdef public object _ccev, _deliver_cb, cc, dst_nic, failed, fcc, flow_key, id, msgs, nic
    cdef public object retry_limit, sel, undelivered, unsent
    cdef public Message seg
    cdef public double _last_tx, _next_done, _timer_at, credit_deadline, nak_deadline
    cdef public double next_time, rto, rto_deadline, rto_max_s, rto_min_s, rttvar, rx_hold
    cdef public double tlp_deadline
    cdef public long long _last_wire, _seg_end, _seg_first, cnps_rcvd, credit_wanted, ecn_acks
    cdef public long long index, min_wire, mode, mtu, nacks_rcvd, nak_psn, next_ev, next_plane
    cdef public long long overhead, planes, retries, tc, tlp_probes, tx_bytes, tx_pkts
    cdef public set evs_used
    cdef public list dst_eids, src_eids
    cdef public RecvQp rx
    cdef public SenderReliability snd

    cpdef _set_seg(self, Message m)
    @cython.locals(snd=SenderReliability, m=Message, pkt=RdmaPacket, psn="long long",
                   idx="long long", mtu="long long", wire="long long", flags="long long",
                   ev="long long", plane="Py_ssize_t", last=bint, infl="long long")
    cpdef RdmaPacket build(self, double now)
    cpdef _arm(self, double t)
    @cython.locals(snd=SenderReliability, una0="long long", una="long long", rtt=double,
                   srtt=double, err=double, rto=double, pto=double)
    cpdef on_ack(self, RdmaPacket pkt, double now)
    cpdef _complete(self, long long una, double now)
    cpdef delivered(self, long long rcv_nxt, double now)
