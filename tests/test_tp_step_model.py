"""worker/tp/step_model.py: a TP step's time from its recorded events and the calls' times."""

from __future__ import annotations

import itertools

import pytest
import torch

from worker.tp.comm import NoComm
from worker.tp.step_model import Event, Recorder, predict


def test_a_blocking_call_is_all_exposed():
    # compute 1 s, an allreduce started and waited at once, compute 2 s more
    events = [Event(1.0, "start", 0, 100), Event(1.0, "wait", 0)]
    p = predict(events, end=3.0, call_seconds=lambda n: 0.5, start=0.0)
    assert (p.seconds, p.compute, p.comm, p.exposed, p.hidden) == (3.5, 3.0, 0.5, 0.5, 0.0)


@pytest.mark.parametrize("took, seconds, exposed", [(1.5, 4.0, 0.0), (3.0, 5.0, 1.0)])
def test_a_call_hides_behind_the_compute_before_its_wait(took, seconds, exposed):
    events = [Event(1.0, "start", 0, 100), Event(3.0, "wait", 0)]  # 2 s of compute between
    p = predict(events, end=4.0, call_seconds=lambda n: took, start=0.0)
    assert (p.seconds, p.exposed) == (seconds, exposed)


def test_one_queue_runs_the_calls_one_after_another():
    # two calls started together, each 1 s; waited 1.5 s later: the second finishes at 2 s
    events = [Event(0.0, "start", 0, 10), Event(0.0, "start", 1, 10), Event(1.5, "wait", 0), Event(1.5, "wait", 1)]
    queued = predict(events, end=1.5, call_seconds=lambda n: 1.0)
    side_by_side = predict(events, end=1.5, call_seconds=lambda n: 1.0, queued=False)
    assert (queued.seconds, queued.exposed) == (2.0, 0.5)
    assert (side_by_side.seconds, side_by_side.exposed) == (1.5, 0.0)


def test_the_call_time_comes_from_the_elements():
    events = [Event(0.0, "start", 0, 1000), Event(0.0, "wait", 0), Event(0.0, "start", 1, 10), Event(0.0, "wait", 1)]
    p = predict(events, end=0.0, call_seconds=lambda n: 1e-3 * n)
    assert p.comm == pytest.approx(1.01)


def test_the_recorder_notes_starts_and_waits_in_order():
    ticks = itertools.count()
    rec = Recorder(NoComm(2, 1), clock=lambda: float(next(ticks)))
    a, b = rec.allreduce_async(torch.zeros(3)), rec.allreduce_async(torch.zeros(5))
    b.wait()
    a.wait()
    assert [(e.t, e.kind, e.call, e.elements) for e in rec.events] == [
        (0.0, "start", 0, 3), (1.0, "start", 1, 5), (3.0, "wait", 1, 0), (5.0, "wait", 0, 0)]  # 2, 4: waits called
    assert (rec.size, rec.rank) == (2, 1)


def test_a_call_behind_the_compute_takes_its_cpu_from_it():
    # a 2 s call using 1 s of CPU, behind 2 s of compute: the compute loses 1 s (half of the 2 s overlap)
    events = [Event(0.0, "start", 0, 10), Event(2.0, "wait", 0)]
    free_core = predict(events, end=2.0, call_seconds=lambda n: 2.0, start=0.0)
    shared = predict(events, end=2.0, call_seconds=lambda n: 2.0, start=0.0, call_cpu=lambda n: 1.0)
    assert (free_core.seconds, free_core.contention) == (2.0, 0.0)
    assert (shared.seconds, shared.contention, shared.exposed, shared.compute) == (3.0, 1.0, 0.0, 2.0)
    # a blocking call overlaps no compute: nothing is taken
    blocking = [Event(0.0, "start", 0, 10), Event(0.0, "wait", 0)]
    assert predict(blocking, end=2.0, call_seconds=lambda n: 2.0, call_cpu=lambda n: 1.0).contention == 0.0


class _Pending:
    """A handle whose call finishes when the test says (a torch future, as gloo's and the ina backend's)."""

    def __init__(self) -> None:
        self.future = torch.futures.Future()

    def get_future(self) -> torch.futures.Future:
        return self.future

    def wait(self) -> None:
        self.future.wait()


class _PendingComm(NoComm):
    def __init__(self) -> None:
        super().__init__(2, 0)
        self.handles: list[_Pending] = []

    def allreduce_async(self, tensor: torch.Tensor) -> _Pending:
        self.handles.append(_Pending())
        return self.handles[-1]


def test_the_recorder_sees_a_call_finish_behind_the_compute():
    ticks = itertools.count()
    comm = _PendingComm()
    rec = Recorder(comm, clock=lambda: float(next(ticks)))
    a = rec.allreduce_async(torch.zeros(4))  # t 0
    comm.handles[0].future.set_result(None)  # done at t 1, before anyone waits
    a.wait()  # called at t 2, returned at t 3
    b = rec.allreduce_async(torch.zeros(2))  # t 4
    waiter = b.wait
    comm.handles[1].future.set_result(None)  # t 5
    waiter()  # t 6, 7
    assert [(c.call, c.elements, c.start, c.done, c.wait_called, c.wait_returned) for c in rec.calls()] == [
        (0, 4, 0.0, 1.0, 2.0, 3.0), (1, 2, 4.0, 5.0, 6.0, 7.0)]
    rec.clear()
    assert rec.calls() == [] and rec.done == {}


def test_a_late_callback_does_not_land_in_the_next_step():
    comm = _PendingComm()
    rec = Recorder(comm, clock=lambda: 9.0)
    rec.allreduce_async(torch.zeros(1))
    rec.clear()  # the step is over before its call's future said so
    comm.handles[0].future.set_result(None)
    assert rec.done == {}


class _WokenEarly(_Pending):
    """A handle whose wait returns before its future's callbacks have run (torch wakes waiters first)."""

    def wait(self) -> None:
        return None


def test_a_call_whose_callback_has_not_run_was_done_when_its_wait_returned():
    ticks = itertools.count()
    comm = _PendingComm()
    comm.allreduce_async = lambda tensor: comm.handles.append(_WokenEarly()) or comm.handles[-1]
    rec = Recorder(comm, clock=lambda: float(next(ticks)))
    rec.allreduce_async(torch.zeros(3)).wait()  # start 0, wait called 1, returned 2; no callback yet
    (call,) = rec.calls()
    assert (call.start, call.done, call.wait_called, call.wait_returned) == (0.0, 2.0, 1.0, 2.0)
    assert Recorder(NoComm(2, 0)).calls() == []
    no_future = Recorder(NoComm(2, 0), clock=lambda: 0.0)
    no_future.allreduce_async(torch.zeros(1)).wait()
    assert no_future.calls()[0].done is None  # a handle without a future: when it finished is not known
