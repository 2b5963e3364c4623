# C layout of podsim.nic.nic's SmartNic for the optional compiled build (Cython augmenting .pxd;
# the .py beside it is the source, README "Compiled packet engine"). Times are doubles, wire
# bytes and counters 64-bit integers; the rest stay Python objects (a __dict__ keeps ad-hoc
# attributes working).

cimport cython
from podsim.nic.transport.pipeline cimport PacketPipeline, QpContextCache
from podsim.nic.transport.qp cimport QueuePair, RdmaPacket, RecvQp
from podsim.nic.transport.reliability cimport SenderReliability

cdef class SmartNic:
    cdef dict __dict__
    cdef public object rdma, env, card, config, cc, endpoints, rob
    cdef public QpContextCache cache
    cdef public PacketPipeline tx_pipe, rx_pipe
    cdef public object cc_event, cnp, credit, _credit_cb, _timer_cb, _seq, _rx_later
    cdef public object line_rate_bps, pcie_rate_cap_bps, pcie_rx_cap_bps
    cdef public list eids, ports, _timers, _ready, _heap
    cdef public dict qps
    cdef public long long planes, mode, overhead, min_wire, ack_wire, cnp_wire
    cdef public long long tx_data_pkts, rx_data_pkts, acks_sent, nacks_sent, cnps_sent
    cdef public long long rx_deferred
    cdef public double _timer_cb_at, _wake_t
    cdef public bint _in_pull

    @cython.locals(snd=SenderReliability, now=double, t=double)
    cpdef activate(self, QueuePair qp)
    cpdef _wake(self, double t)
    @cython.locals(qp=QueuePair, heap=list, t=double)
    cpdef _release(self, double now)
    @cython.locals(now=double, nf=double, start=double, busy=double, d=double, t=double,
                   port_free=double, heap=list, qp=QueuePair, pkt=RdmaPacket,
                   snd=SenderReliability, p="Py_ssize_t", pipe=PacketPipeline,
                   cache=QpContextCache, ref=dict)
    cpdef _pull(self, Py_ssize_t plane=*)
    @cython.locals(now=double, t=double, out=double, busy=double, d=double, hold=double,
                   kind="long long", qp=QueuePair, pipe=PacketPipeline, cache=QpContextCache,
                   ref=dict)
    cpdef receive(self, RdmaPacket pkt)
    @cython.locals(psn="long long", nxt="long long", pending="long long", v="long long",
                   plane="Py_ssize_t", nf=double, qp=QueuePair, tx=PacketPipeline)
    cpdef _rx_data(self, RdmaPacket pkt, RecvQp rq, double now)
