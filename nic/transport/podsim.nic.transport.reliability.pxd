# C layout of podsim.nic.transport.reliability for the optional compiled build (Cython augmenting
# .pxd; the .py beside it is the source, README "Compiled packet engine"). PSNs, byte and packet
# counters are 64-bit integers, times doubles, flags C booleans; SACK bitmaps (unbounded ints),
# ``sack_bits`` (None or an int) and payload sizes stay Python objects.

cimport cython

cdef class SenderReliability:
    cdef public long long mode, reo_steps, snd_una, snd_nxt, high_sent, end_psn
    cdef public long long inflight_bytes, acked_bytes, retransmits, timeouts, n_lost
    cdef public long long _base, _cov_lo, _cov_hi
    cdef public double reo_factor, reo_min_s, srtt
    cdef public object sack_bits, sacked_rel, _tx_time, _rtx, loss_cb
    cdef public bytearray _state
    cdef public list _size, _ev

    cpdef long long post(self, long long npkts)
    cpdef bint has_data(self)
    @cython.locals(base="Py_ssize_t", state=bytearray)
    cpdef long long pick(self)
    @cython.locals(i="Py_ssize_t")
    cpdef bint on_send(self, long long psn, object size, double now, object ev=*)
    @cython.locals(una="long long", base="long long", i="Py_ssize_t", rack_ts=double,
                   state=bytearray, size=list)
    cpdef object on_ack(self, long long cum, object bits, double now, long long psn=*)
    cpdef on_duplicate_report(self)

cdef class ReorderBuffer:
    cdef public long long capacity, used, max_used, drops

    @cython.locals(used="long long")
    cpdef bint take(self, long long nbytes)
    cpdef release(self, long long nbytes)

cdef class ReceiverReliability:
    cdef public long long mode, ack_every, rcv_nxt, ooo_pkts, nack_psn, pending
    cdef public long long delivered_bytes, dup_pkts, ooo_drops
    cdef public bint seq_nak, ack_gap_fill, ack_req, nak_sent, dup_pending
    cdef public object sack_bits, ooo_bits
    cdef public dict _sizes
    cdef public ReorderBuffer rob

    @cython.locals(nxt="long long")
    cpdef long long on_data(self, long long psn, object payload, bint last, bint ecn)
    cpdef object sack_report(self, long long psn)
