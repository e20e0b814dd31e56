"""An allreduce call composed: the checks, padding and exponents before anything is sent; the
method the job spec chooses for it; the first chunks cut into one ``TreeCall`` per tree, the rest
round the ring; and at the end its result, or the overflow that refuses it.  Pure (no I/O, no
clock, no threads), so ``Worker`` and the virtual fabric's workers compose calls the same way and
fail them with the same words."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from worker import native, protocol, quantize
from worker.engine import Pacer, Tree, TreeCall, overflow_error
from worker.errors import SwitchOverflowError
from worker.jobspec import JobSpec
from worker.ring_layout import Layout, ring_types
from worker.tuner import Choice

SUPPORTED = (np.float32, np.float64, np.float16, np.int32)


def prepare(array: np.ndarray, values: int, take: Callable[[int, type], np.ndarray] = np.empty,
            in_place: bool = False) -> tuple[np.ndarray, np.ndarray | None]:
    """A private flat copy (in memory from ``take``), padded with zeros to whole chunks of ``values``
    (float16 as float32, whose scaling by 2**s cannot overflow), and each float chunk's exponent.
    With ``in_place``, where ``array`` can be summed into itself (``summed_in_place``), the array itself,
    flat, instead of a copy: the call then reads its chunks and writes its sums as it goes.  Bad input
    raises here, before anything is sent."""
    if not isinstance(array, np.ndarray):
        raise TypeError(f"allreduce takes a numpy array, not {type(array).__name__}")
    if array.dtype.type not in SUPPORTED:
        raise TypeError(f"allreduce sums {', '.join(t.__name__ for t in SUPPORTED)}, not {array.dtype}")
    flat = np.ascontiguousarray(array).reshape(-1)
    if in_place and summed_in_place(array):
        padded = flat
        done, exponents = native.prepare_into(flat, None, values)  # the exponents alone, in C
    else:
        padded = take(-(-flat.size // values) * values, np.float32 if array.dtype == np.float16 else array.dtype)
        done, exponents = native.prepare_into(flat, padded, values)  # one pass of C where the core is built
        if not done:
            padded[:flat.size] = flat
            padded[flat.size:] = 0
    if done:
        return padded, exponents
    if array.dtype.kind != "f":
        return padded, None
    tail = last_chunk(padded, values)  # in place, the array may end mid-chunk
    rows = padded[:len(padded) - len(padded) % values].reshape(-1, values)
    peaks = quantize.chunk_peaks(rows if tail is None else np.concatenate([rows, tail.reshape(1, -1)]))
    if not np.isfinite(peaks).all():
        bad = np.flatnonzero(~np.isfinite(flat))
        raise ValueError(f"{len(bad)} non-finite value(s), first at flat index {bad[0]}: {flat[bad[0]]}")
    return padded, quantize.peak_exponents(peaks)


def summed_in_place(array: np.ndarray) -> bool:
    """Whether a call can read ``array`` and write its sums into it directly, with no private copy (which
    costs as much CPU as a fifth of a call): a type the core sums as it is, in one writable block (a last
    chunk cut short goes apart, padded: ``last_chunk``)."""
    return (array.dtype in (np.float32, np.float64, np.int32) and array.flags.c_contiguous
            and array.flags.writeable and array.size > 0)


def last_chunk(padded: np.ndarray, values: int) -> np.ndarray | None:
    """Where a call's flat array ends mid-chunk (summed in place), a copy of its last chunk padded with
    zeros, which the tree that sums it reads and writes instead (``TreeCall``'s ``last``); else None."""
    cut = len(padded) % values
    if not cut:
        return None
    last = np.zeros(values, padded.dtype)
    last[:cut] = padded[len(padded) - cut:]
    return last


def ina_chunks(share: float, chunks: int) -> int:
    """How many of a call's chunks go through the trees (the first ones) at this share; the rest go round
    the ring."""
    return chunks if share >= 1 else round(share * chunks)


def tree_parts(spec: JobSpec, trees: list[Tree], padded: np.ndarray, exponents: np.ndarray | None, exact: bool,
               out: np.ndarray, share: float, last: np.ndarray | None = None) -> tuple[int, list[tuple[int, TreeCall]]]:
    """The trees' share of a call: k, the chunks that go through them (the first ones; the rest go
    round the ring), and each tree's (first chunk, TreeCall) writing its sums into ``out``.  ``last``:
    ``last_chunk``'s, where ``padded`` ends mid-chunk (the tree whose part ends the call sums it there)."""
    V, n = spec.values, -(-len(padded) // spec.values)
    k = ina_chunks(share, n)
    apart = last is not None and k == n  # the final chunk goes in ``last``, not in the rows
    rows = k - apart
    chunks, sums = padded[:rows * V].reshape(rows, V), out[:rows * V].reshape(rows, V)
    return k, [(first, tree.new_call(chunks[first:min(end, rows)], exact, sums[first:min(end, rows)],
                                     None if exponents is None else exponents[first:end],
                                     last if apart and end == k else None))
               for tree, (first, end) in zip(trees, spec.split(k)) if end > first]


def pace(trees: list[Tree], mbps: float | None, frame_bytes: int, shares: list[float] | None = None) -> None:
    """The trees' pacer for a call (one, shared: the most they offer the switches together; None: none).
    ``shares``: a pacer per tree at its share of ``mbps`` instead, for trees summed by engines of their own (an
    aggregation server's cores, a lane each): a shared pacer lets one tree's window take the whole rate while
    the other trees' cores idle.  Their bursts are one packet: every member's burst lands on the same core at
    once, and at the core's rate (C) what queues then never drains (4 packets: 15% on 2 servers' calls); and
    their phases are spread over an interval."""
    if shares is not None:  # new each call, tree i's first frame i/n of an interval late: in step, every
        # tree's frames would reach the servers' links at once, each interval (64 members' over 16 lanes of 3
        # trees a server: 1 MB, a switch port's buffer)
        for i, (t, share) in enumerate(zip(trees, shares, strict=True)):
            t.pacer = Pacer(mbps * share, frame_bytes, 1, i / len(trees)) if mbps else None
        return
    current = trees[0].pacer if trees else None
    if (current.mbps if current is not None else None) == mbps:
        return
    pacer = Pacer(mbps, frame_bytes) if mbps else None
    for t in trees:
        t.pacer = pacer


@dataclass(frozen=True)
class RingPart:
    """What a call sends round the ring: its elements from ``first`` on, in the type the ring sums them
    in (a copy, so the call's input may go back to its pool), and how the ring runs them."""

    first: int  # the call's element the part starts at (the trees' chunks end there)
    data: np.ndarray  # in the ring's sum type (``ring_types``: int32 in int64, a hybrid's floats in float64)
    narrow: np.dtype  # what the allgather moves and the ring's sum is cast to once
    layout: Layout
    pace_mbps: tuple[float, ...] | None  # per level of the layout


class ComposedCall:
    """One allreduce call as both the worker and the virtual fabric run it: the choice the spec makes for
    it (from the packets the trees sent before, the same on every rank), the trees paced for it, the
    first ``k`` chunks through the trees (``tree_parts``: (first chunk, TreeCall), their sums written into
    ``out``) and the rest round the ring (``ring_part``, None when there is none).  The caller runs the parts
    and hands the ring's sum to ``result``."""

    def __init__(self, spec: JobSpec, trees: list[Tree], padded: np.ndarray, exponents: np.ndarray | None,
                 shape: tuple[int, ...], dtype: np.dtype | type, out: np.ndarray) -> None:
        """``padded`` and ``exponents``: ``prepare``'s for an array of ``shape`` and ``dtype``; ``out``: as long
        as ``padded``, of its dtype."""
        self.shape, self.dtype, self.out = shape, np.dtype(dtype), out
        self.size = math.prod(shape)
        self.values = spec.values
        self.sent: list[int] | None = [t.next_packet for t in trees] or None  # what the choice goes by
        self.choice: Choice = spec.choose(self.size, self.dtype, self.sent)
        if trees:
            own = [t.share for t in spec.trees] if any(t.to_ip for t in spec.trees) else None  # servers' cores
            pace(trees, self.choice.ina_pace_mbps, protocol.load(spec.values, spec.udp_port).frame_bytes, own)
        self.last = last_chunk(padded, self.values)  # summed in place, ``padded`` may end mid-chunk
        self.k, self.tree_parts = tree_parts(spec, trees, padded, exponents, self.dtype == np.int32, out,
                                             self.choice.ina_share if trees else 0.0, self.last)
        self.ring_part = self._cut_ring_part(spec, padded)

    def _cut_ring_part(self, spec: JobSpec, padded: np.ndarray) -> RingPart | None:
        first = self.k * self.values
        if first >= self.size:
            return None
        alone = self.choice.method == "ring" and spec.ring_sum == "native"  # a ring alone sums as gloo does
        wide, narrow = ring_types(self.dtype, alone)
        return RingPart(first, padded[first:self.size].astype(wide), narrow, spec.layout(self.choice.layout),
                        self.choice.ring_pace_mbps)

    @property
    def tree_calls(self) -> list[TreeCall]:
        return [call for _, call in self.tree_parts]

    def _overflow(self, ring_sum: np.ndarray | None) -> SwitchOverflowError | None:
        """What refuses the call's sums once its parts are done: chunks the switches flagged (numbered in
        the call, elements named), else an int32 ring sum that leaves int32 (its elements named)."""
        flagged = [first + c for first, call in self.tree_parts for c in call.overflowed]
        if flagged:
            return overflow_error(flagged, self.values)
        if self.ring_part is None or ring_sum is None or self.dtype != np.int32:
            return None
        limits = np.iinfo(np.int32)
        outside = np.flatnonzero((ring_sum < limits.min) | (ring_sum > limits.max))
        if not len(outside):
            return None
        return SwitchOverflowError(f"the int32 sum of the ring part (elements {self.ring_part.first}..{self.size - 1}) "
                                   f"leaves int32 in {len(outside)} element(s), first element "
                                   f"{self.ring_part.first + int(outside[0])}")

    def result(self, ring_sum: np.ndarray | None, into: np.ndarray | None = None) -> np.ndarray:
        """The call's sums, the trees' followed by the ring's, in its dtype and shape; with ``into``, written
        there (cast: float16 is summed as float32) and returned.  Raises a ``SwitchOverflowError`` instead
        when a part overflowed."""
        if (self.ring_part is None) != (ring_sum is None):
            raise ValueError("the ring's sum is needed exactly when the call has a ring part")
        error = self._overflow(ring_sum)
        if error is not None:
            raise error
        if self.ring_part is not None:
            self.out[self.ring_part.first:self.size] = ring_sum
        elif self.last is not None:  # the trees summed the final chunk apart
            first = self.size - self.size % self.values
            self.out[first:self.size] = self.last[:self.size - first]
        sums = self.out[:self.size]
        if into is None:
            return sums.astype(self.dtype, copy=False).reshape(self.shape)
        np.copyto(into, sums.reshape(into.shape), casting="unsafe")
        return into
