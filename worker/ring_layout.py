"""How a host ring allreduce arranges its ranks: one algorithm over *levels* of rings, pure (no I/O).

A ``Layout`` names ring sizes g_1..g_k (their product is the number of ranks N) and the rank at each
position.  Position p has the coordinates c_i = (p // (g_1 ... g_{i-1})) mod g_i, and the ranks that
differ only in c_i form one ring of level i.  The reduce-scatter runs level 1's rings on the whole
array (g_1 - 1 steps), then level 2's rings on the part each rank then owns, and so on; afterwards
every rank owns one finished part, and the allgather runs the levels back.  Every rank sends
2(N-1)/N of the array in 2 sum(g_i - 1) steps, each to one peer while receiving from another.

- one level (N,) is the classic flat ring: 2(N-1) steps;
- levels of 2 are recursive halving and doubling (N a power of two): 2 log2(N) steps;
- a topology's groups (the hosts under one leaf, the leaves of one pod, the pods) give the
  hierarchical ring: 2 sum(g_i - 1) steps, 58 at 1,024 hosts of fat_tree(16) against 2,046.

``schedule`` is what one rank does; ``reduce_sum`` computes what every rank ends with, adding in
exactly the order the ranks do (so the virtual fabric's sums are the real ring's bits).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

LAYOUTS = ("flat", "hierarchical", "halving_doubling")


class LayoutError(ValueError):
    """A layout that does not describe a ring of these ranks."""


@dataclass(frozen=True)
class Layout:
    name: str  # one of LAYOUTS: how the controller made it
    levels: tuple[int, ...]  # ring sizes, level 1 first; their product is the number of ranks
    order: tuple[int, ...]  # the rank at each position (position 0 first)

    def __post_init__(self) -> None:
        if self.name not in LAYOUTS:
            raise LayoutError(f"ring layout {self.name!r}: one of {', '.join(LAYOUTS)}")
        if any(isinstance(g, bool) or not isinstance(g, int) or g < 1 for g in self.levels):
            raise LayoutError(f"ring layout {self.name}: levels {self.levels} must be positive whole numbers")
        if sorted(self.order) != list(range(len(self.order))) or math.prod(self.levels) != len(self.order):
            raise LayoutError(f"ring layout {self.name}: levels {self.levels} and an order of {len(self.order)} "
                              f"ranks do not describe the ranks 0..{len(self.order) - 1} once each")

    @classmethod
    def flat(cls, n: int) -> Layout:
        return cls("flat", (n,), tuple(range(n)))

    @property
    def steps(self) -> int:
        return 2 * sum(g - 1 for g in self.levels)

    def peers(self, rank: int, level: int) -> tuple[int, int]:
        """The rank this one sends to and the one it receives from in its ring of ``level``."""
        p = self.order.index(rank)
        stride = math.prod(self.levels[:level])
        g = self.levels[level]
        c = p // stride % g
        base = p - c * stride
        return self.order[base + (c + 1) % g * stride], self.order[base + (c - 1) % g * stride]

    def to_dict(self) -> dict:
        return {"name": self.name, "levels": list(self.levels), "order": list(self.order)}

    @classmethod
    def from_dict(cls, data: dict) -> Layout:
        return cls(data["name"], tuple(data["levels"]), tuple(data["order"]))


@dataclass(frozen=True)
class Step:
    """One step of one rank: send ``send`` (an element range) to ``to`` while receiving ``recv`` from
    ``frm``, then add what came (reduce-scatter) or keep it (allgather)."""

    level: int
    to: int
    frm: int
    send: tuple[int, int]
    recv: tuple[int, int]
    reduce: bool


def level_pace(pace_mbps: float | Sequence[float] | None, level: int) -> float | None:
    """A call's ring pace for the flows of one level: one rate for all (a float), one per level (the
    model's, so a hybrid's ring leaves the trees their share on every link it crosses), or none."""
    if pace_mbps is None or isinstance(pace_mbps, (int, float)):
        return pace_mbps or None
    return pace_mbps[level] or None


def segments(count: int, parts: int) -> list[tuple[int, int]]:
    """Bounds of `parts` contiguous segments of `count` elements; the first count % parts are one longer."""
    base, extra = divmod(count, parts)
    bounds = [i * base + min(i, extra) for i in range(parts + 1)]
    return list(zip(bounds[:-1], bounds[1:]))


def _ring_segments(span: tuple[int, int], g: int) -> list[tuple[int, int]]:
    lo, hi = span
    return [(lo + a, lo + b) for a, b in segments(hi - lo, g)]


def schedule(layout: Layout, rank: int, count: int) -> tuple[list[Step], tuple[int, int]]:
    """Rank ``rank``'s steps for an array of ``count`` elements, and the range it owns finished after the
    reduce-scatter (its part of the allgather's first step)."""
    p = layout.order.index(rank)
    steps, spans, span, stride = [], [], (0, count), 1
    for level, g in enumerate(layout.levels):
        c = p // stride % g
        to, frm = layout.peers(rank, level)
        seg = _ring_segments(span, g)
        for s in range(g - 1):
            steps.append(Step(level, to, frm, seg[(c - s) % g], seg[(c - s - 1) % g], True))
        spans.append(span)
        span, stride = seg[(c + 1) % g], stride * g
    owned = span
    for level in reversed(range(len(layout.levels))):
        g = layout.levels[level]
        stride //= g
        c = p // stride % g
        to, frm = layout.peers(rank, level)
        seg = _ring_segments(spans[level], g)
        for s in range(g - 1):
            steps.append(Step(level, to, frm, seg[(c + 1 - s) % g], seg[(c - s) % g], False))
    return steps, owned


def reduce_sum(parts: list[np.ndarray], layout: Layout, dtype: np.dtype | type) -> np.ndarray:
    """What every rank of the ring ends with for ``parts`` (rank order, flat, all in the ring's type):
    summed in that type level by level, in each ring from the segment's first rank onwards
    (((x_j + x_{j+1}) + ...) + x_{j-1}, as the ranks add), then cast to ``dtype`` by each part's owner.
    ``parts`` are summed in place (their contents are not kept)."""
    n, count = len(parts), parts[0].size
    if n != len(layout.order):
        raise LayoutError(f"{n} parts for a ring layout of {len(layout.order)} ranks")
    spans = [(0, count)] * n  # what each position holds partial sums of
    stride = 1
    for g in layout.levels:
        for base in range(n):
            if base // stride % g:
                continue  # not the first position of its ring at this level
            ring = [base + c * stride for c in range(g)]
            span = spans[ring[0]]
            seg = _ring_segments(span, g)
            acc = _ring_add([parts[layout.order[q]][span[0]:span[1]] for q in ring],
                            [(a - span[0], b - span[0]) for a, b in seg])
            for j, (a, b) in enumerate(seg):
                owner = ring[(j - 1) % g]  # position c owns segment c + 1
                parts[layout.order[owner]][a:b] = acc[a - span[0]:b - span[0]]
                spans[owner] = (a, b)
        stride *= g
    out = np.empty(count, dtype)
    for q, (a, b) in enumerate(spans):
        out[a:b] = parts[layout.order[q]][a:b]
    return out


def _ring_add(xs: list[np.ndarray], seg: list[tuple[int, int]]) -> np.ndarray:
    """One ring's reduce-scatter: segment j summed from member j round the ring.  Two passes over
    contiguous slices, O(g) numpy calls: in the first, member r adds itself to segments 0..r-1 and
    starts segment r; in the second, member r adds itself to segments r+1.., which have had
    members j.. by then."""
    acc = np.empty_like(xs[0])
    for r, x in enumerate(xs):
        lo, hi = seg[r]
        np.add(acc[:lo], x[:lo], out=acc[:lo])
        acc[lo:hi] = x[lo:hi]
    for r, x in enumerate(xs[:-1]):
        lo = seg[r + 1][0]
        np.add(acc[lo:], x[lo:], out=acc[lo:])
    return acc


def ring_types(dtype: np.dtype | type, in_tensor_type: bool) -> tuple[np.dtype, np.dtype]:
    """What a ring sums a tensor of ``dtype`` in (the reduce-scatter's type) and what its allgather
    moves.  int32 in int64 both ways, so an overflow is seen (as the switches report it), not wrapped.
    In the tensor's own type (a ring alone, as gloo sums); else float64 partial sums cast once by their
    owner, so a hybrid's ring part keeps the switches' stated error bound (docs/hybrid.md)."""
    dtype = np.dtype(dtype)
    if dtype == np.int32:
        return np.dtype(np.int64), np.dtype(np.int64)
    if in_tensor_type or dtype == np.float64:
        return dtype, dtype
    return np.dtype(np.float64), dtype
