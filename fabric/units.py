"""Human units at the edges, SI inside.

podsim computes in seconds (float), bytes (int), bits per second (float) and metres (float).
Scenario files and the command line use strings such as ``"400Gbps"``, ``"50GB/s"``, ``"4KiB"``,
``"1.5us"`` or ``"5m"``; this module parses them into SI and prints SI values back human.

Conventions (the networking ones): rate prefixes are decimal (``400G`` = 400e9 bit/s); a rate
with ``B`` (``GB/s``, ``GBps``) is bytes per second and is returned as bits per second. Size
prefixes ``K/M/G/T`` (with or without ``B``) are decimal, ``Ki/Mi/Gi/Ti`` binary. A bare number
is already SI. Bad strings raise :class:`UnitError` (a ``ValueError``) that names the string and
the expected form.
"""

from __future__ import annotations

import math
import re

__all__ = [
    "UnitError",
    "fmt_length",
    "fmt_rate",
    "fmt_size",
    "fmt_time",
    "parse_length",
    "parse_packet_rate",
    "parse_rate",
    "parse_size",
    "parse_time",
]


class UnitError(ValueError):
    """A quantity string that does not parse; the message says what was expected."""


_NUM = r"(?P<num>[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)"
_DEC = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}
_BIN = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50}

_RATE_RE = re.compile(_NUM + r"\s*(?P<prefix>[kKMGTP]?)\s*(?P<unit>bps|b/s|bit/s|Bps|B/s|byte/s|)$")
_SIZE_RE = re.compile(_NUM + r"\s*(?P<prefix>Ki|Mi|Gi|Ti|Pi|[kKMGTP]?)\s*(?P<unit>B|bytes?|)$")
_TIME_RE = re.compile(_NUM + r"\s*(?P<unit>ps|ns|us|µs|μs|ms|s|sec|min|h|)$")
_LEN_RE = re.compile(_NUM + r"\s*(?P<unit>mm|cm|m|km|)$")
_PPS_RE = re.compile(_NUM + r"\s*(?P<prefix>[kKMGT]?)\s*(?P<unit>pps|)$")

_TIME_SCALE = {
    "ps": 1e-12,
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "μs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "sec": 1.0,
    "": 1.0,
    "min": 60.0,
    "h": 3600.0,
}
_LEN_SCALE = {"mm": 1e-3, "cm": 1e-2, "m": 1.0, "km": 1e3, "": 1.0}


def _number(value: object, what: str, form: str) -> float | None:
    """SI numbers pass through; ``None`` means 'parse it as a string'."""
    if isinstance(value, bool):
        raise UnitError(f"{what} {value!r} is a boolean; expected {form}")
    if isinstance(value, int | float):
        if not math.isfinite(value):
            raise UnitError(f"{what} {value!r} is not finite; expected {form}")
        return float(value)
    if not isinstance(value, str):
        raise UnitError(f"{what} {value!r} has type {type(value).__name__}; expected {form}")
    return None


def _match(rx: re.Pattern[str], value: str, what: str, form: str) -> re.Match[str]:
    m = rx.match(value.strip())
    if m is None:
        raise UnitError(f"cannot read {what} {value!r}; expected {form}")
    return m


def _non_negative(x: float, value: object, what: str) -> float:
    # A huge mantissa times a prefix (e.g. '1e400KiB') overflows to inf.
    if not math.isfinite(x):
        raise UnitError(f"{what} {value!r} is too large to represent (not a finite number)")
    if x < 0:
        raise UnitError(f"{what} {value!r} is negative; it must be >= 0")
    return x


_RATE_FORM = "a rate such as '400Gbps', '400G', '400 Gb/s' or '50GB/s' (bytes/s)"


def parse_rate(value: str | float) -> float:
    """A data rate in bits per second. ``"50GB/s"`` is 400e9; a bare number is bit/s."""
    x = _number(value, "rate", _RATE_FORM)
    if x is None:
        m = _match(_RATE_RE, str(value), "rate", _RATE_FORM)
        x = float(m["num"]) * _DEC[m["prefix"]]
        if m["unit"] in ("Bps", "B/s", "byte/s"):
            x *= 8.0
    return _non_negative(x, value, "rate")


