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


def chunk_exponents(chunks: np.ndarray) -> np.ndarray:
    """Per row of a (chunks, V) float array: e with max|row| < 2**e, as int8 (EXPONENT_NONE if zero)."""
    peak = np.abs(chunks).max(axis=1) if chunks.size else np.zeros(len(chunks))
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
    return np.rint(np.ldexp(chunk, shift)).astype(np.int32)


def dequantize(sums: np.ndarray, shift_per_chunk: np.ndarray) -> np.ndarray:
    """(chunks, V) int32 sums back to float64, each row scaled by 2**-shift."""
    return np.ldexp(sums.astype(np.float64), -shift_per_chunk[:, None])


def error_bound(exponents: np.ndarray, workers: int) -> np.ndarray:
    """The per-chunk bound on |result - exact sum| stated above (0 for all-zero chunks)."""
    e = exponents.astype(np.int64)
    return np.where(e == EXPONENT_NONE, 0.0, workers * np.ldexp(1.0, e + headroom(workers) - 31))


def elementwise_bound(arrays: list[np.ndarray], values: int) -> np.ndarray:
    """The bound above for each element of the flat sum of these workers' arrays (V = values)."""
    flat = [np.asarray(a, np.float64).reshape(-1) for a in arrays]
    n = -(-flat[0].size // values)
    padded = np.zeros((len(flat), n * values))
    for i, f in enumerate(flat):
        padded[i, :f.size] = f
    agreed = chunk_exponents(padded.reshape(-1, values)).reshape(len(flat), n).max(axis=0)
    return np.repeat(error_bound(agreed, len(flat)), values)[:flat[0].size]
