"""The hybrid split: how much of each allreduce goes through the switches, how much through a host ring.

Pure functions of a job's capacities (docs/hybrid.md derives them).  In-network aggregation
puts ``f`` wire bytes on each host link per tensor byte (headers: about 1.06 at V = 256) but
runs no faster than the aggregation capacity C; a hybrid's ring puts ``r = 3(N-1)/N`` times a
float32 tensor (float64 partial sums in the reduce-scatter, so its part keeps the switches'
error bound; float32 in the allgather; plus TCP headers) on every host link, and takes whatever
link rate L is left.  A ring alone sums in the tensor's own type, as gloo and NCCL do, and puts
``2(N-1)/N`` on each link (``ring_sum="float64"``: 3(N-1)/N there too).  Run
both at once on shares alpha and 1 - alpha of the data, and the time per tensor byte is

    T(alpha) = max( (alpha f + (1 - alpha) r) / L ,  alpha f / C )

(the host link carries both parts; the switches carry the INA part).  The first term falls
with alpha when f < r (three workers or more), the second rises, so the best alpha makes
them equal:

    alpha* = C r / (f (L - C) + C r)      for C < L,   alpha* = 1 for C >= L.

With two workers a ring moves no more bytes than the switches (r <= f), so any known C makes
the pure ring at least as fast.

alpha = 1 is pure INA (time f / min(L, C)), alpha = 0 the pure ring (r0 / L, r0 = 2(N-1)/N).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from controller.plan import Plan, nodes
from controller.topology import Topology

ETH_IP_TCP = 14 + 20 + 32  # a ring segment's headers (TCP with timestamps, as Linux sends)
TCP_MSS = 1448  # 1500-byte MTU less IPv4, TCP and its timestamp option
MODES = ("ina", "ring", "hybrid", "auto")
PURE = 0.02  # a split within this of 0 or 1 is run as the pure method: the other part would be noise


class SplitError(ValueError):
    """A split that cannot be made."""


def ring_tensors(ring_sum: str, alone: bool) -> int:
    """Float32 tensors' worth of bytes a ring moves per (N-1)/N: 2 summing in the tensor's type (a ring
    alone, ``ring_sum`` native), 3 with float64 partial sums (a hybrid's ring part, or ``ring_sum`` float64)."""
    return 2 if alone and ring_sum == "native" else 3


@dataclass(frozen=True)
class Capacity:
    """What bounds a job's allreduce, per worker and each way (Mb/s on the wire)."""

    workers: int
    link_mbps: float  # L: the slowest member's host link
    ina_mbps: float  # C: what the aggregation trees take from each worker (math.inf: no limit known)
    ina_wire: float  # f: wire bytes per tensor byte through the switches
    why: str = ""  # where C comes from
    ring_mbps: float | None = None  # what a ring alone gets of each link, if measured (TCP leaves some idle)
    ring_sum: str = "native"  # a ring alone sums in the tensor's type; "float64": wide partial sums as a hybrid's

    @property
    def ring_wire(self) -> float:
        """r: wire bytes per tensor byte a hybrid's ring puts on each host link (each way), for float32
        gradients: the reduce-scatter moves float64 partial sums ((N-1)/N x 2), the allgather float32."""
        return self._ring_wire(ring_tensors(self.ring_sum, alone=False))

    @property
    def ring_alone_wire(self) -> float:
        """r0: the same for a ring alone: 2(N-1)/N in the tensor's own type (3(N-1)/N with float64 sums)."""
        return self._ring_wire(ring_tensors(self.ring_sum, alone=True))

    def _ring_wire(self, tensors: int) -> float:
        n = self.workers
        wire = tensors * (n - 1) / n * (ETH_IP_TCP + TCP_MSS) / TCP_MSS if n > 1 else 0.0
        if self.ring_mbps:  # a ring that keeps the link only partly busy costs more of it per byte
            wire *= self.link_mbps / min(self.ring_mbps, self.link_mbps)
        return wire

    def seconds_per_mb(self, alpha: float) -> float:
        """Predicted time to allreduce 1 MB (10^6 bytes) with ``alpha`` of it through the switches."""
        check_alpha(alpha)
        ring = self.ring_alone_wire if alpha == 0 else self.ring_wire
        links = (alpha * self.ina_wire + (1 - alpha) * ring) * 8 / self.link_mbps
        switches = alpha * self.ina_wire * 8 / self.ina_mbps if alpha and self.ina_mbps < math.inf else 0.0
        return max(links, switches)

    def best_alpha(self) -> float:
        """The share through the switches at which both parts finish together."""
        C, L, f, r = self.ina_mbps, self.link_mbps, self.ina_wire, self.ring_wire
        if r == 0:  # one worker: nothing to send either way
            return 1.0
        if f >= r:  # two workers: the ring's bytes cost no more than the switches', and it has no C
            return 0.0 if C < math.inf else 1.0
        if C >= L:
            return 1.0
        return C * r / (f * (L - C) + C * r)


@dataclass(frozen=True)
class Split:
    mode: str  # "ina", "ring" or "hybrid": what runs
    alpha: float  # share of every allreduce through the switches
    seconds_per_mb: dict[str, float]  # predicted for "ina", "ring", "hybrid" (at the best alpha)
    capacity: Capacity
    why: str

    @property
    def pace_mbps(self) -> float | None:
        """What each worker may offer the switches: C, when C is known and below the link rate."""
        C = self.capacity.ina_mbps
        return C if self.alpha > 0 and C < self.capacity.link_mbps else None

    @property
    def ring_pace_mbps(self) -> float | None:
        """What a hybrid's ring may send on each link: what the switches' part leaves, L - C.  Unpaced, TCP
        fills the queues on the links (in front of the switch's results too), the switches' packets wait
        seconds there, and their slot window, which needs round trips, starves."""
        if self.mode != "hybrid" or self.pace_mbps is None:
            return None
        c = self.capacity  # a ring keeps only ring_mbps / L of a link busy: its wire rate on the rest is less
        return (c.link_mbps - self.pace_mbps) * min(1.0, (c.ring_mbps or c.link_mbps) / c.link_mbps)

    def to_dict(self) -> dict:
        c = self.capacity
        return {"mode": self.mode, "alpha": self.alpha, "seconds_per_mb": self.seconds_per_mb, "why": self.why,
                "link_mbps": c.link_mbps, "ina_mbps": None if c.ina_mbps == math.inf else c.ina_mbps,
                "ina_wire": c.ina_wire, "ring_wire": c.ring_wire, "ring_alone_wire": c.ring_alone_wire,
                "pace_mbps": self.pace_mbps,
                "ring_pace_mbps": self.ring_pace_mbps}


def aggregation_limit(topology: Topology, plan: Plan, frame_bytes: int) -> tuple[float, str]:
    """C from the switches' declared aggregation rates (``agg_pps``: contributions summed per second).

    A switch with c children in a tree sums c contributions per slot; with the job's slots
    spread over its trees by their shares, switch s allows S <= agg_pps / sum_t(share_t c_st)
    slots per second, and each worker sends one frame per slot.  math.inf where no switch of
    the job declares a rate.
    """
    best, why = math.inf, ""
    children: dict[str, float] = {}
    for p in plan.trees:
        for node in nodes(topology, plan.members, p.tree).values():
            children[node.switch] = children.get(node.switch, 0.0) + p.share * len(node.children)
    for switch, load in sorted(children.items()):
        rate = topology.switches[switch].agg_pps
        if rate is not None and rate / load * frame_bytes * 8 / 1e6 < best:
            best = rate / load * frame_bytes * 8 / 1e6
            why = f"{switch} sums {rate:g} contributions/s"
    return best, why


def check_alpha(alpha: float) -> None:
    if isinstance(alpha, bool) or not isinstance(alpha, int | float) or not 0 <= alpha <= 1:
        raise SplitError(f"the share through the switches (alpha) must be within [0, 1], not {alpha!r}")


def choose(capacity: Capacity, mode: str = "auto", alpha: float | None = None,
           measured: dict[str, float] | None = None) -> Split:
    """The split a job runs: ``mode`` ina/ring/hybrid/auto (auto: the fastest the model predicts, unless
    ``measured`` seconds per MB show the model's pick slower than a method measured beside it);
    ``alpha`` overrides the model's share for hybrid."""
    if mode not in MODES:
        raise SplitError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
    if alpha is not None:
        check_alpha(alpha)
        if mode != "hybrid":
            raise SplitError(f"alpha is the hybrid mode's split; mode {mode} fixes its own")
    best = capacity.best_alpha()
    times = {"ina": capacity.seconds_per_mb(1.0), "ring": capacity.seconds_per_mb(0.0),
             "hybrid": capacity.seconds_per_mb(best)}
    C, L = capacity.ina_mbps, capacity.link_mbps
    limit = f"C = {C:g} Mb/s ({capacity.why})" if C < math.inf else "no aggregation limit known"
    if mode == "auto":
        if best >= 1 - PURE:
            mode, why = "ina", f"{limit} >= or near L = {L:g} Mb/s: the links are the limit, all through the switches"
        elif best <= PURE:
            mode, why = "ring", f"{limit} is far below L = {L:g} Mb/s: the switches would add next to nothing"
        else:
            mode, why = "hybrid", (f"{limit} < L = {L:g} Mb/s: {best:.0%} through the switches keeps them full, "
                                   f"the ring takes the rest of the link")
        # A known C that leaves the ring alone faster (by more than noise); with no C known, the links
        # are the limit and the switches take it all, as before (N = 2: the bytes are nearly equal)
        if C < math.inf and mode != "ring" and times["ring"] < times[mode] * (1 - PURE):
            mode, why = "ring", (f"{limit}, L = {L:g} Mb/s: a ring alone, summing in the tensor's own type "
                                 f"({capacity.ring_alone_wire:.2f} bytes per byte), beats {mode}")
        mode, why = _measured_pick(mode, why, measured or {})
    else:
        why = f"mode {mode} asked for; {limit}, L = {L:g} Mb/s"
    share = {"ina": 1.0, "ring": 0.0, "hybrid": best if alpha is None else alpha}[mode]
    if mode == "hybrid":
        times["hybrid"] = capacity.seconds_per_mb(share)
    return Split(mode, share, times, capacity, why)


def _measured_pick(mode: str, why: str, measured: dict[str, float]) -> tuple[str, str]:
    """The model's pick, unless a burst measured it slower than another method.  The model takes C as
    measured alone; on a software switch the ring's packets queue in front of the switches' and
    stretch a small window's round trip, so a hybrid can lose what the model gives it."""
    if mode not in measured:
        return mode, why
    fastest = min(measured, key=measured.__getitem__)
    if measured[fastest] < measured[mode]:
        return fastest, (f"measured {fastest} {measured[fastest]:.3g} s/MB < {mode} {measured[mode]:.3g} s/MB "
                         f"(the model's pick: {why})")
    return mode, f"{why}; measured {mode} {measured[mode]:.3g} s/MB, the fastest"
