"""A tensor-parallel step's time, predicted from the schedule it runs.

A step is compute on the training thread, interleaved with allreduces that are started and
later waited for.  ``Recorder`` wraps a comm and notes when each allreduce is started and when
its wait is called (with ``NoComm`` inside, a step's compute alone: measured once).  ``predict``
then walks those events with each allreduce taking the time the one model gives it
(``worker/tuner.py``'s ``CallModel``: latency + bytes / rate), on one queue in the order they were
started, as the worker's one I/O thread runs them (``worker/api.py``), or with no queue for a
network that runs them side by side: a wait stalls the compute until its call is done.  Where
the rank has no core to spare, a call running behind the compute also takes CPU from it
(``call_cpu``: the CPU a call costs, spread over its time): the compute it overlaps stretches.  The
synchronous schedule's prediction is the same walk over its own events (each wait right after
its start), so the hidden share (T_sync - T_domino) / (T_sync - T_no_comm) comes out of two walks.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from .comm import Handle, TPComm


@dataclass(frozen=True)
class Event:
    """An allreduce started (with its element count) or waited for, at ``t`` seconds."""

    t: float
    kind: str  # "start" or "wait"
    call: int  # the allreduce's number in the step
    elements: int = 0


@dataclass(frozen=True)
class Call:
    """One allreduce of a recorded step, for a timeline: started, finished on the network (None if its
    handle has no future to say so), and the training thread's wait from its call to its return."""

    call: int
    elements: int
    start: float
    done: float | None
    wait_called: float
    wait_returned: float


@dataclass
class Recorder:
    """A comm that notes the time of every start and wait of the comm it wraps, and, where the handle
    has a torch future (gloo's, the ina backend's), when each call finished: from the thread that
    finished it, so a call done behind the compute is seen done then, not at its wait."""

    comm: TPComm
    clock: Callable[[], float] = time.perf_counter
    events: list[Event] = field(default_factory=list)
    done: dict[int, float] = field(default_factory=dict)
    wait_called: dict[int, float] = field(default_factory=dict)
    with_future: set[int] = field(default_factory=set)  # the calls whose handles have a future

    def clear(self) -> None:
        """Forget the step (a new ``done``: a late callback of the last step writes to the old one)."""
        self.events.clear()
        self.done = {}
        self.wait_called.clear()
        self.with_future.clear()

    def calls(self) -> list[Call]:
        """The step's allreduces, in the order they were started (each waited for).  A future's callbacks
        run after its waiters wake, so one may not have run yet: the call was done when its wait returned."""
        waits = {e.call: e.t for e in self.events if e.kind == "wait"}

        def done(call: int) -> float | None:
            return min(self.done.get(call, math.inf), waits[call]) if call in self.with_future else None

        return [Call(e.call, e.elements, e.t, done(e.call), self.wait_called[e.call], waits[e.call])
                for e in self.events if e.kind == "start"]

    @property
    def size(self) -> int:
        return self.comm.size

    @property
    def rank(self) -> int:
        return self.comm.rank

    def allreduce_async(self, tensor: torch.Tensor) -> Handle:
        call = sum(e.kind == "start" for e in self.events)
        self.events.append(Event(self.clock(), "start", call, tensor.numel()))
        handle = self.comm.allreduce_async(tensor)
        future = getattr(handle, "get_future", None)
        if future is not None:
            self.with_future.add(call)
            done = self.done
            future().add_done_callback(lambda _: done.setdefault(call, self.clock()))
        return _Noted(handle, self, call)

    def allgather_ints(self, values: list[int]) -> list[list[int]]:
        return self.comm.allgather_ints(values)


@dataclass
class _Noted:
    handle: Handle
    recorder: Recorder
    call: int

    def wait(self) -> object:
        self.recorder.wait_called[self.call] = self.recorder.clock()
        out = self.handle.wait()
        self.recorder.events.append(Event(self.recorder.clock(), "wait", self.call))
        return out


@dataclass(frozen=True)
class StepPrediction:
    seconds: float  # the step
    compute: float  # the compute in it (the recorded step's time between its events)
    comm: float  # the allreduces' own time, summed
    exposed: float  # the time the compute waited for them
    contention: float = 0.0  # compute time lost to the calls' CPU while they ran behind it

    @property
    def hidden(self) -> float:
        """The share of the allreduces' time the compute did not wait for."""
        return 1.0 - self.exposed / self.comm if self.comm else 1.0


def predict(events: list[Event], end: float, call_seconds: Callable[[int], float], queued: bool = True,
            start: float | None = None, call_cpu: Callable[[int], float] | None = None) -> StepPrediction:
    """The step ``events`` came from (it began at ``start``, the first event if None, and ended at
    ``end``), its allreduces taking ``call_seconds(elements)`` each; ``queued``: one after another;
    ``call_cpu(elements)``: the CPU each takes from the compute it runs behind (None: nothing)."""
    last = events[0].t if start is None else start
    now = comm = exposed = lost = 0.0
    free = 0.0  # when the queue is next idle
    finish: dict[int, float] = {}
    running: list[tuple[float, float, float]] = []  # (begin, finish, CPU share) of each call
    for e in [*events, Event(end, "end", -1)]:
        gap = max(0.0, e.t - last)
        stolen = sum(share * max(0.0, min(f, now + gap) - max(b, now)) for b, f, share in running)
        now += gap + stolen
        lost += stolen
        last = e.t
        if e.kind == "start":
            took = call_seconds(e.elements)
            begin = max(now, free) if queued else now
            finish[e.call] = free = begin + took
            comm += took
            if call_cpu is not None and took > 0:
                running.append((begin, finish[e.call], min(1.0, call_cpu(e.elements) / took)))
        elif e.kind == "wait" and finish[e.call] > now:
            exposed += finish[e.call] - now
            now = finish[e.call]
    return StepPrediction(now, now - exposed - lost, comm, exposed, lost)
