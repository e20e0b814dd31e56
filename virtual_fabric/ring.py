"""A job's host ring (``worker.ring``) on the flow-level network (``virtual_fabric.flows``), in any of the
job's layouts (``worker.ring_layout``).

In step s every rank sends its part (``ring_layout.schedule``: a segment of the call's ring part) to its
peer of that step, as one flow along the topology's routes (as the switches forward), capped at the
call's ring pace (its level's); a rank starts step s+1 when its own send of step s has left and its peer's part of
step s has arrived (the flow's end plus the path's propagation delay, then the host's latency to the
loop, ``host_latency``): per rank, as ``RingWorker._exchange`` waits for both, not a global barrier.
Every step's message carries the ring's header (``worker.ring.HEADER``); on the wire each byte is its
TCP segments' (``controller.rings.TCP_WIRE``).

Bytes are the worker's: the ring's part in the sums' type in the reduce-scatter, and in the result's
type in the allgather (``ring_layout.ring_types``).  The sums are not sent anywhere:
``ring_layout.reduce_sum`` computes what every rank of ``RingWorker`` ends with, adding in the order the
ranks add (tests/test_fabric_ring.py checks it against a real ring on loopback, bit for bit).
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from controller.rings import TCP_WIRE
from virtual_fabric.events import EventLoop
from virtual_fabric.flows import Flow, FlowNetwork
from virtual_fabric.host_latency import reaches_loop
from virtual_fabric.links import Channel
from worker.ring import HEADER
from worker.ring_layout import Layout, Step, level_pace, reduce_sum, schedule

Paths = Callable[[int, int], list[Channel]]  # (from rank, to rank) -> the link directions between their hosts


@dataclass(eq=False)
class _Call:
    """One allreduce's ring part, across the ranks (they may be at different steps, or calls)."""

    index: int
    layout: Layout
    dtype: np.dtype  # what every rank ends with (the allgather's type)
    pace: float | tuple[float, ...] | None  # Mb/s per flow, or per level of the layout (``ring_layout.level_pace``)
    data: dict[int, np.ndarray] = field(default_factory=dict)  # rank: its part, in the sums' type
    steps: dict[int, list[Step]] = field(default_factory=dict)
    step: dict[int, int] = field(default_factory=dict)  # rank: the step it is in
    step_started: dict[int, float] = field(default_factory=dict)
    sent: dict[int, int] = field(default_factory=dict)  # rank: steps whose send has left
    arrived: dict[int, set[int]] = field(default_factory=dict)  # rank: steps whose part has come (in any order)
    flows: dict[int, Flow] = field(default_factory=dict)  # rank: its send in flight
    on_done: dict[int, Callable] = field(default_factory=dict)
    finished: set[int] = field(default_factory=set)
    result: np.ndarray | None = None


