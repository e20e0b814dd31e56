"""A campaign's invariants, checked as the run goes: a broken one stops the run at the virtual
time it broke (``EventLoop.fail``), so the report says when, and the state at that moment is
what a replay stops at.

- each call's sums, as each worker completes it: within the switches' stated bound of the exact
  sum (a ring alone in the tensor's type: float summation's bound), and the same bits as the
  first worker's that completed it;
- liveness, every ``every`` virtual seconds: no living worker is in a call without progress
  (a result, or the call's start) for longer than its timeout and a margin, without an error;
- each failure, as the worker raises it: a clear error (``CLEAR``), and a timeout raised within
  its timeout (and the margin) of the call's last progress.

What can only be judged at the end (that nothing hangs, that failures were allowed: a worker
may die after another's call failed, the switches' registers) stays in
``virtual_fabric.campaign.check``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from virtual_fabric.fabric import Fabric, Job
from virtual_fabric.hosts import SimWorker
from worker import quantize
from worker.ring import summation_bound

CLEAR = ("AllreduceTimeout", "AllreduceError", "SwitchOverflowError")  # what a failed call may raise
MARGIN = 0.1  # virtual seconds past a timeout a worker may take to raise it (its engine looks every 0.05 s)
EVERY = 0.1  # virtual seconds between two liveness checks


class Monitor:
    """Watches one job's workers: their sums as they come, and their progress."""

    def __init__(self, fabric: Fabric, job: Job, arrays: Sequence[Sequence[np.ndarray]], timeout: float,
                 every: float = EVERY) -> None:
        self.fabric, self.job, self.arrays, self.timeout = fabric, job, arrays, timeout
        self._bounds: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # call: (exact, bound)
        self._first: dict[int, tuple[int, bytes]] = {}  # call: (rank, its sums' bytes)
        for w in job.workers:
            w.hand_over = self.result
            w.on_done = self._done_then(w, w.on_done)
        fabric.loop.check_every(every, self.liveness)

    def result(self, rank: int, call: int, sums: np.ndarray) -> None:
        """A worker completed a call: its record keeps the sums; a wrong one stops the run now."""
        self.job.workers[rank].records[call].result = sums
        self.fabric.loop.fail(self.check_result(rank, call, sums))

    def _done_then(self, w: SimWorker, done: Callable[[], None]) -> Callable[[], None]:
        def check_then_done() -> None:
            self.fabric.loop.fail(self.check_failure(w))
            done()
        return check_then_done

    def check_failure(self, w: SimWorker) -> str | None:
        """A worker is done: if its last call failed, it failed clearly and in time."""
        r = w.records[-1] if w.records else None
        if r is None or r.error is None or r.error == "killed":
            return None
        call = len(w.records) - 1
        if not r.error.startswith(CLEAR):
            return f"call {call}: rank {w.rank} failed unclearly: {r.error}"
        if r.error.startswith("AllreduceTimeout") and r.last_progress is not None \
                and r.ended - r.last_progress > self.timeout + MARGIN:
            return (f"call {call}: rank {w.rank} timed out {r.ended - r.last_progress:.3f} s after its last "
                    f"progress (timeout {self.timeout} s)")
        return None

    def check_result(self, rank: int, call: int, sums: np.ndarray) -> str | None:
        exact, bound = self._bound(call, rank)
        err = np.abs(sums.astype(np.float64).reshape(-1) - exact)
        if not (err <= bound).all():
            i = int(np.argmax(err - bound))
            return f"call {call}: rank {rank}'s sum is off by {err[i]:.3g} at {i} (bound {bound[i]:.3g})"
        first = self._first.setdefault(call, (rank, sums.tobytes()))
        if first[1] != sums.tobytes():
            return f"call {call}: rank {rank}'s sum differs from rank {first[0]}'s"
        return None

    def _bound(self, call: int, rank: int) -> tuple[np.ndarray, np.ndarray]:
        if call not in self._bounds:
            inputs = [a[call] for a in self.arrays]
            dtype = inputs[0].dtype
            exact = np.sum([a.astype(np.float64).reshape(-1) for a in inputs], axis=0)
            choice = self.job.workers[rank].records[call].choice
            ring_alone = choice is not None and choice.method == "ring" and self.job.spec.ring_sum == "native"
            if dtype == np.int32:
                bound = np.zeros_like(exact)
            else:
                bound = (summation_bound(inputs) if ring_alone else
                         quantize.elementwise_bound(inputs, self.job.spec.values)).reshape(-1)
                bound = bound + np.abs(exact) * float(np.finfo(dtype).eps)
            self._bounds[call] = exact, bound
        return self._bounds[call]

    def liveness(self) -> str | None:
        now = self.fabric.loop.now
        for w in self.job.workers:
            record = w.current
            if not w.alive or record is None or record.ended is not None:
                continue
            progress = max([record.started] + [c.last_progress for c in w.calls if c.last_progress is not None])
            if now - progress > self.timeout + MARGIN:
                return (f"rank {w.rank} has waited in call {len(w.records) - 1} for {now - progress:.3f} s "
                        f"without progress or an error (timeout {self.timeout} s)")
        return None
