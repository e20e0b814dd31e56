"""The model of one allreduce call as a worker reads it from its job spec, and the method chosen per call.

NCCL picks its algorithm for each call from ``time = latency + bytes / bandwidth`` (src/graph/tuning.cc,
ncclTopoGetAlgoTime).  So does the worker, among in-network aggregation (``ina``), a host ring of each
layout the job has (``ring``), and both at once on shares of the call (``hybrid``, NTT's split).  The
controller computes the few numbers from the topology and the plan (``controller/model.py``); this
module only evaluates them.  Every rank makes the same choice for the same call: the choice is a
function of the spec, the call's size and type, and how many packets each tree sent before (a tree's
window opens by slow start over its first calls, ``worker.engine.Congestion``), all the same on every
rank.

In-network aggregation, one tree (``TreePipe``): a call of n chunks is T = n packets; the first float call
of a size is T = n + D (D = min(W, n) exponent-only packets open it), a later one of that size none (its first
window goes at the exponents the last call agreed, each later chunk's comes a window ahead: docs/protocol.md),
and the model times a later call (what training makes) unless asked for a first (``first``).  Packet q goes
once the result of packet q - W is in, so with a round trip R and the tree's bottleneck spacing f between
frames the call takes

    R + max((T - 1) f, floor((T - 1) / W) R + ((T - 1) mod W) f)

(the link's pace, or W packets per round trip, whichever is slower), after a round trip per doubling of
the window while slow start opens it.  A job's trees run at once on their shares of the chunks.  Where the
host's CPU, not the link, sets the pace, f is the host's: a host that spends c_send + c_recv of its one
CPU on each packet (sending it, receiving its result) paces a tree of share s at one packet per
(c_send + c_recv) / s, so f = max(the link's frame time, that) (``TreePipe.host_spacing``).

A ring (``RingCost``): its steps' latencies (each: the path's propagation and the host's latency) plus
what each rank sends over the rate its flows get, per byte of the array: 2(N-1)/N of it in all, the
reduce-scatter in the sums' type and the allgather in the result's (``ring_layout.ring_types``).

The hybrid: both parts at once, so the call takes the longer of the two; the share through the
switches alpha that makes them equal is, with each part as latency a + slope b per element,

    alpha = (a_ring - a_ina + b_ring E) / ((b_ina + b_ring) E)        (E elements, clipped to [0, 1])

(``equal_finish``, which splits a direct-connect plan's parts too), and a ring whose latency alone exceeds
in-network aggregation's whole call is never taken.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

from worker.engine import INITIAL_IN_FLIGHT
from worker.ring_layout import ring_types

METHODS = ("ina", "ring", "hybrid")
MODES = (*METHODS, "auto")
PURE = 0.02  # a hybrid share within this of 0 or 1 runs as the pure method: the other part would be noise


def split_chunks(shares: Sequence[float], chunks: int) -> list[int]:
    """How many of a call's chunks each tree takes, in proportion to the shares: largest remainder over
    the shares as given (normalised, so shares that sum to 1 only up to rounding still cover every
    chunk exactly once), the same on every worker."""
    if not shares:
        return []
    total = sum(shares)
    ideal = [s / total * chunks for s in shares]
    counts = [min(chunks, math.floor(x)) for x in ideal]
    by_remainder = sorted(range(len(ideal)), key=lambda i: (counts[i] - ideal[i], i))
    for k in range(chunks - sum(counts)):
        counts[by_remainder[k % len(counts)]] += 1
    while sum(counts) > chunks:  # floating point put one too many somewhere
        counts[max(range(len(counts)), key=counts.__getitem__)] -= 1
    return counts


@dataclass(frozen=True)
class TreePipe:
    """One aggregation tree as a call sees it."""

    share: float  # of the call's chunks
    round_trip: float  # seconds: a contribution to the root and its result back, queues empty, host latency in
    spacing: float  # seconds between two frames at the rate the tree gets (its bottleneck link's frame time)
    # seconds of the host's CPU between two of this tree's packets: its send and receive cost per packet over
    # the tree's share (the host's one CPU serves every tree); 0: hosts that take no time
    host_spacing: float = 0.0
    # seconds its first frame waits: a server tree's own pacer starts in debt, out of step with the others
    # (``worker.calls.pace``)
    late: float = 0.0

    @property
    def pace(self) -> float:
        """The bottleneck spacing f: the link's frame time or the host's CPU per packet, whichever is slower."""
        return max(self.spacing, self.host_spacing)

    def seconds(self, packets: int, window: int, cwnd: float) -> float:
        """``packets`` through this tree, its window of ``window`` slots, ``cwnd`` of them open at first."""
        if packets <= 0:
            return 0.0
        f, rtt = self.pace, self.round_trip
        fill = min(window, rtt / f)  # packets in flight that keep the bottleneck busy
        start, left, c = self.late, packets, max(1, math.floor(min(cwnd, window)))
        while c < fill:  # slow start: each round trip's results double what may be in flight
            if left <= c:
                return start + (left - 1) * f + rtt
            start, left, c = start + rtt, left - c, min(window, 2 * c)
        last = left - 1
        return start + max(last * f, last // window * rtt + last % window * f) + rtt


@dataclass(frozen=True)
class InaCost:
    """A job's trees, and the pace the worker keeps while they carry a call."""

    trees: tuple[TreePipe, ...]
    window: int  # slots per tree
    pace_mbps: float | None = None  # what the worker offers the switches (None: as fast as they take it)

    def packets(self, chunks: int, exact: bool, first: bool = False) -> list[int]:
        """Each tree's packets: its chunks, and a window of exponent-only packets in the first float call of a
        size (``first``; a later one sends none)."""
        return [n + (min(self.window, n) if first and not exact else 0)
                for n in split_chunks([t.share for t in self.trees], chunks)]

    def seconds(self, chunks: int, exact: bool, sent: Sequence[int] | None = None, first: bool = False) -> float:
        """``chunks`` through the trees; ``sent``: packets each tree sent before (None: their windows open);
        ``first``: the first call of its size (one window more)."""
        cwnds = [self.window] * len(self.trees) if sent is None else \
            [min(self.window, INITIAL_IN_FLIGHT + s) for s in sent]
        packets = self.packets(chunks, exact, first)
        # a first call's data packet q also waits for the result of exponent packet q - D, D = min(W, n): for a
        # tree of fewer chunks than W, a window of D
        windows = [min(self.window, n) if first and not exact else self.window
                   for n in split_chunks([t.share for t in self.trees], chunks)]
        return max((t.seconds(p, w, c) for t, p, w, c in zip(self.trees, packets, windows, cwnds)), default=0.0)

    def line(self) -> tuple[float, float]:
        """(latency, seconds per chunk) of a long later call (no exponent window) with the window open: the
        slowest tree's."""
        worst = (0.0, 0.0)
        for t in self.trees:
            per = max(t.pace, t.round_trip / self.window)
            worst = max(worst, (t.round_trip, per * t.share), key=lambda x: x[1])
        return worst


