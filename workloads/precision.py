"""Number formats on the wire: FP8 (E4M3) with per-128-channel scales, and BF16; and the
formats weights are stored in (:data:`WEIGHT_FORMATS`: BF16, FP8, W4A8 ...), which set the bytes
an inference step reads.

DeepSeek-V3 / DeepEP dispatch tokens in FP8 E4M3 with one float32 scale per 128 hidden
channels and combine in BF16 (docs/physics.md, MoE section: 7392 B per token at hidden 7168 for FP8,
14336 B for BF16). These helpers emulate both formats bit-exactly in NumPy so that the kernels
move real bytes of the real sizes:

- FP8 E4M3 ("fn" variant as in the OCP spec and ``torch.float8_e4m3fn``): 1 sign, 4 exponent
  bits (bias 7), 3 mantissa bits, no infinities, max finite 448, subnormals down to 2**-9.
  Encoding rounds to nearest, ties to even, and saturates at +-448 (as the scaled cast of
  DeepEP/DeepGEMM does: the per-block scale is amax / 448 so nothing overflows).
- BF16: the upper 16 bits of a float32, rounded to nearest even.

A token tensor on the wire is a :class:`WireTokens`: ``data`` holds the codes (uint8 for FP8,
uint16 for BF16) and ``scales`` the FP8 block scales.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = [
    "DTYPES",
    "FP8_BLOCK",
    "FP8_MAX",
    "WEIGHT_FORMATS",
    "WeightFormat",
    "WireTokens",
    "bf16_bits_to_f32",
    "bytes_per_token",
    "dequantize",
    "e4m3_decode",
    "e4m3_encode",
    "f32_to_bf16_bits",
    "quantize",
    "weight_format",
]

FP8_BLOCK = 128
"""Channels per FP8 scale (DeepSeek-V3 fine-grained quantisation, docs/physics.md)."""
FP8_MAX = 448.0
"""Largest finite E4M3 value."""
DTYPES = ("fp8", "bf16")

_MIN_NORMAL = 2.0**-6
_SUBNORMAL_STEP = 2.0**-9


def _e4m3_table() -> np.ndarray:
    codes = np.arange(256, dtype=np.int64)
    sign = np.where(codes >> 7 == 1, -1.0, 1.0)
    exp = (codes >> 3) & 0xF
    man = codes & 0x7
    mag = np.where(exp == 0, man * _SUBNORMAL_STEP, (1.0 + man / 8.0) * 2.0 ** (exp - 7.0))
    table = (sign * mag).astype(np.float32)
    table[(exp == 0xF) & (man == 0x7)] = np.nan  # 0x7F / 0xFF are NaN in E4M3fn
    return table


E4M3_TABLE = _e4m3_table()
"""Value of each of the 256 E4M3 codes (float32)."""


def e4m3_encode(x: np.ndarray) -> np.ndarray:
    """E4M3 codes (uint8) of float values: round to nearest even, saturate at +-448.

    NaN inputs are rejected: a NaN activation is a bug upstream, not something to transmit.
    """
    x = np.asarray(x, dtype=np.float32)
    if np.isnan(x).any():
        raise ValueError("e4m3_encode: input contains NaN; expected finite activations")
    a = np.minimum(np.abs(x), np.float32(FP8_MAX))
    bits = a.view(np.uint32)
    # Normal range: drop 20 of float32's 23 mantissa bits with round-to-nearest-even.
    r = bits + np.uint32(0x7FFFF) + ((bits >> np.uint32(20)) & np.uint32(1))
    r &= np.uint32(0xFFF00000)
    exp8 = (r >> np.uint32(23)).astype(np.int32) - (127 - 7)
    normal = (np.maximum(exp8, 0) << 3) | ((r >> np.uint32(20)) & np.uint32(7)).astype(np.int32)
    # Subnormal range: multiples of 2**-9; rint rounds half to even. 8 * 2**-9 is code 8 = 2**-6.
    sub = np.rint(a * np.float32(1.0 / _SUBNORMAL_STEP)).astype(np.int32)
    code = np.where(a < np.float32(_MIN_NORMAL), sub, normal).astype(np.uint8)
    code |= np.signbit(x).astype(np.uint8) << np.uint8(7)
    return code


def e4m3_decode(code: np.ndarray) -> np.ndarray:
    """Float32 values of E4M3 codes."""
    return np.take(E4M3_TABLE, np.asarray(code, dtype=np.uint8))


def f32_to_bf16_bits(x: np.ndarray) -> np.ndarray:
    """BF16 codes (uint16) of float32 values, round to nearest even."""
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    r = bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))
    return (r >> np.uint32(16)).astype(np.uint16)


def bf16_bits_to_f32(bits: np.ndarray) -> np.ndarray:
    """Float32 values of BF16 codes (exact)."""
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << np.uint32(16)).view(np.float32)


def bytes_per_token(dtype: str, hidden: int, header_bytes: int = 0) -> int:
    """Wire bytes of one token: FP8 = hidden + 4 B per 128 channels, BF16 = 2 x hidden."""
    _check_dtype(dtype)
    if dtype == "fp8":
        _check_fp8_hidden(hidden)
        return hidden + 4 * (hidden // FP8_BLOCK) + header_bytes
    return 2 * hidden + header_bytes


@dataclass(frozen=True)
class WireTokens:
    """Tokens in a wire format: ``data`` [n, hidden] codes, ``scales`` [n, hidden/128] (FP8)."""

    dtype: str
    data: np.ndarray
    scales: np.ndarray | None = None

    @property
    def num_tokens(self) -> int:
        return int(self.data.shape[0])

    @property
    def hidden(self) -> int:
        return int(self.data.shape[1])

    @property
    def bytes_per_token(self) -> int:
        return bytes_per_token(self.dtype, self.hidden)

    @property
    def nbytes(self) -> int:
        return self.num_tokens * self.bytes_per_token


def _check_dtype(dtype: str) -> None:
    if dtype not in DTYPES:
        raise ValueError(f"unknown wire dtype {dtype!r}; expected one of {', '.join(DTYPES)}")


def _check_fp8_hidden(hidden: int) -> None:
    if hidden % FP8_BLOCK:
        raise ValueError(f"FP8 needs hidden to be a multiple of {FP8_BLOCK}; got hidden={hidden}")


def quantize(x: np.ndarray, dtype: str) -> WireTokens:
    """Encode float activations [n, hidden] into the wire format ``dtype``.

    FP8 follows DeepSeek-V3's per-token, per-128-channel scaling: scale = amax(block) / 448
    (amax floored at 1e-4 as in DeepEP's tests, so all-zero blocks stay finite).
    """
    _check_dtype(dtype)
    x = np.asarray(x, dtype=np.float32)
    if x.ndim != 2:
        raise ValueError(f"quantize: expected a [tokens, hidden] array; got shape {x.shape}")
    if dtype == "bf16":
        return WireTokens("bf16", f32_to_bf16_bits(x))
    n, hidden = x.shape
    _check_fp8_hidden(hidden)
    blocks = x.reshape(n, hidden // FP8_BLOCK, FP8_BLOCK)
    amax = np.maximum(np.abs(blocks).max(axis=2), np.float32(1e-4))
    scales = (amax / np.float32(FP8_MAX)).astype(np.float32)
    codes = e4m3_encode(blocks / scales[:, :, None]).reshape(n, hidden)
    return WireTokens("fp8", codes, scales)


def dequantize(t: WireTokens) -> np.ndarray:
    """Float32 values [n, hidden] of wire tokens."""
    if t.dtype == "bf16":
        return bf16_bits_to_f32(t.data)
    n, hidden = t.data.shape
    vals = e4m3_decode(t.data).reshape(n, hidden // FP8_BLOCK, FP8_BLOCK)
    vals *= t.scales[:, :, None]
    return vals.reshape(n, hidden)


# --------------------------------------------------------------------------- weight formats


@dataclass(frozen=True)
class WeightFormat:
    """How a model's weights are stored (what an inference step reads from HBM) and the
    activation precision its GEMMs run at (which tensor-core peak applies).

    ``bits`` per weight, plus one scale of ``scale_bytes`` per ``group`` weights (0: none).
    """

    name: str
    bits: int
    group: int
    scale_bytes: int
    activations: str
    source: str

    @property
    def bytes_per_param(self) -> float:
        """Bytes per weight, scales included."""
        scales = self.scale_bytes / self.group if self.group else 0.0
        return self.bits / 8.0 + scales


#: Weight formats by name (``w4a8``: INT4 weights, FP8 activations).
WEIGHT_FORMATS: dict[str, WeightFormat] = {
    f.name: f
    for f in (
        WeightFormat("bf16", 16, 0, 0, "bf16", "[S] BF16 checkpoints, no scales"),
        WeightFormat(
            "fp8",
            8,
            128 * 128,
            4,
            "fp8",
            "[S] DeepSeek-V3 technical report (arXiv 2412.19437) sec. 3.3: FP8 E4M3 weights "
            "with one FP32 scale per 128x128 block",
        ),
        WeightFormat(
            "w4a8",
            4,
            32,
            2,
            "fp8",
            "[E] INT4 weights with one BF16 scale per group of 32 (the group size of Kimi K2 "
            "Thinking's native INT4 release, recalled, not re-checked), FP8 activations",
        ),
        WeightFormat(
            "w4a16",
            4,
            32,
            2,
            "bf16",
            "[E] INT4 weights, one BF16 scale per 32 weights, BF16 activations",
        ),
    )
}


def weight_format(name: str) -> WeightFormat:
    """A weight format by name; unknown names raise ValueError listing the choices."""
    try:
        return WEIGHT_FORMATS[name]
    except KeyError:
        raise ValueError(
            f"unknown weight format {name!r}; expected one of {', '.join(WEIGHT_FORMATS)}"
        ) from None
