"""A host's relay (``worker.relay``) in virtual time, and the in-process link between it and its own worker.

A frame that reaches a relay on a circuit waits ``rx_delay`` (the host's latency, wire to its loop) and the
loop's next look (``host_latency.reaches_loop``), as a worker's results do; the relay then sums it and its
outputs leave at once: onto a circuit's link, or to its own worker (port 0), which takes them in the same
loop (no wire, no second latency).  The worker's own contributions reach the relay the same way, in its loop.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from virtual_fabric.events import EventLoop
from virtual_fabric.host_latency import HOST_LATENCY, reaches_loop
from virtual_fabric.links import Channel
from worker.protocol import ETH_IP_UDP
from worker.relay import Output, Relay

OWN = 0  # the relay's port for its own worker


@dataclass(eq=False)
class SimRelay:
    """``relay`` at host ``name``: ``links[port]`` carries its frames out of a circuit port, ``headers[port]``
    are the ``ETH_IP_UDP`` bytes in front of each payload there (one neighbour a port); ``to_worker`` takes port 0's."""

    loop: EventLoop
    name: str
    relay: Relay
    links: Mapping[int, Channel]
    headers: Mapping[int, bytes]
    to_worker: Callable[[bytes], None]
    rx_delay: float = HOST_LATENCY
    on_result: Callable[[str, bytes], None] | None = None  # told of each payload to port 0 (a step trace)
    on_process: Callable[[str, bytes], None] | None = None  # told of each frame it takes into its loop (a trace)
    alive: bool = True
    passes: int = 0
    dropped: int = 0  # outputs to a port without a link
    _ports: dict[int, Callable[[bytes], None]] = field(default_factory=dict)

    def port(self, port: int) -> Callable[[bytes], None]:
        """What a circuit's link delivers to on this port: the frame reaches the relay's loop later."""
        if port not in self._ports:
            def arrive(frame: bytes) -> None:
                if self.alive:
                    self.loop.at(reaches_loop(self.loop.now + self.rx_delay), self.process, port, frame)
            self._ports[port] = arrive
        return self._ports[port]

    def from_worker(self, frame: bytes) -> None:
        """The worker's own contribution, in its loop."""
        if self.alive:
            self.process(OWN, frame)

    def process(self, port: int, frame: bytes) -> None:
        if not self.alive:
            return
        self.passes += 1
        if self.on_process is not None:
            self.on_process(self.name, frame)
        for out in self.relay.receive(port, frame[ETH_IP_UDP:]):
            self._send(out)

    def _send(self, out: Output) -> None:
        if out.port == OWN:
            if self.on_result is not None:
                self.on_result(self.name, out.payload)
            self.to_worker(self.headers[OWN] + out.payload)
            return
        link = self.links.get(out.port)
        if link is None:
            self.dropped += 1
        else:
            link.send(self.headers[out.port] + out.payload)


@dataclass(eq=False)
class InProcess:
    """A worker's uplink that is its own relay: no rate and no delay of its own (``SimWorker.uplink``); the room
    is that of the link the relay sends on towards its parent (``onward``), as a socket's send buffer is the
    interface's: a window let go at once would go on past the circuit's queue (1,024 frames of 1 kB against
    its 1 MB), and be lost there."""

    loop: EventLoop
    deliver: Callable[[bytes], None]
    onward: Channel | None = None

    def send(self, frame: bytes) -> bool:
        self.deliver(frame)
        return True

    def room(self, now: float) -> int:
        return 1 << 30 if self.onward is None else self.onward.room(now)

    def next_departure(self) -> float:
        return self.loop.now if self.onward is None else self.onward.next_departure()