@dataclass(frozen=True)
class RingCost:
    """A host ring of one layout as a call sees it: per rank, the seconds per byte of the array it sends
    in the reduce-scatter and in the allgather, and its steps' latencies."""

    layout: str  # a ``ring_layout.Layout`` name of the spec's
    steps: int
    latency: float  # seconds: every step's latency (propagation, host, a step's header), summed
    reduce_seconds: float  # seconds per byte of the array (in the sums' type) in the reduce-scatter
    gather_seconds: float  # and per byte of the result's type in the allgather
    pace_mbps: tuple[float, ...] | None = None  # each connection's rate, per level (None: as fast as it goes)

    def __post_init__(self) -> None:
        if isinstance(self.pace_mbps, list):  # from a spec's JSON
            object.__setattr__(self, "pace_mbps", tuple(self.pace_mbps))

    def seconds(self, elements: int, wide: int, narrow: int) -> float:
        """``elements`` summed in ``wide``-byte values, gathered in ``narrow``-byte ones."""
        return self.latency + elements * (wide * self.reduce_seconds + narrow * self.gather_seconds) if elements \
            else 0.0


@dataclass(frozen=True)
class HybridCost:
    """The trees and a ring at once: each paced so the two leave each other their shares of the links."""

    ina: InaCost
    ring: RingCost


