from __future__ import annotations

import numpy as np
import pytest
from podsim.workloads.precision import (
    E4M3_TABLE,
    FP8_BLOCK,
    FP8_MAX,
    bf16_bits_to_f32,
    bytes_per_token,
    dequantize,
    e4m3_decode,
    e4m3_encode,
    f32_to_bf16_bits,
    quantize,
)


def _nearest_even(values: np.ndarray, grid: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """Brute force: nearest grid value, ties to the code with an even mantissa."""
    d = np.abs(values[:, None].astype(np.float64) - grid[None, :].astype(np.float64))
    best = d.min(axis=1, keepdims=True)
    tie = d == best
    even = (codes & 1) == 0
    pick = np.where(
        tie.sum(axis=1) > 1, np.argmax(tie & even[None, :], axis=1), np.argmax(tie, axis=1)
    )
    return grid[pick]


def test_e4m3_rounds_to_nearest_even_and_saturates():
    rng = np.random.default_rng(0)
    pos = np.flatnonzero(np.isfinite(E4M3_TABLE[:128]))
    grid, codes = E4M3_TABLE[pos], pos
    mids = (grid[1:] + grid[:-1]) / 2  # exact ties
    v = np.concatenate(
        [rng.uniform(0, 460, 3000), rng.uniform(0, 2**-5, 2000), mids, grid, [1e9]]
    ).astype(np.float32)
    got = e4m3_decode(e4m3_encode(v))
    want = _nearest_even(np.minimum(v, FP8_MAX), grid, codes)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(e4m3_decode(e4m3_encode(-v)), -want)


def test_e4m3_rejects_nan():
    with pytest.raises(ValueError, match="NaN"):
        e4m3_encode(np.array([1.0, np.nan], dtype=np.float32))


def test_bf16_round_trip_is_nearest_even():
    rng = np.random.default_rng(1)
    x = rng.standard_normal(5000).astype(np.float32) * 10
    b = bf16_bits_to_f32(f32_to_bf16_bits(x)).astype(np.float64)
    # the two BF16 neighbours of x: truncation and the next code up (same sign)
    lo = bf16_bits_to_f32((x.view(np.uint32) >> 16).astype(np.uint16)).astype(np.float64)
    hi = bf16_bits_to_f32(((x.view(np.uint32) >> 16) + 1).astype(np.uint16)).astype(np.float64)
    assert np.all(np.abs(b - x) <= np.minimum(np.abs(lo - x), np.abs(hi - x)))


@pytest.mark.parametrize("hidden", [7168, 4096, 256])
def test_bytes_per_token_from_first_principles(hidden):
    assert bytes_per_token("fp8", hidden) == hidden * 1 + (hidden // 128) * 4
    assert bytes_per_token("bf16", hidden) == 2 * hidden
    assert bytes_per_token("fp8", hidden, header_bytes=16) == hidden + hidden // 128 * 4 + 16


def test_physics_md_figures():
    assert bytes_per_token("fp8", 7168) == 7392
    assert bytes_per_token("fp8", 7168, header_bytes=16) == 7408
    assert bytes_per_token("bf16", 7168) == 14336


def test_quantize_fp8_error_bound_and_sizes():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((16, 512)).astype(np.float32) * rng.uniform(0.01, 100, (16, 1))
    q = quantize(x, "fp8")
    assert q.data.dtype == np.uint8 and q.scales.shape == (16, 512 // FP8_BLOCK)
    assert q.nbytes == 16 * (512 + 4 * 4) == q.data.nbytes + q.scales.nbytes
    y = dequantize(q)
    scale = np.repeat(q.scales, FP8_BLOCK, axis=1)
    # half an E4M3 ulp: 2**-4 relative for normals, 2**-10 x scale absolute for subnormals
    bound = np.maximum(np.abs(x) * 2.0**-4, scale * 2.0**-10) * (1 + 1e-6)
    assert np.all(np.abs(y - x) <= bound)


def test_bad_dtype_and_hidden():
    with pytest.raises(ValueError, match="fp8, bf16"):
        bytes_per_token("fp16", 128)
    with pytest.raises(ValueError, match="multiple of 128"):
        quantize(np.zeros((2, 100), np.float32), "fp8")
