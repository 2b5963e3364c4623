# C layout of podsim.fabric.port for the optional compiled build (Cython augmenting .pxd; the
# .py beside it is the source, README "Compiled packet engine"). Times and rates are doubles
# (always floats in the .py), byte and packet counters 64-bit integers, flags C booleans.

cimport cython
from podsim.fabric.packet cimport Packet

cdef class _TxDone:
    cdef public object callbacks

cdef class Port:
    cdef public double _after, _busy_until, _mac_after, _paused_at, _spb
    cdef public double fec_s, length_m, paused_s, prop_s, rate_bps, rx_latency_s
    cdef public bint _pulling, _rx_ser, _tx_pending, paused, up
    cdef public long long credit_stalls, drop_bytes, drop_wire, drops, ecn_marks
    cdef public long long lost_bytes, lost_pkts, lost_wire, mac_bytes, mac_frames
    cdef public long long max_qbytes, pauses_rcvd, pauses_sent, qbytes, tx_bytes, tx_pkts
    cdef public object _cr, _cr0, _deliver, _eid, _env, _saved, _txcb, _wire_next
    cdef public list _heap
    cdef public object _hq, _macq, _q, _wire
    cdef public _TxDone _txev
    cdef public object dst_node, name, on_lost, reverse, source, src_node, switch, tier

    @cython.locals(kind="long long", w="long long", b="long long", now=double, end=double,
                   t=double)
    cpdef send(self, Packet pkt)
    @cython.locals(pkt=Packet, w="long long", now=double, end=double, t=double, more=bint)
    cpdef _tx_done(self, _ev)