@dataclass(frozen=True)
class Choice:
    """How one call runs: its method, its share through the switches and its ring's layout."""

    method: str
    ina_share: float  # of the call's chunks through the trees (1: ina, 0: ring)
    layout: str | None  # the ring's, when a ring runs
    seconds: float  # predicted
    latency: float = 0.0  # of which what does not grow with the call's size (the rest: its bytes over a rate)
    ina_seconds: float = 0.0  # the trees' part (the two parts run at once)
    ring_seconds: float = 0.0
    ina_pace_mbps: float | None = None
    ring_pace_mbps: tuple[float, ...] | None = None  # per level of the ring's layout

    def describe(self) -> str:
        what = {"ina": "through the switches", "ring": f"round the {self.layout} ring",
                "hybrid": f"{self.ina_share:.0%} through the switches, the rest round the {self.layout} ring"}
        return f"{self.method}: {what[self.method]}, {self.seconds * 1e6:,.1f} us"


@dataclass(frozen=True)
class CallModel:
    """Everything a worker needs to choose and pace each call."""

    values: int  # per packet: a call of E elements is ceil(E / values) chunks
    ina: InaCost | None  # the trees alone (None: the job has none)
    rings: tuple[RingCost, ...]  # each layout alone
    hybrids: tuple[HybridCost, ...] = ()  # the trees beside each layout's ring

    # --- one method ---------------------------------------------------------------------------

    def ina_choice(self, elements: int, exact: bool, sent: Sequence[int] | None = None,
                   first: bool = False) -> Choice | None:
        if self.ina is None:
            return None
        chunks = -(-elements // self.values)
        t = self.ina.seconds(chunks, exact, sent, first)
        latency = max(0.0, t - chunks * self.ina.line()[1])
        return Choice("ina", 1.0, None, t, latency, ina_seconds=t, ina_pace_mbps=self.ina.pace_mbps)

    def ring_choice(self, elements: int, dtype: np.dtype | type, in_tensor_type: bool,
                    layout: str | None = None) -> Choice | None:
        wide, narrow = (d.itemsize for d in ring_types(dtype, in_tensor_type))
        options = [r for r in self.rings if layout in (None, r.layout)]
        if not options:
            return None
        best = min(options, key=lambda r: r.seconds(elements, wide, narrow))
        t = best.seconds(elements, wide, narrow)
        return Choice("ring", 0.0, best.layout, t, best.latency, ring_seconds=t, ring_pace_mbps=best.pace_mbps)

    def hybrid_choice(self, elements: int, dtype: np.dtype | type, sent: Sequence[int] | None = None,
                      layout: str | None = None, alpha: float | None = None, first: bool = False) -> Choice | None:
        """The best split beside each layout's ring (``alpha``: this share instead), the fastest of them;
        None where no hybrid can run, every ring part's latency alone exceeds the trees' whole call, or the
        trees take the whole link anyway (their part is not paced: only a share asked for runs then)."""
        exact = np.dtype(dtype) == np.int32
        wide, narrow = (d.itemsize for d in ring_types(dtype, in_tensor_type=False))
        chunks = -(-elements // self.values)
        alone = self.ina.seconds(chunks, exact, sent, first) if self.ina is not None else math.inf
        best = None
        for h in self.hybrids:
            if layout not in (None, h.ring.layout) or \
                    (alpha is None and (h.ina.pace_mbps is None or h.ring.latency >= alone)):
                continue
            share = _split(h, elements, self.values, exact, wide, narrow, sent) if alpha is None else alpha
            k = chunks if share >= 1 else round(share * chunks)
            t_ina = h.ina.seconds(k, exact, sent, first)
            t_ring = h.ring.seconds(elements - min(elements, k * self.values), wide, narrow)
            latency = max(0.0, t_ina - k * h.ina.line()[1]) if t_ina >= t_ring else h.ring.latency
            choice = Choice("hybrid", share, h.ring.layout, max(t_ina, t_ring), latency, t_ina, t_ring,
                            h.ina.pace_mbps, h.ring.pace_mbps)
            if best is None or choice.seconds < best.seconds:
                best = choice
        return best

    # --- the choice ---------------------------------------------------------------------------

    def options(self, elements: int, dtype: np.dtype | type, sent: Sequence[int] | None = None,
                in_tensor_type: bool = True, layout: str | None = None, alpha: float | None = None,
                first: bool = False) -> dict[str, Choice]:
        """Each method that can run this call, at its best (a ring alone in the tensor's type when
        ``in_tensor_type``; a hybrid's ring part always in wide partial sums; ``first``: the first call of its
        size, whose trees' part pays a window of exponent-only packets)."""
        exact = np.dtype(dtype) == np.int32
        found = {"ina": self.ina_choice(elements, exact, sent, first),
                 "ring": self.ring_choice(elements, dtype, in_tensor_type, layout),
                 "hybrid": self.hybrid_choice(elements, dtype, sent, layout, alpha, first)}
        return {m: c for m, c in found.items() if c is not None}

    def choose(self, elements: int, dtype: np.dtype | type, sent: Sequence[int] | None = None, mode: str = "auto",
               in_tensor_type: bool = True, layout: str | None = None, alpha: float | None = None,
               first: bool = False) -> Choice:
        """How this call runs: the fastest method (``mode`` auto) or the one asked for; a hybrid whose
        split comes out (nearly) whole runs as the pure method.  Workers choose as for a later call of the size
        (``first`` False); ``first`` times the first call of a size (one exponent window more)."""
        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
        options = self.options(elements, dtype, sent, in_tensor_type, layout, alpha, first)
        if mode != "auto":
            if mode not in options and mode == "hybrid" and "ina" in options and self.hybrids:
                return options["ina"]  # every ring part's latency exceeds the trees' whole call
            if mode not in options:
                raise ValueError(f"mode {mode}: this job cannot run it (it has {', '.join(options) or 'nothing'})")
            chosen = options[mode]
        else:
            chosen = min(options.values(), key=lambda c: c.seconds)
        if chosen.method == "hybrid" and alpha is None:
            if chosen.ina_share >= 1 - PURE and "ina" in options:
                chosen = options["ina"]
            elif chosen.ina_share <= PURE and "ring" in options:
                chosen = options["ring"]
        if mode == "auto" and chosen.method == "ring" and sent is not None:
            return self._opening(chosen, elements, dtype, sent, in_tensor_type, layout, first) or chosen
        return chosen

    def as_first(self, choice: Choice, elements: int, dtype: np.dtype | type, sent: Sequence[int] | None = None,
                 in_tensor_type: bool = True) -> Choice:
        """``choice`` (a worker's, made for a later call of its size) timed as the first call of its size: the
        same method and split, its trees' part one window of exponent-only packets longer."""
        if choice.ina_share <= 0 or np.dtype(dtype) == np.int32:
            return choice
        alpha = None if choice.method == "ina" else choice.ina_share
        return self.choose(elements, dtype, sent, choice.method, in_tensor_type, choice.layout, alpha, first=True)

    def _opening(self, ring: Choice, elements: int, dtype: np.dtype | type, sent: Sequence[int],
                 in_tensor_type: bool, layout: str | None, first: bool = False) -> Choice | None:
        """The choice is greedy: a ring chosen because the trees' windows are still closed would be chosen
        again on every later call of the size, since only the trees' own packets open them.  Where the trees
        with open windows would beat the ring, run instead the hybrid whose trees carry the most chunks that,
        window opening, finish within the ring's time (its ring part too): no slower now, and a job that
        repeats the size opens the windows in a call or a few instead of never."""
        opened = self.options(elements, dtype, None, in_tensor_type, layout)
        if min(c.seconds for c in opened.values()) >= ring.seconds:
            return None
        exact = np.dtype(dtype) == np.int32
        wide, narrow = (d.itemsize for d in ring_types(dtype, in_tensor_type=False))
        chunks = -(-elements // self.values)
        best = None
        for h in self.hybrids:
            if h.ina.pace_mbps is None or layout not in (None, h.ring.layout):  # (unpaced trees: only when asked)
                continue
            lo, hi = 0, chunks  # the most chunks the trees carry within the ring's time (their time grows with k)
            while lo < hi:
                mid = (lo + hi + 1) // 2
                lo, hi = (mid, hi) if h.ina.seconds(mid, exact, sent, first) <= ring.seconds else (lo, mid - 1)
            t_ina = h.ina.seconds(lo, exact, sent, first)
            t_ring = h.ring.seconds(elements - min(elements, lo * self.values), wide, narrow)
            if lo == 0 or t_ring > ring.seconds or (best is not None and lo <= best.ina_share * chunks):
                continue
            best = Choice("hybrid", lo / chunks, h.ring.layout, max(t_ina, t_ring), h.ring.latency, t_ina, t_ring,
                          h.ina.pace_mbps, h.ring.pace_mbps)
        return best

    def crossovers(self, dtype: np.dtype | type, sent: Sequence[int] | None = None, mode: str = "auto",
                   in_tensor_type: bool = True, layout: str | None = None, alpha: float | None = None,
                   smallest: int = 1 << 8, largest: int = 1 << 32) -> list[tuple[int, str, str]]:
        """The call sizes (bytes) where the choice changes, from ``smallest`` to ``largest``: (bytes, the
        method below, the method from there on), found by bisection between powers of two."""
        itemsize = np.dtype(dtype).itemsize

        def pick(nbytes: int) -> str:
            c = self.choose(max(1, nbytes // itemsize), dtype, sent, mode, in_tensor_type, layout, alpha)
            return c.method if c.method != "ring" else f"ring ({c.layout})"

        found, size, before = [], smallest, pick(smallest)
        while size < largest:
            nxt = size * 2
            after = pick(nxt)
            if after != before:
                lo, hi = size, nxt
                while hi - lo > max(itemsize, lo // 1000):
                    mid = (lo + hi) // 2
                    lo, hi = (mid, hi) if pick(mid) == before else (lo, mid)
                found.append((hi, before, pick(hi)))
            size, before = nxt, after
        return found

    # --- the spec -----------------------------------------------------------------------------

    def to_dict(self) -> dict:
        """As a spec carries it; a tree's ``host_spacing`` only where hosts cost time (so a spec of hosts that
        take none reads as before, to workers that do not know the field too)."""
        data = asdict(self)
        for ina in [data["ina"], *(h["ina"] for h in data["hybrids"])]:
            for tree in ina["trees"] if ina is not None else ():
                if not tree["host_spacing"]:
                    del tree["host_spacing"]
        return data

    @classmethod
    def from_dict(cls, data: dict) -> CallModel:
        def ina(d: dict | None) -> InaCost | None:
            return None if d is None else InaCost(tuple(TreePipe(**t) for t in d["trees"]), d["window"],
                                                   d.get("pace_mbps"))

        return cls(data["values"], ina(data.get("ina")), tuple(RingCost(**r) for r in data.get("rings", ())),
                   tuple(HybridCost(ina(h["ina"]), RingCost(**h["ring"])) for h in data.get("hybrids", ())))


def equal_finish(lines: Sequence[tuple[float, float]], amount: float) -> list[float]:
    """The shares of ``amount`` that end every part at once, each part a line (latency a, seconds b > 0 per
    unit): T = (amount + sum a/b) / sum 1/b over the parts that run, and a part whose latency alone is T or
    more gets none (the rest are shared again).  For two parts the first's share is the hybrid's alpha,
    (a_2 - a_1 + b_2 E) / ((b_1 + b_2) E) clipped to [0, 1]; ``controller.model.part_shares`` splits a
    direct-connect plan's parts by it."""
    active = sorted(range(len(lines)), key=lambda i: lines[i][0])
    t = 0.0
    while active:
        rate = sum(1 / lines[i][1] for i in active)
        t = (amount + sum(lines[i][0] / lines[i][1] for i in active)) / rate
        if all(lines[i][0] < t for i in active):
            break
        active.pop()
    return [(t - a) / b / amount if i in active else 0.0 for i, (a, b) in enumerate(lines)]


def _split(h: HybridCost, elements: int, values: int, exact: bool, wide: int, narrow: int,
           sent: Sequence[int] | None) -> float:
    """The share through the switches that makes both parts take as long (each part as a line)."""
    a_ina, per_chunk = h.ina.line()
    if sent is not None:  # the window still opening adds its round trips to the trees' latency
        big = 1 << 20
        a_ina = max(a_ina, h.ina.seconds(big, exact, sent) - big * per_chunk)
    b_ring = wide * h.ring.reduce_seconds + narrow * h.ring.gather_seconds
    return equal_finish([(a_ina, per_chunk / values), (h.ring.latency, b_ring)], elements)[0]
