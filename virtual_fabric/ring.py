"""A job's host ring (``worker.ring``) on the flow-level network (``virtual_fabric.flows``).

N ranks in rank order, 2(N-1) steps: N-1 of reduce-scatter, then N-1 of allgather.  In step s
every rank sends one segment (``worker.ring.segments`` of the ring's part, one flow to its
successor along the topology's shortest path, capped at the spec's ``ring_pace_mbps``); a rank
starts step s+1 when its own send of step s has left and its predecessor's segment of step s
has arrived (the flow's end plus the path's propagation delay and the host's latency, the same
20 us a result frame takes to reach a worker's loop): per rank, as ``_exchange``
waits for both, not a global barrier.  The first step also carries the call's 24-byte header.

Bytes are the worker's: the ring's part in ``ring_dtype`` (as ``Worker._ring_dtype``: the
tensor's own type for a ring alone, float64 partial sums for a hybrid's part or
``ring_sum="float64"``, int64 for int32) in the reduce-scatter, and in the allgather the same,
or the tensor's type where the worker casts each finished segment once (``allreduce_cast``).
On the wire each segment is its TCP segments' bytes (``flows.TCP_WIRE``).

The sums are not sent anywhere: ``ring_sum`` computes what every rank of ``RingWorker`` ends
with, with numpy in the ring's own order (segment j: rank j's, plus rank j+1's, ... plus rank
j-1's, each addition in the ring's type; cast once where the worker casts).  ``worker.ring``
has no pure summation helper to share, so ``tests/test_fabric_ring.py`` checks this against a
real ``RingWorker`` ring on loopback, bit for bit.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from virtual_fabric.events import EventLoop
from virtual_fabric.flows import TCP_WIRE, Flow, FlowNetwork
from virtual_fabric.links import Channel
from worker.jobspec import JobSpec
from worker.ring import segments

HOST_LATENCY = 20e-6  # a frame's way from the wire to a worker's loop (interrupt moderation, a syscall)
RING_HEADER = 24  # worker.ring's per-call header (magic, call number, element count, dtype), first step only


def ring_dtype(spec: JobSpec, dtype: np.dtype) -> np.dtype:
    """What the worker's ring sums in (``Worker._ring_dtype``)."""
    dtype = np.dtype(dtype)
    if dtype == np.int32:
        return np.dtype(np.int64)
    return dtype if spec.ring_in_tensor_type or dtype == np.float64 else np.dtype(np.float64)


def ring_sum(parts: list[np.ndarray], dtype: np.dtype) -> np.ndarray:
    """What every rank's ``RingWorker`` ends with for ``parts`` (rank order, all in the ring's type):
    ``allreduce_`` when ``dtype`` is the parts' type (or they are int64), else ``allreduce_cast`` to
    ``dtype``.  Segment j is summed from rank j round the ring: ((x_j + x_{j+1}) + ...) + x_{j-1}.

    Two passes over contiguous slices, O(N) numpy calls: in the first, rank r adds itself to the
    segments 0..r-1 and starts segment r; in the second, rank r adds itself to segments r+1..N-1,
    which have had ranks j..N-1 by then."""
    n, wide = len(parts), parts[0].dtype
    count = parts[0].size
    bounds = segments(count, n)
    acc = np.empty(count, wide)
    for r, x in enumerate(parts):
        lo, hi = bounds[r]
        np.add(acc[:lo], x[:lo], out=acc[:lo])
        acc[lo:hi] = x[lo:hi]
    for r, x in enumerate(parts[:-1]):
        lo = bounds[r + 1][0]
        np.add(acc[lo:], x[lo:], out=acc[lo:])
    as_is = wide == np.dtype(dtype) or wide == np.dtype(np.int64)
    return acc if as_is else acc.astype(dtype)


@dataclass(eq=False)
class _Call:
    """One allreduce's ring part, across the ranks (they may be at different steps, or calls)."""

    index: int
    n: int
    data: dict[int, np.ndarray] = field(default_factory=dict)
    dtype: np.dtype | None = None
    wide: int = 0  # bytes per element in the reduce-scatter
    narrow: int = 0  # and in the allgather
    bounds: list[tuple[int, int]] = field(default_factory=list)
    step: dict[int, int] = field(default_factory=dict)  # rank: the step it is in
    step_started: dict[int, float] = field(default_factory=dict)
    sent: dict[int, int] = field(default_factory=dict)  # rank: steps whose send has left
    received: dict[int, int] = field(default_factory=dict)  # rank: steps whose segment has arrived
    flows: dict[int, Flow] = field(default_factory=dict)  # rank: its send in flight
    on_done: dict[int, Callable] = field(default_factory=dict)
    finished: set[int] = field(default_factory=set)
    result: np.ndarray | None = None


