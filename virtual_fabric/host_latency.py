"""A simulated host's latency: a frame (a result, or a ring's segment) reaches the worker's loop
``HOST_LATENCY`` after its last bit arrives (the NIC, the kernel, a syscall), and the loop takes what has
reached it when it next looks, every ``POLL`` at most: so a stream of results costs a turn per POLL, not
per frame.  On average a frame waits ``MEAN``, the host latency the controller's model is given."""

from __future__ import annotations

import math

from controller.model import DEFAULT_HOST_LATENCY

HOST_LATENCY = DEFAULT_HOST_LATENCY  # seconds from the wire to the loop
POLL = 1e-6  # seconds between two looks of the loop
MEAN = HOST_LATENCY + POLL / 2  # what a frame waits on average, wire to loop


def reaches_loop(when: float) -> float:
    """The loop's first look at or after ``when`` (never before it: a frame is not taken early)."""
    return max(when, math.ceil(when / POLL) * POLL)
