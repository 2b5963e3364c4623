# C layout of podsim.fabric.switch for the optional compiled build (Cython augmenting .pxd; the
# .py beside it is the source, README "Compiled packet engine").

cimport cython
from podsim.fabric.packet cimport Packet
from podsim.fabric.port cimport Port

cdef class Ingress:
    cdef public object port
    cdef public long long max_rx_bytes, rx_bytes
    cdef public bint xoff

cdef class SwitchPort(Port):
    cdef public double _kmax, _kmin, _slope
    cdef public object _rand

    @cython.locals(pkt=Packet, w="long long", q="long long", sw=Switch, ing=Ingress,
                   now=double, end=double, t=double)
    cpdef _tx_done(self, _ev)

cdef class Switch:
    cdef dict __dict__
    cdef public object env, name, config, _rng, _salt, _eid, _ar_q, ingresses
    cdef public list ports, _nh, _heap
    cdef public long long used, max_used, noroute_drops, held_bytes
    cdef public object noroute_bytes, noroute_wire, buffer_bytes, _xon
    cdef public double _alpha, _xoff
    cdef public bint _lossy, _ar, _hold

    @cython.locals(port=SwitchPort, hops=tuple, n="Py_ssize_t", kind="long long",
                   w="long long", q="long long", used="long long", r="long long",
                   now=double, end=double, t=double, inp=Port, ing=Ingress)
    cpdef receive(self, Packet pkt)
