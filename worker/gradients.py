"""The test gradients every rank draws from ``seed + rank``, and the check of a sum against the stated bound.

Below both `ina-allreduce` (worker/cli.py) and the simulator (virtual_fabric/), so the hosts of a
real network and the simulated ones sum the same arrays and judge them by the same bound.
"""

from __future__ import annotations

import numpy as np

from worker import quantize
from worker.ring import summation_bound


def gradient(seed: int, rank: int, size: int, dtype: str) -> np.ndarray:
    """Rank ``rank``'s array: normal values scaled by a random power of ten, so ranks differ in magnitude."""
    rng = np.random.default_rng(seed + rank)
    return (rng.standard_normal(size) * 10 ** rng.uniform(-3, 1)).astype(dtype)


def bound_ok(result: np.ndarray, arrays: list[np.ndarray], values: int,
             summed_in_type: bool = False) -> tuple[float, bool]:
    """Max |error| against the float64 sum, and whether every element is within the stated bound:
    the switches' (worker/quantize.py), or with ``summed_in_type`` (a ring job summing in the
    tensor's type, as gloo) recursive summation's, (N-1) eps of the sum of magnitudes."""
    exact = np.sum([a.astype(np.float64) for a in arrays], axis=0)
    eps = float(np.finfo(result.dtype).eps)
    bound = summation_bound(arrays) if summed_in_type else quantize.elementwise_bound(arrays, values)
    bound = bound + np.abs(exact) * eps  # the final cast
    err = np.abs(result.astype(np.float64) - exact)
    return float(err.max(initial=0.0)), bool((err <= bound).all())
