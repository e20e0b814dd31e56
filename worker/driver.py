"""The protocol core (``worker.engine``) on real UDP sockets: the loop a ``Worker``'s I/O thread runs.

Each tree has a non-blocking socket wrapped in a ``BatchSocket`` (GSO sends, ``recvmmsg``); the
loop hands what arrives to the calls, lets ``engine.step`` send and name its next deadline,
and waits in ``select`` until then, for results, or for a full send buffer to drain.  Only
this module reads the clock and touches the sockets.
"""

from __future__ import annotations

import select
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from worker import native
from worker.batch_io import BatchSocket
from worker.engine import Outbox, Tree, TreeCall, fail, step
from worker.errors import AllreduceError

MAX_WAIT = 0.1  # seconds in one select: a stop request is seen within this
# results gather behind a standing queue for this share of its wait, if that is at least GATHER_MIN (a nap
# shorter than a timer's slack gathers nothing), at most GATHER_MAX (``gather_time``; run.c's are the same)
GATHER_SHARE, GATHER_MIN, GATHER_MAX = 0.125, 50e-6, 1e-3
# A tree is stalled (its worker tells the service, which probes its switches) once a call on it has had no result
# for STALL_RTOS of its retransmission timeouts with packets in flight: one timeout is a loss the timer resends,
# several in a row, each resend unanswered, a path that is gone.  STALL_FLOOR keeps a datacenter's microsecond
# timers from reporting a scheduling hiccup (a descheduled thread, a page fault storm) as a failure; STALL_MAX
# keeps a slow path's report well before the controller's DEAD_AFTER (3 s), which it is there to beat.
STALL_RTOS = 4
STALL_FLOOR = 0.02
STALL_MAX = 1.0


class Sender:
    """The trees' sockets, and the datagrams a socket's full send buffer held back (sent first, once it
    drains: the core counted them as sent at the step that let them go)."""

    def __init__(self, sockets: dict[Tree, BatchSocket]) -> None:
        self.sockets = sockets
        self.pending: dict[Tree, np.ndarray] = {}

    def send(self, out: Outbox) -> None:
        for t in dict.fromkeys(t for t, _ in out.datagrams):
            rows = out.rows(t)
            self.pending[t] = np.concatenate([self.pending[t], rows]) if t in self.pending else rows
        self.flush()

    def flush(self) -> None:
        for t, rows in list(self.pending.items()):
            went = self.sockets[t].send(np.ascontiguousarray(rows))
            if went == len(rows):
                del self.pending[t]
            else:
                self.pending[t] = rows[went:].copy()  # the core's buffers move on

    @property
    def blocked(self) -> list[Tree]:
        return list(self.pending)


def run_calls(calls: list[TreeCall], sockets: dict[Tree, BatchSocket], stop: threading.Event | None = None,
              idle: tuple[Tree, ...] = (), before_step: Callable[[], None] | None = None,
              helpers: ThreadPoolExecutor | None = None) -> None:
    """Drive one allreduce's TreeCalls (one per tree) to completion in one loop.

    Any failure marks every tree broken (the workers' packet sequences no longer agree) and is
    raised at once; the other calls are abandoned, so no partial result is ever returned.
    ``stop`` set from elsewhere (the ring part of a hybrid call failed) ends the loop the same way.
    ``before_step`` runs on this thread before each turn (the worker applies job spec changes
    there, so only this thread writes a tree's state).  Calls of the native core run in its own loop,
    in C (``worker.native.run_calls``), the trees shared out among this thread and the ``helpers``.
    """
    if calls and isinstance(calls[0], native.NativeCall):
        native.run_calls(calls, sockets, stop, idle, before_step, MAX_WAIT, helpers)
        return
    sender = Sender(sockets)
    try:
        while active := [c for c in calls if not c.complete]:
            if stop is not None and stop.is_set():
                raise AllreduceError("stopped: another part of this allreduce failed")
            if before_step is not None:
                before_step()
            sender.flush()
            out = step(calls, idle, time.monotonic())
            sender.send(out)
            if not sender.blocked and gathered(active, sockets, out.wake):
                continue
            trees = [c.tree for c in active]
            readable = select.select([sockets[t].sock for t in trees], [sockets[t].sock for t in sender.blocked],
                                     [], min(max(0.0, out.wake - time.monotonic()), MAX_WAIT))[0]
            for t in trees:
                t.stats.polls += 1
            for c in active:
                if sockets[c.tree].sock in readable:
                    receive(c, sockets[c.tree])
        sender.flush()  # what the last step let go
    except BaseException:
        fail(calls)
        raise
    finally:
        for c in calls:
            c.tree.stats.syscalls = sockets[c.tree].syscalls


def gather_time(calls: list[TreeCall]) -> float:
    """How long results may gather before the loop takes them: an eighth of the standing queue's wait (srtt
    less the least round trip), the least over the calls.  Behind a slow link's queue (Mininet's 50 Mbit/s
    holds a 64-slot window about 10 ms) results trickle in one at a time, and a wake per result (a context
    switch, a poll, a receive and a send) was most of a training step's CPU; the queue keeps the link busy
    through the nap.  Where no queue stands (a datacenter path) there is none.  run.c does the same."""
    d = GATHER_MAX
    for c in calls:
        congestion = c.tree.congestion
        if congestion.srtt is None:
            return 0.0
        d = min(d, GATHER_SHARE * (congestion.srtt - congestion.rtt_min))
    return d if d >= GATHER_MIN else 0.0


def gathered(calls: list[TreeCall], sockets: dict[Tree, BatchSocket], wake: float) -> bool:
    """Nap while results gather (``gather_time``), if nothing is due before; True if results came."""
    gather = gather_time(calls)
    if not gather or wake - time.monotonic() <= gather:
        return False
    time.sleep(gather)
    for c in calls:
        c.tree.stats.polls += 1
    before = sum(c.finished for c in calls)
    for c in calls:
        receive(c, sockets[c.tree])
    return sum(c.finished for c in calls) > before


def stall_after(tree: Tree) -> float:
    """Seconds without a result, packets in flight, after which the tree counts as stalled."""
    return min(STALL_MAX, max(STALL_FLOOR, STALL_RTOS * tree.congestion.rto()))


def stalled(calls: list[TreeCall]) -> frozenset[int]:
    """The job ids of the calls' trees that are stalled now (the cheap test first: most turns see none)."""
    now = time.monotonic()
    return frozenset(c.tree.config.job_id for c in calls
                     if c.stalled(now, STALL_FLOOR) and c.stalled(now, stall_after(c.tree)))


def receive(call: TreeCall, io: BatchSocket) -> None:
    """Every datagram waiting on the call's socket, a batch at a time."""
    while True:
        rows, lengths = io.receive()
        call.receive(rows, lengths, time.monotonic())
        if not len(rows):
            return


def tend_idle(trees: list[Tree], sockets: dict[Tree, BatchSocket]) -> None:
    """Between calls: recoveries and echoes the trees owe (a call's own loop does the same).  What a full
    send buffer holds back is lost: the recovery goes again at the next look, the echo later."""
    if trees and isinstance(trees[0], native.NativeTree):
        native.tend_idle(trees, sockets)
        return
    live = tuple(t for t in trees if not t.broken)
    out = step([], live, time.monotonic())
    for t in live:
        sockets[t].send(np.ascontiguousarray(out.rows(t)))
        t.stats.syscalls = sockets[t].syscalls