class Ring:
    """One job's ring: ``paths[r]`` leads from rank r's host to rank r+1's."""

    def __init__(self, loop: EventLoop, net: FlowNetwork, spec: JobSpec, paths: list[list[Channel]],
                 host_latency: float = HOST_LATENCY) -> None:
        self.loop, self.net, self.spec, self.paths = loop, net, spec, paths
        self.n = len(spec.members)
        # a segment reaches the next rank's loop after the path's propagation and the host's own way
        # from the wire to the loop, as a result frame reaches a worker's (``SimWorker.rx_delay``)
        self.latency = [sum(c.delay for c in p) + host_latency for p in paths]
        self.cap = spec.ring_pace_mbps * 1e6 if spec.ring_pace_mbps else None
        self.calls: dict[int, _Call] = {}
        self.broken: str | None = None
        self.step_times: list[float] = []  # every rank's every step, seconds
        self.wire_bytes = 0.0  # sent by all ranks

    @property
    def steps(self) -> int:
        return 2 * (self.n - 1)

    def start(self, rank: int, index: int, data: np.ndarray, dtype: np.dtype,
              on_done: Callable[[np.ndarray | None, str | None], None]) -> None:
        """Rank ``rank``'s ring part of its call ``index``: ``data`` in the ring's type, the result in
        ``dtype``'s (as the worker's ring returns it).  ``on_done(result, None)`` or ``(None, error)``,
        always from an event of its own."""
        if self.broken is not None:
            self.loop.at(self.loop.now, on_done, None, self.broken)
            return
        call = self.calls.get(index)
        if call is None:
            wide = np.dtype(data.dtype)
            narrow = wide if wide in (np.dtype(dtype), np.dtype(np.int64)) else np.dtype(dtype)
            call = self.calls[index] = _Call(index, self.n, dtype=np.dtype(dtype), wide=wide.itemsize,
                                             narrow=narrow.itemsize, bounds=segments(data.size, self.n),
                                             sent=dict.fromkeys(range(self.n), 0),
                                             received=dict.fromkeys(range(self.n), 0))
        call.data[rank] = data
        call.on_done[rank] = on_done
        if self.n == 1:
            self._finish(call, rank)
            return
        call.step[rank] = 0
        self._send(call, rank)

    def abort(self, rank: int, why: str) -> None:
        """Rank ``rank`` failed or died: its connections close, its neighbours see it at once and close
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

    def _payload(self, call: _Call, rank: int, step: int) -> int:
        n = self.n
        if step < n - 1:
            lo, hi = call.bounds[(rank - step) % n]
            return (hi - lo) * call.wide + (RING_HEADER if step == 0 else 0)
        lo, hi = call.bounds[(rank + 1 - (step - n + 1)) % n]
        return (hi - lo) * call.narrow

    def _send(self, call: _Call, rank: int) -> None:
        step = call.step[rank]
        call.step_started[rank] = self.loop.now
        wire = self._payload(call, rank, step) * TCP_WIRE
        self.wire_bytes += wire
        call.flows[rank] = self.net.start(self.paths[rank], wire, self.cap,
                                          lambda _flow: self._sent(call, rank, step))

    def _sent(self, call: _Call, rank: int, step: int) -> None:
        call.flows.pop(rank, None)
        call.sent[rank] = step + 1
        self.loop.at(self.loop.now + self.latency[rank], self._arrived, call, (rank + 1) % self.n, step)
        self._advance(call, rank)

    def _arrived(self, call: _Call, rank: int, step: int) -> None:
        if self.broken is not None:
            return
        call.received[rank] = step + 1
        self._advance(call, rank)

    def _advance(self, call: _Call, rank: int) -> None:
        step = call.step.get(rank)
        if step is None or rank in call.finished:
            return  # not in this call yet: what arrived waits for it
        if call.sent[rank] > step and call.received[rank] > step:
            self.step_times.append(self.loop.now - call.step_started[rank])
            if step + 1 == self.steps:
                self._finish(call, rank)
            else:
                call.step[rank] = step + 1
                self._send(call, rank)

    def _finish(self, call: _Call, rank: int) -> None:
        if call.result is None:  # every rank has given its part by now: rank r's last step needs them all
            call.result = ring_sum([call.data[r] for r in range(self.n)], call.dtype)
        call.finished.add(rank)
        self.loop.at(self.loop.now, call.on_done[rank], call.result, None)
        if len(call.finished) == self.n:
            del self.calls[call.index]

    def summary(self) -> str:
        mean = statistics.fmean(self.step_times) if self.step_times else 0.0
        return (f"ring: flow level, {self.n} ranks, {self.steps} steps per call, mean step time {mean * 1e6:.3f} us, "
                f"{self.wire_bytes / 1e6:.3f} MB on the wire" + (f", paced at {self.cap / 1e6:g} Mb/s" if self.cap
                                                                  else ""))
