# C layout of podsim.fabric.packet for the optional compiled build (Cython augmenting .pxd:
# the .py beside it is the source; README "Compiled packet engine"). Fields the switch and port
# paths do arithmetic on are C integers (always Python ints in the .py); the rest stay Python
# objects so that every value keeps its Python type (flow ids exceed 2^64, sizes may be NumPy).

cdef class Packet:
    cdef public long long wire, kind
    cdef public object callbacks, dst, ecn, ev, flow, int_rec, link, meta, psn, size, src, tc
    cdef public object ts, ts_echo
