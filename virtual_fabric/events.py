"""Virtual time: one heap of timed callbacks, run in (time, order of scheduling) order.

Nothing in a simulated run reads the machine's clock; two runs that schedule the same things
run the same way, so a run is replayed exactly from its seed.  A scheduled callback can be
cancelled through the handle ``at`` returns (a timer that is no longer needed, a fault generator
stopped), and a generator can run as a process that sleeps between its steps (``spawn``).
Checks (``check_every``) run between callbacks and stop the run at the first one that fails, so
a broken invariant is reported at the virtual time it broke, not when the run ends.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Generator
from typing import Any


class Handle:
    """A scheduled callback; ``cancel()`` keeps it from running (a no-op once it ran)."""

    __slots__ = ("callback", "args", "when")

    def __init__(self, when: float, callback: Callable[..., Any] | None, args: tuple) -> None:
        self.when, self.callback, self.args = when, callback, args

    @property
    def pending(self) -> bool:
        return self.callback is not None

    def cancel(self) -> None:
        self.callback, self.args = None, ()


class Process:
    """A generator driven by the loop: each value it yields is the virtual seconds to sleep before
    its next step.  ``cancel()`` stops it (its pending step never runs)."""

    def __init__(self, loop: EventLoop, steps: Generator[float, None, None]) -> None:
        self.loop, self.steps, self.handle, self.finished = loop, steps, None, False
        self._step()

    def _step(self) -> None:
        try:
            delay = next(self.steps)
        except StopIteration:
            self.finished = True
            return
        self.handle = self.loop.after(delay, self._step)

    def cancel(self) -> None:
        if self.handle is not None:
            self.handle.cancel()
        self.finished = True


class EventLoop:
    def __init__(self) -> None:
        self.now = 0.0
        self._heap: list[tuple[float, int, Handle]] = []
        self._order = itertools.count()
        self.events = 0  # callbacks run
        self.stopped = False  # set by a callback: ``run`` returns after it
        self.violation: tuple[float, str] | None = None  # the first failed check: (virtual time, what)

    def clock(self) -> float:
        return self.now

    def at(self, when: float, callback: Callable[..., Any], *args: Any) -> Handle:
        """Run ``callback(*args)`` at virtual time ``when`` (not before now)."""
        handle = Handle(max(when, self.now), callback, args)
        heapq.heappush(self._heap, (handle.when, next(self._order), handle))
        return handle

    def after(self, delay: float, callback: Callable[..., Any], *args: Any) -> Handle:
        return self.at(self.now + delay, callback, *args)

    def timer(self, delay: float, callback: Callable[[], Any]) -> Handle:
        """A one-shot timer in virtual time, as the real target's ``threading.Timer`` (started)."""
        return self.after(delay, callback)

    def spawn(self, steps: Generator[float, None, None]) -> Process:
        return Process(self, steps)

    def check_every(self, period: float, check: Callable[[], str | None]) -> Handle:
        """Run ``check`` every ``period`` virtual seconds, between callbacks; the first message it
        returns stops the run and stays in ``violation`` with its time."""
        def tick() -> None:
            self.fail(check())
            if self.violation is None:
                self.after(period, tick)
        return self.after(period, tick)

    def fail(self, what: str | None) -> None:
        """An invariant broke now (``what`` None: it held): the run stops here."""
        if what is not None and self.violation is None:
            self.violation = (self.now, what)
            self.stopped = True

    def run(self, until: float) -> None:
        """Run callbacks in order until virtual time ``until``, the heap is empty, or one of them
        sets ``stopped``."""
        heap, pop = self._heap, heapq.heappop
        self.stopped = False
        while heap and heap[0][0] <= until:
            when, _, handle = pop(heap)
            callback = handle.callback
            if callback is None:  # cancelled
                continue
            handle.callback = None  # it ran: cancelling it now does nothing
            self.now = when
            self.events += 1
            callback(*handle.args)
            if self.stopped:
                return
        if heap:  # what is left comes later
            self.now = until
