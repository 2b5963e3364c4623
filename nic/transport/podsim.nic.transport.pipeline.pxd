# C layout of podsim.nic.transport.pipeline for the optional compiled build (Cython augmenting
# .pxd; the .py beside it is the source, README "Compiled packet engine"): the NIC's packet
# pipelines and QP-context cache, whose fields the compiled NIC reads on every packet.

cdef class QpContextCache:
    cdef public object entries
    cdef public dict _ref
    cdef public list _ring
    cdef public Py_ssize_t _hand
    cdef public long long hits, misses

    cpdef bint touch(self, object qp)

cdef class PacketPipeline:
    cdef public double pps, interval, miss_penalty_s, miss_busy_s, next_free, dma_free
    cdef public object cache, dma_bps
    cdef public long long packets
