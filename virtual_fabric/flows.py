"""A flow-level network on the fabric's links: bulk transfers (a host ring's TCP segments) as fluid
flows with max-min fair rates, beside the packet traffic the links serialise one frame at a time.

Sans-I/O: no clock and no sockets; a flow's completion is an event of the fabric's ``EventLoop``.

What is modelled:

- a flow has a path (the link directions it crosses, ``route``: ``Topology.route``, as the switches
  forward), a number of wire bytes, and an optional rate cap (bits/s: a paced socket's
  ``SO_MAX_PACING_RATE``);
- rates are max-min fair over every link direction's capacity (``controller.fair_share``, as the
  model computes them), computed again, for the flows that share a link with it (directly or
  through others), whenever a flow starts or ends; flows that start or end at the same virtual
  time are settled once;
- packets on a link direction that flows use get what the flows leave: ``Channel.rate`` is
  lowered by the flows' total rate on it (never below ``FLOOR`` of the link's rate, so a frame is
  never held forever) and restored when they leave;
- the link's ``stats.busy`` counts the flows' share of the link (``flow rate / link rate`` over
  time, ``stats.flow_busy`` that part alone), so a report's utilisation covers both.

What is not: TCP's slow start and congestion window (a flow starts at its fair rate), its ACKs
(no bytes on the reverse direction), loss and retransmission (a flow on a down or lossy link goes
on), queueing of flows in front of packets (packets see a slower link, not a queue of segments),
and propagation inside a flow: whoever uses ``Flow.latency`` (the ring) adds the path's
propagation delay once per transfer.  A bulk transfer's wire bytes are its TCP segments'
(``controller.rings.TCP_WIRE``), counted by whoever starts it.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass, field

from controller.fair_share import max_min_rates
from controller.model import FLOOR
from controller.topology import Topology
from virtual_fabric.events import EventLoop
from virtual_fabric.links import Channel


@dataclass(eq=False)
class Flow:
    path: tuple[Channel, ...]
    remaining: float  # wire bytes not yet sent, as of ``since``
    cap: float | None  # bits/s
    on_done: Callable[[Flow], None]
    started: float
    id: int
    rate: float = 0.0  # bits/s, as last allocated
    since: float = 0.0
    token: int = 0  # of the completion event that counts
    done: bool = False

    @property
    def latency(self) -> float:
        """The path's propagation delay."""
        return sum(c.delay for c in self.path)


@dataclass
class _Link:
    base: float  # the channel's own rate, bits/s
    flows: dict[Flow, None] = field(default_factory=dict)  # in start order: allocations are deterministic
    allocated: float = 0.0  # bits/s
    since: float = 0.0


class FlowNetwork:
    def __init__(self, loop: EventLoop, floor: float = FLOOR) -> None:
        self.loop, self.floor = loop, floor
        self._links: dict[Channel, _Link] = {}
        self._dirty: dict[Channel, None] = {}
        self._settling = False
        self._ids = itertools.count()
        self.flows = 0  # started so far
        self.reallocations = 0

    # --- what callers use ----------------------------------------------------------------------

    def start(self, path: list[Channel] | tuple[Channel, ...], wire_bytes: float, cap: float | None,
              on_done: Callable[[Flow], None]) -> Flow:
        """A flow of ``wire_bytes`` along ``path`` (at most ``cap`` bits/s); ``on_done(flow)`` when its
        last byte has left the sender at its allocated rates (add ``flow.latency`` for its arrival)."""
        if not path:
            raise ValueError("a flow needs a path of at least one link direction")
        now = self.loop.now
        flow = Flow(tuple(path), max(0.0, float(wire_bytes)), cap, on_done, now, next(self._ids), since=now)
        self.flows += 1
        for ch in flow.path:
            link = self._links.get(ch)
            if link is None:
                link = self._links[ch] = _Link(ch.rate, since=now)
                ch.line_rate = ch.rate
            link.flows[flow] = None
        self._touch(flow.path)
        return flow

    def cancel(self, flow: Flow) -> None:
        """Stop a flow (its sender died); its on_done is not called."""
        if not flow.done:
            self._update(flow, self.loop.now)
            self._remove(flow)

    def active(self, channel: Channel) -> int:
        link = self._links.get(channel)
        return 0 if link is None else len(link.flows)

    def settle_stats(self) -> None:
        """Bring every link's busy time up to now (a report reads them)."""
        now = self.loop.now
        for ch, link in self._links.items():
            self._account(ch, link, now)

    # --- inside --------------------------------------------------------------------------------

    def _touch(self, channels) -> None:
        for ch in channels:
            self._dirty[ch] = None
        if not self._settling:
            self._settling = True
            self.loop.at(self.loop.now, self._settle)

    def _remove(self, flow: Flow) -> None:
        flow.done = True
        flow.token += 1
        for ch in flow.path:
            self._links[ch].flows.pop(flow, None)
        self._touch(flow.path)

    @staticmethod
    def _update(flow: Flow, now: float) -> None:
        flow.remaining = max(0.0, flow.remaining - flow.rate * (now - flow.since) / 8)
        flow.since = now

    def _account(self, ch: Channel, link: _Link, now: float) -> None:
        share = link.allocated / link.base * (now - link.since)
        ch.stats.busy += share
        ch.stats.flow_busy += share
        link.since = now

    def _settle(self) -> None:
        """Max-min fair rates for every flow connected (through shared links) to what changed."""
        self._settling = False
        now = self.loop.now
        channels, flows, stack = {}, {}, list(self._dirty)
        self._dirty = {}
        while stack:
            ch = stack.pop()
            if ch in channels:
                continue
            channels[ch] = None
            for f in self._links[ch].flows:
                if f not in flows:
                    flows[f] = None
                    stack.extend(c for c in f.path if c not in channels)
        self.reallocations += 1
        for f in flows:
            self._update(f, now)
        flows_now = list(flows)
        rates = dict(zip(flows_now, max_min_rates([f.path for f in flows_now], [f.cap for f in flows_now],
                                                  {ch: self._links[ch].base for ch in channels})))
        for f in flows:
            rate = rates[f]
            if rate != f.rate or f.token == 0:
                f.rate = rate
                f.token += 1
                when = now + f.remaining * 8 / rate if rate > 0 else math.inf
                if when < math.inf:
                    self.loop.at(when, self._complete, f, f.token)
        for ch in channels:
            link = self._links[ch]
            self._account(ch, link, now)
            link.allocated = sum(f.rate for f in link.flows)
            if link.flows:
                ch.rate = max(link.base - link.allocated, self.floor * link.base)
            else:
                ch.rate = link.base
                del self._links[ch]

    def _complete(self, flow: Flow, token: int) -> None:
        if flow.done or token != flow.token:
            return
        self._update(flow, self.loop.now)
        flow.remaining = 0.0
        self._remove(flow)
        flow.on_done(flow)


def route(topology: Topology, channels: list[tuple[Channel, Channel]], src: str, dst: str) -> list[Channel]:
    """The link directions from host ``src`` to host ``dst`` (``Topology.route``), as the fabric's channels."""
    return [channels[index][direction] for index, direction in topology.route(src, dst)]
