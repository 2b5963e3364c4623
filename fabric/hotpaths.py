"""The hand-inlined hot paths of the packet engine and their readable twins.

Four methods run once per packet and hop and are hand-inlined for speed (every function call
counts in CPython): :meth:`podsim.fabric.port.Port.send`, :meth:`podsim.fabric.port.Port._tx_done`
(a NIC port's next transmission),
:meth:`podsim.fabric.switch.SwitchPort._tx_done` and :meth:`podsim.fabric.switch.Switch.receive`.
Each sits beside a readable twin built from the one transmit start
(:meth:`podsim.fabric.port.Port._launch`) and small named steps. :func:`readable_paths` swaps the
twins in, so that a differential test runs the same scenario both ways and compares the results
bit for bit (tests/fabric/test_hotpaths.py). Build the network inside the context: ports bind
their callbacks when they are made.
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


@contextmanager
def readable_paths() -> Iterator[None]:
    """Within the context, the readable twins replace the inlined hot paths."""
    saved = [(cls, name, cls.__dict__[name]) for cls, name, _ in INLINED]
    try:
        for cls, name, twin in INLINED:
            setattr(cls, name, getattr(cls, twin))
        yield
    finally:
        for cls, name, fn in saved:
            setattr(cls, name, fn)
