"""An allreduce call cut into the trees' parts: the checks, padding and exponents before anything
is sent, and one ``TreeCall`` per tree.  Pure (no I/O), so ``Worker`` and the virtual fabric's
workers cut calls the same way."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from worker import quantize
from worker.engine import Pacer, Tree, TreeCall
from worker.jobspec import JobSpec

SUPPORTED = (np.float32, np.float64, np.float16, np.int32)


def prepare(array: np.ndarray, values: int, take: Callable[[int, type], np.ndarray] = np.empty
            ) -> tuple[np.ndarray, np.ndarray | None]:
    """A private flat copy (in memory from ``take``), padded with zeros to whole chunks of ``values``
    (float16 as float32, whose scaling by 2**s cannot overflow), and each float chunk's exponent.
    Bad input raises here, before anything is sent."""
    if not isinstance(array, np.ndarray):
        raise TypeError(f"allreduce takes a numpy array, not {type(array).__name__}")
    if array.dtype.type not in SUPPORTED:
        raise TypeError(f"allreduce sums {', '.join(t.__name__ for t in SUPPORTED)}, not {array.dtype}")
    flat = np.ascontiguousarray(array).reshape(-1)
    padded = take(-(-flat.size // values) * values, np.float32 if array.dtype == np.float16 else array.dtype)
    padded[:flat.size] = flat
    padded[flat.size:] = 0
    if array.dtype.kind != "f":
        return padded, None
    peaks = quantize.chunk_peaks(padded.reshape(-1, values))
    if not np.isfinite(peaks).all():
        bad = np.flatnonzero(~np.isfinite(flat))
        raise ValueError(f"{len(bad)} non-finite value(s), first at flat index {bad[0]}: {flat[bad[0]]}")
    return padded, quantize.peak_exponents(peaks)


def ina_chunks(share: float, chunks: int) -> int:
    """How many of a call's chunks go through the trees (the first ones) at this share; the rest go round
    the ring."""
    return chunks if share >= 1 else round(share * chunks)


def tree_parts(spec: JobSpec, trees: list[Tree], padded: np.ndarray, exponents: np.ndarray | None, exact: bool,
               out: np.ndarray, share: float) -> tuple[int, list[tuple[int, TreeCall]]]:
    """The trees' share of a call: k, the chunks that go through them (the first ones; the rest go
    round the ring), and each tree's (first chunk, TreeCall) writing its sums into ``out``."""
    V = spec.values
    k = ina_chunks(share, len(padded) // V)
    chunks = padded[:k * V].reshape(k, V)
    sums = out[:k * V].reshape(k, V)
    return k, [(first, tree.new_call(chunks[first:end], exact, sums[first:end],
                                     None if exponents is None else exponents[first:end]))
               for tree, (first, end) in zip(trees, spec.split(k)) if end > first]


def pace(trees: list[Tree], mbps: float | None, frame_bytes: int) -> None:
    """The trees' pacer for a call (one, shared: the most they offer the switches together; None: none)."""
    current = trees[0].pacer if trees else None
    if (current.mbps if current is not None else None) == mbps:
        return
    pacer = Pacer(mbps, frame_bytes) if mbps else None
    for t in trees:
        t.pacer = pacer
