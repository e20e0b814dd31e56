"""Virtual time: one heap of timed callbacks, run in (time, order of scheduling) order.

Nothing in a simulated run reads the machine's clock; two runs that schedule the same things
run the same way, so a run is replayed exactly from its seed.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable
from typing import Any


class EventLoop:
    def __init__(self) -> None:
        self.now = 0.0
        self._heap: list[tuple[float, int, Callable[..., Any], tuple]] = []
        self._order = itertools.count()
        self.events = 0  # callbacks run
        self.stopped = False  # set by a callback: ``run`` returns after it

    def clock(self) -> float:
        return self.now

    def at(self, when: float, callback: Callable[..., Any], *args: Any) -> None:
        """Run ``callback(*args)`` at virtual time ``when`` (not before now)."""
        heapq.heappush(self._heap, (max(when, self.now), next(self._order), callback, args))

    def after(self, delay: float, callback: Callable[..., Any], *args: Any) -> None:
        self.at(self.now + delay, callback, *args)

    def run(self, until: float) -> None:
        """Run callbacks in order until virtual time ``until``, the heap is empty, or one of them
        sets ``stopped``."""
        heap, pop = self._heap, heapq.heappop
        self.stopped = False
        while heap and heap[0][0] <= until:
            when, _, callback, args = pop(heap)
            self.now = when
            self.events += 1
            callback(*args)
            if self.stopped:
                return
        if heap:  # what is left comes later
            self.now = until
