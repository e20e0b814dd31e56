"""Float chunks to int32 and back, SwitchML-style: one exponent per chunk, agreed through the switch.

Each worker sends, per chunk of V values, the exponent ``e`` of its largest magnitude
(``max|x| < 2**e``); the switch keeps the max ``E`` over the workers. Every worker then scales
the chunk by ``2**s`` with ``s = 30 - E - ceil(log2 N)`` and rounds to int32, so each value is
at most ``2**(30 - b)`` in magnitude and N of them sum to at most ``2**30``: no overflow, ever
(the switch's overflow flag is the safety net). The sum comes back as ``sum_q * 2**-s``.

Error bound (per element, N workers, b = ceil(log2 N)): each rounding errs by at most 1/2,
so ``|result - exact sum| <= N * 2**(E + b - 31)``, i.e. about N * 2**(b - 31) of the chunk's
largest input magnitude; a float32/float16 output adds its own final rounding (half an ulp).
"""

from __future__ import annotations

import numpy as np

EXPONENT_NONE = -128  # int8 exponent of an all-zero chunk (or "no chunk")
EXPONENT_MIN = -100  # smaller magnitudes are scaled as if they were 2**-100 (bound still holds)
EXPONENT_MAX = 127  # int8: |x| must stay below 2**127
HEADROOM_BITS = 30  # 2**30 * ... < 2**31: the sum of N scaled values fits int32


def headroom(workers: int) -> int:
    """b = ceil(log2 N): the bits N contributions can add to one value."""
    return max(0, (workers - 1).bit_length())


def chunk_peaks(chunks: np.ndarray) -> np.ndarray:
    """max|row| per row of a (chunks, V) float array, in two read passes and no temporary (a NaN
    or infinity in a row makes its peak NaN or infinite)."""
    if not chunks.size:
        return np.zeros(len(chunks))
    return np.maximum(chunks.max(axis=1), -chunks.min(axis=1))


def chunk_exponents(chunks: np.ndarray) -> np.ndarray:
    """Per row of a (chunks, V) float array: e with max|row| < 2**e, as int8 (EXPONENT_NONE if zero)."""
    return peak_exponents(chunk_peaks(chunks))


def peak_exponents(peak: np.ndarray) -> np.ndarray:
    """``chunk_exponents`` from the rows' peaks (``chunk_peaks``)."""
    _, e = np.frexp(peak)  # peak = m * 2**e with 0.5 <= m < 1
    if (e > EXPONENT_MAX).any():
        raise ValueError(f"values of magnitude {peak.max():.3g} do not fit an int8 exponent (must be < 2**127)")
    e = np.maximum(e, EXPONENT_MIN)
    return np.where(peak == 0, EXPONENT_NONE, e).astype(np.int8)


def shifts(exponents: np.ndarray | int, workers: int) -> np.ndarray:
    """s per chunk from the agreed exponents E (an array, or one exponent): scale by 2**s before rounding."""
    return HEADROOM_BITS - headroom(workers) - np.asarray(exponents, np.int64)


def quantize(chunk: np.ndarray, shift: int) -> np.ndarray:
    """One chunk to int32 with scale 2**shift (a chunk whose agreed exponent is NONE is all zeros)."""
    return quantize_rows(np.asarray(chunk)[None], np.array([shift]))[0].astype(np.int32)


def quantize_rows(chunks: np.ndarray, shift_per_chunk: np.ndarray) -> np.ndarray:
    """A run of (float32 or float64) chunks at once, each row scaled by its own 2**shift and rounded:
    integral floats, to be stored as int32.

    Scaling by a power of two is exact whenever the result is a normal number, so float32 chunks
    scaled in float32 round to the same integers as their float64 copies (a result below 2**-126
    rounds to 0 either way); float32 takes the float32 path when 2**shift is a float32."""
    shift = np.asarray(shift_per_chunk, np.int64)
    if chunks.dtype == np.float32 and (not shift.size or (shift.min() >= -126 and shift.max() <= 127)):
        scaled = chunks * np.ldexp(np.float32(1), shift).astype(np.float32)[:, None]
    else:
        scaled = np.asarray(chunks, np.float64) * np.ldexp(1.0, shift)[:, None]
    return np.rint(scaled, out=scaled)


def dequantize(sums: np.ndarray, shift_per_chunk: np.ndarray) -> np.ndarray:
    """(chunks, V) int32 sums back to float64, each row scaled by 2**-shift."""
    return np.ldexp(sums.astype(np.float64), -shift_per_chunk[:, None])


def dequantize_into(out: np.ndarray, sums: np.ndarray, shift_per_chunk: np.ndarray) -> None:
    """``out[...] = dequantize(sums, shifts)`` in ``out``'s dtype, in one pass for float32.

    int32 -> float32 then a power-of-two scale rounds once, to the value the float64 product cast
    to float32 has, as long as the result is a normal float32; a call with a scale that could make
    a subnormal (an exponent below -96) takes the float64 way."""
    shift = np.asarray(shift_per_chunk, np.int64)
    if out.dtype == np.float32 and (not shift.size or shift.max() <= 126):
        np.multiply(sums, np.ldexp(np.float32(1), -shift).astype(np.float32)[:, None], out=out, dtype=np.float32)
    else:
        out[...] = dequantize(sums, shift)


def error_bound(exponents: np.ndarray, workers: int) -> np.ndarray:
    """The per-chunk bound on |result - exact sum| stated above (0 for all-zero chunks)."""
    e = exponents.astype(np.int64)
    return np.where(e == EXPONENT_NONE, 0.0, workers * np.ldexp(1.0, e + headroom(workers) - 31))


def elementwise_bound(arrays: list[np.ndarray], values: int) -> np.ndarray:
    """The bound above for each element of the flat sum of these workers' arrays (V = values).
    One array at a time (EXPONENT_NONE is the least exponent, so a plain max agrees): 1,024 workers'
    megabytes are never stacked."""
    size = np.asarray(arrays[0]).size
    padded = np.zeros(-(-size // values) * values)
    agreed = None
    for a in arrays:
        padded[:size] = np.asarray(a, np.float64).reshape(-1)
        e = chunk_exponents(padded.reshape(-1, values))
        agreed = e if agreed is None else np.maximum(agreed, e)
    return np.repeat(error_bound(agreed, len(arrays)), values)[:size]