class Ring:
    """One job's ring over ``n`` ranks."""

    def __init__(self, loop: EventLoop, net: FlowNetwork, n: int, paths: Paths, host_latency: float) -> None:
        self.loop, self.net, self.n = loop, net, n
        self.paths, self.host_latency = paths, host_latency
        self.calls: dict[int, _Call] = {}
        self.broken: str | None = None
        self.step_times: list[float] = []  # every rank's every step, seconds
        self.steps_taken: Counter[tuple[int, int]] = Counter()  # (call, rank): steps it went through, one after another
        self.layouts: Counter[str] = Counter()  # calls per layout
        self.wire_bytes = 0.0  # sent by all ranks

    def start(self, rank: int, index: int, data: np.ndarray, dtype: np.dtype, layout: Layout,
              pace_mbps: float | tuple[float, ...] | None,
              on_done: Callable[[np.ndarray | None, str | None], None]) -> None:
        """Rank ``rank``'s ring part of its call ``index``: ``data`` in the sums' type, the result in
        ``dtype`` (as the worker's ring returns it), on ``layout`` at ``pace_mbps`` per flow or per level (every rank
        of a call gives the same).  ``on_done(result, None)`` or ``(None, error)``, always from an event
        of its own."""
        if self.broken is not None:
            self.loop.at(self.loop.now, on_done, None, self.broken)
            return
        call = self.calls.get(index)
        if call is None:
            call = self.calls[index] = _Call(index, layout, np.dtype(dtype), pace_mbps)
            self.layouts[layout.name] += 1
        call.data[rank] = data
        call.on_done[rank] = on_done
        call.steps[rank] = schedule(layout, rank, data.size)[0]
        call.sent[rank] = 0
        call.arrived.setdefault(rank, set())
        if not call.steps[rank]:
            self._finish(call, rank)
            return
        call.step[rank] = 0
        self._send(call, rank)

    def abort(self, rank: int, why: str) -> None:
        """Rank ``rank`` failed or died: its connections close, its peers see it at once and close
        theirs, and every rank's unfinished ring part fails (as ``RingWorker._fail`` spreads it)."""
        if self.broken is not None:
            return
        self.broken = f"ring: rank {rank} closed the connection ({why})"
        for call in self.calls.values():
            for flow in call.flows.values():
                self.net.cancel(flow)
            call.flows.clear()
            for r, done in call.on_done.items():
                if r != rank and r not in call.finished:
                    call.finished.add(r)
                    self.loop.at(self.loop.now, done, None, self.broken)
        self.calls.clear()

    # --- inside --------------------------------------------------------------------------------

    def _send(self, call: _Call, rank: int) -> None:
        s = call.step[rank]
        step = call.steps[rank][s]
        call.step_started[rank] = self.loop.now
        lo, hi = step.send
        itemsize = call.data[rank].itemsize if step.reduce else call.dtype.itemsize
        wire = ((hi - lo) * itemsize + HEADER.size) * TCP_WIRE
        self.wire_bytes += wire
        path = self.paths(rank, step.to)
        pace = level_pace(call.pace, step.level)
        call.flows[rank] = self.net.start(path, wire, pace * 1e6 if pace else None,
                                          lambda flow: self._sent(call, rank, s, step.to, flow))

    def _sent(self, call: _Call, rank: int, s: int, to: int, flow: Flow) -> None:
        call.flows.pop(rank, None)
        call.sent[rank] = s + 1
        self.loop.at(reaches_loop(self.loop.now + flow.latency + self.host_latency), self._arrived, call, to, s)
        self._advance(call, rank)

    def _arrived(self, call: _Call, rank: int, s: int) -> None:
        if self.broken is not None:
            return
        call.arrived.setdefault(rank, set()).add(s)
        self._advance(call, rank)

    def _advance(self, call: _Call, rank: int) -> None:
        s = call.step.get(rank)
        if s is None or rank in call.finished:
            return  # not in this call yet: what arrived waits for it
        if call.sent[rank] > s and s in call.arrived[rank]:
            self.step_times.append(self.loop.now - call.step_started[rank])
            self.steps_taken[call.index, rank] += 1
            if s + 1 == len(call.steps[rank]):
                self._finish(call, rank)
            else:
                call.step[rank] = s + 1
                self._send(call, rank)

    def _finish(self, call: _Call, rank: int) -> None:
        if call.result is None:  # every rank has given its part by now: its last step needs them all
            call.result = reduce_sum([call.data[r] for r in range(self.n)], call.layout, call.dtype)
            call.data.clear()
        call.finished.add(rank)
        self.loop.at(self.loop.now, call.on_done[rank], call.result, None)
        if len(call.finished) == self.n:
            del self.calls[call.index]

    def summary(self) -> str:
        mean = statistics.fmean(self.step_times) if self.step_times else 0.0
        used = ", ".join(f"{name} x{count}" for name, count in sorted(self.layouts.items()))
        return (f"ring: flow level, {self.n} ranks, layouts {used or 'none'}, mean step time {mean * 1e6:.3f} us, "
                f"{self.wire_bytes / 1e6:.3f} MB on the wire")