_PPS_FORM = "a packet rate such as '400Mpps' or '4e8'"


def parse_packet_rate(value: str | float) -> float:
    """A packet rate in packets per second (``"400Mpps"`` is 4e8)."""
    x = _number(value, "packet rate", _PPS_FORM)
    if x is None:
        m = _match(_PPS_RE, str(value), "packet rate", _PPS_FORM)
        x = float(m["num"]) * _DEC[m["prefix"]]
    return _non_negative(x, value, "packet rate")


_SIZE_FORM = "a size such as '4096', '4KiB', '4KB' (=4000), '1.5MiB' or '150KB'"


def parse_size(value: str | int | float) -> int:
    """A size in bytes (int). Fractional byte counts are an error, not silently rounded."""
    x = _number(value, "size", _SIZE_FORM)
    if x is None:
        m = _match(_SIZE_RE, str(value), "size", _SIZE_FORM)
        p = m["prefix"]
        x = float(m["num"]) * (_BIN[p] if p in _BIN else _DEC[p])
    _non_negative(x, value, "size")
    r = round(x)
    if abs(x - r) > 1e-9 * max(1.0, abs(x)):
        raise UnitError(f"size {value!r} is not a whole number of bytes ({x!r})")
    return int(r)


_TIME_FORM = "a duration such as '1.5us', '200ns', '2ms' or '1s' (bare numbers are seconds)"


def _scaled(num: float, scale: float) -> float:
    """``num`` x ``scale``, dividing by the exact reciprocal of a sub-unit scale so that
    '100us' is the double nearest 1e-4 (100 * 1e-6 is one bit off), and prints back as
    '100us'."""
    return num / round(1.0 / scale) if scale < 1.0 else num * scale


def parse_time(value: str | float) -> float:
    """A duration in seconds."""
    x = _number(value, "duration", _TIME_FORM)
    if x is None:
        m = _match(_TIME_RE, str(value), "duration", _TIME_FORM)
        x = _scaled(float(m["num"]), _TIME_SCALE[m["unit"]])
    return _non_negative(x, value, "duration")


_LEN_FORM = "a length such as '5m', '50cm' or '2km' (bare numbers are metres)"


def parse_length(value: str | float) -> float:
    """A cable length in metres."""
    x = _number(value, "length", _LEN_FORM)
    if x is None:
        m = _match(_LEN_RE, str(value), "length", _LEN_FORM)
        x = _scaled(float(m["num"]), _LEN_SCALE[m["unit"]])
    return _non_negative(x, value, "length")


def _fmt(x: float, steps: list[tuple[float, str]], unit: str, digits: int) -> str:
    ax = abs(x)
    for scale, prefix in steps:
        if ax >= scale:
            return f"{x / scale:.{digits}g}{prefix}{unit}"
    scale, prefix = steps[-1]
    return f"{x / scale:.{digits}g}{prefix}{unit}"


def fmt_rate(bps: float, digits: int = 4) -> str:
    """``400e9`` -> ``'400Gbps'``."""
    steps = [(1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, "")]
    return _fmt(bps, steps, "bps", digits)


def fmt_size(nbytes: float, digits: int = 4) -> str:
    """``4096`` -> ``'4KiB'``; binary prefixes as sizes are usually powers of two."""
    steps = [(2**40, "Ti"), (2**30, "Gi"), (2**20, "Mi"), (2**10, "Ki"), (1.0, "")]
    return _fmt(nbytes, steps, "B", digits)


def fmt_time(seconds: float, digits: int = 4) -> str:
    """``1.5e-6`` -> ``'1.5us'``."""
    if seconds == 0:
        return "0s"
    steps = [(1.0, ""), (1e-3, "m"), (1e-6, "u"), (1e-9, "n"), (1e-12, "p")]
    return _fmt(seconds, steps, "s", digits)


def fmt_length(metres: float, digits: int = 4) -> str:
    """``5.0`` -> ``'5m'``."""
    steps = [(1e3, "k"), (1.0, ""), (1e-2, "c"), (1e-3, "m")]
    return _fmt(metres, steps, "m", digits)
