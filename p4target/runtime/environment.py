"""What a switch reads from outside its packets and its control plane: the time (the meters'
clock, digest lists' timestamps), timers (digest batching and acknowledgement timeouts) and
randomness (v1model's ``random``).

The real target takes the machine's: ``time.monotonic``, threads, an unseeded generator.  A
simulated fabric gives its virtual clock, timers on its event loop and a generator seeded from
the run's seed, so a switch does nothing a run's seed does not decide.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol


class Cancellable(Protocol):
    def cancel(self) -> None: ...


def thread_timer(delay: float, callback: Callable[[], None]) -> Cancellable:
    """A started daemon ``threading.Timer``: the real target's timers."""
    t = threading.Timer(delay, callback)
    t.daemon = True
    t.start()
    return t


@dataclass(frozen=True)
class Environment:
    clock: Callable[[], float] = time.monotonic  # seconds
    timer: Callable[[float, Callable[[], None]], Cancellable] = thread_timer  # (delay in s, callback): started
    rng: random.Random | None = None  # None: each pipeline its own unseeded one


MACHINE = Environment()
