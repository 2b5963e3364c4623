"""The hand-inlined hot paths of the packet engine and their readable twins.

Four methods run once per packet and hop and are hand-inlined for speed (every function call
counts in CPython): :meth:`podsim.fabric.port.Port.send`, :meth:`podsim.fabric.port.Port._tx_done`
(a NIC port's next transmission),
:meth:`podsim.fabric.switch.SwitchPort._tx_done` and :meth:`podsim.fabric.switch.Switch.receive`.
Each sits beside a readable twin built from the one transmit start
(:meth:`podsim.fabric.port.Port._launch`) and small named steps. :func:`readable_paths` swaps the
twins in, so that a differential test runs the same scenario both ways and compares the results
bit for bit (tests/fabric/test_hotpaths.py). Build the network inside the context: ports bind
their callbacks when they are made. The compiled packet engine (:mod:`podsim.fabric.compiled`)
has C classes whose methods cannot be swapped: run the twins with ``PODSIM_PURE_PYTHON=1``
(the tests that use them do so in a child process, tests/conftest.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from podsim.fabric.port import Port
from podsim.fabric.switch import Switch, SwitchPort

__all__ = ["INLINED", "readable_paths"]

#: (class, inlined method, its readable twin)
INLINED: tuple[tuple[type, str, str], ...] = (
    (Port, "send", "_send_readable"),
    (Port, "_tx_done", "_tx_done_readable"),
    (SwitchPort, "_tx_done", "_tx_done_readable"),
    (Switch, "receive", "_receive_readable"),
)


_HEAPTYPE = 1 << 9  # Py_TPFLAGS_HEAPTYPE: a class statement's type (mutable), not a C type


def _is_python(cls: type) -> bool:
    return bool(cls.__flags__ & _HEAPTYPE)


@contextmanager
def readable_paths() -> Iterator[None]:
    """Within the context, the readable twins replace the inlined hot paths (pure Python
    only: raises RuntimeError when the packet engine runs compiled)."""
    if any(not _is_python(cls) for cls, _, _ in INLINED):
        raise RuntimeError(
            "the packet engine's hot paths run compiled (podsim.fabric.compiled), so their "
            "readable twins cannot be swapped in: run with PODSIM_PURE_PYTHON=1"
        )
    saved = [(cls, name, cls.__dict__[name]) for cls, name, _ in INLINED]
    try:
        for cls, name, twin in INLINED:
            setattr(cls, name, getattr(cls, twin))
        yield
    finally:
        for cls, name, fn in saved:
            setattr(cls, name, fn)
