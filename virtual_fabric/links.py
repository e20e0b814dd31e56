"""A link direction: a rate, a propagation delay, a byte-limited FIFO, and faults on command.

A frame offered while the queue holds ``queue_bytes`` or more is dropped at the tail, as a
switch's egress buffer or a host's qdisc drops it.  Otherwise it leaves when the frames before
it have (``busy_until``) and arrives ``delay`` after its last bit.  Loss, duplication and
reordering are drawn per frame from the run's one random generator; a link that is down
drops what is offered and what arrives.  Loss may also come in bursts: a ``Burst`` (a
Gilbert-Elliott chain, ``virtual_fabric.faults``) decides each frame's fate from the link's state.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from virtual_fabric.events import EventLoop


class Burst(Protocol):
    def lost(self, rng: random.Random) -> bool:
        """Whether this frame is lost (the model moves its state as it decides)."""


@dataclass
class Faults:
    loss: float = 0.0  # probability per frame
    duplication: float = 0.0
    reorder: float = 0.0  # probability that a frame is held back by up to reorder_delay
    reorder_delay: float = 0.0  # seconds: how late a held-back frame (or a duplicate) may come
    up: bool = True
    burst: Burst | None = None  # loss in bursts, on top of ``loss``


@dataclass
class LinkStats:
    frames: int = 0  # delivered (a duplicate counts twice)
    bytes: int = 0
    busy: float = 0.0  # seconds spent sending (at the link's own rate; flows count their share of it)
    flow_busy: float = 0.0  # of which flows (``virtual_fabric.flows``): their rate / the link's, over time
    queued: float = 0.0  # seconds frames waited behind others, summed over frames
    dropped_queue: int = 0
    dropped_fault: int = 0  # lost, or the link was down
    duplicated: int = 0
    reordered: int = 0


@dataclass(eq=False)
class Channel:
    """One direction of a link, from ``name``'s sender to ``deliver``."""

    loop: EventLoop
    name: str
    rate: float  # bits per second
    delay: float  # seconds
    queue_bytes: int
    rng: random.Random
    deliver: Callable[[bytes], None]
    faults: Faults = field(default_factory=Faults)
    stats: LinkStats = field(default_factory=LinkStats)
    busy_until: float = 0.0  # when the last bit of the frames taken so far has left
    line_rate: float | None = None  # the link's own rate, once flows (``virtual_fabric.flows``) take part of ``rate``

    def backlog(self, now: float) -> float:
        """Bytes waiting or being sent at ``now``: a FIFO drains at its rate, so this is what is left of
        ``busy_until`` (a frame counts as it leaves, bit by bit)."""
        return max(0.0, self.busy_until - now) * self.rate / 8

    def room(self, now: float) -> int:
        return int(self.queue_bytes - self.backlog(now))

    def busy_by(self, now: float) -> float:
        """Seconds spent sending by ``now``: ``stats.busy`` counts a frame as it is queued, so frames still
        queued at the end of a run (a call's last copies) are taken off (a link was once shown 105% busy)."""
        left = max(0.0, self.busy_until - now) * self.rate / (self.line_rate or self.rate)
        return max(0.0, self.stats.busy - left)

    def next_departure(self) -> float:
        """When there is room for another full-size frame (or now)."""
        return max(self.loop.now, self.busy_until - (self.queue_bytes - 1600) * 8 / self.rate)

    def send(self, frame: bytes) -> bool:
        """Offer a frame; False if it was dropped (queue full, link down, or lost)."""
        now, size, faults = self.loop.now, len(frame), self.faults
        if not faults.up:
            self.stats.dropped_fault += 1
            return False
        start = max(now, self.busy_until)
        if (start - now) * self.rate / 8 + size > self.queue_bytes:
            self.stats.dropped_queue += 1
            return False
        serialize = size * 8 / self.rate
        self.busy_until = end = start + serialize
        self.stats.busy += size * 8 / (self.line_rate or self.rate)  # the share of the link it took
        self.stats.queued += start - now
        if faults.loss and self.rng.random() < faults.loss or faults.burst is not None and faults.burst.lost(self.rng):
            self.stats.dropped_fault += 1
            return False
        arrival = end + self.delay
        if faults.reorder and self.rng.random() < faults.reorder:
            arrival += self.rng.random() * faults.reorder_delay
            self.stats.reordered += 1
        self.loop.at(arrival, self._arrive, frame)
        if faults.duplication and self.rng.random() < faults.duplication:  # the copy may come much later
            self.stats.duplicated += 1
            self.loop.at(arrival + serialize + self.rng.random() * faults.reorder_delay, self._arrive, frame)
        return True

    def _arrive(self, frame: bytes) -> None:
        if not self.faults.up:
            self.stats.dropped_fault += 1
            return
        self.stats.frames += 1
        self.stats.bytes += len(frame)
        self.deliver(frame)
