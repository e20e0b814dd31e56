"""A simulated switch: the built-in target's P4Runtime server and pipeline, fed frames in virtual time.

The server is the real one (``p4target.runtime.service``): the controller reaches it through
``LocalSwitchClient`` and pushes the real program, which runs on the native pipeline, one
image per program and registers and tables per switch.  A frame is one pipeline pass; its
outputs go onto the port's link at once (the switch's queues are its egress links').  A killed
switch drops everything and its connections fail; a restarted one comes back empty, with no
pipeline, as a restarted process does.

A switch that declares an aggregation rate (the topology's ``agg_pps``: contributions summed per
second, a Tofino's aggregation engine below its ports' line rate, or a switch shared by tenants)
takes contributions (ina frames of type MSG_DATA) one at a time at that rate, in arrival order;
each leaves the pipeline when its turn ends.  Everything else (results, routed traffic) is
forwarded at once.  At most ``AGG_QUEUE`` seconds of contributions wait; more are dropped at the
tail and counted in ``agg_dropped``, as a full ingress buffer drops them.

An aggregation server (issue 62: a host running ina.p4 on its CPU) is such a device with one port at its
host's end of its link and ``cores`` engines, each at ``agg_pps`` (its per-core rate): a contribution
waits for the engine of its tree's core, ``job_id mod cores``, as the server steers a lane's job id
to one thread, and up to ``SERVER_QUEUE`` of them wait (a socket buffer, not a switch's SRAM).

Every process of the switch runs in the fabric's time: its pipeline's meters read the loop's
clock, its digest timers are the loop's events (no threads), and its ``random`` extern draws
from the switch's own stream of the run's seed (``rng``, kept across restarts and reseeded in
place by the fabric), through the target's ``Environment``.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

from p4target.dataplane import Dataplane
from p4target.runtime.device_config import DeviceConfigCache
from p4target.runtime.environment import Environment
from p4target.runtime.service import P4RuntimeServer
from virtual_fabric.events import EventLoop
from virtual_fabric.links import Channel
from worker.protocol import ETH_IP_UDP, Protocol

AGG_QUEUE = 1e-3  # seconds of contributions an aggregation-limited switch holds before it drops
# ...and a server core: its socket's receive buffer (4 MB, as the worker sets SO_RCVBUF) of 1,082-byte frames at
# 300,000 a second holds about 12 ms; 10 ms is kept
SERVER_QUEUE = 10e-3


@dataclass(eq=False)
class SimSwitch:
    name: str
    device_id: int
    compile: DeviceConfigCache
    ports: dict[int, Channel] = field(default_factory=dict)  # egress links by port
    interfaces: dict[int, str] = field(default_factory=dict)  # port: name, as port status reports it
    passes: int = 0  # frames run through the pipeline
    dropped: int = 0  # frames that met a dead switch, no pipeline, or no output port
    server: P4RuntimeServer | None = None
    agg_pps: float | None = None  # contributions summed per second; None: as fast as they come
    loop: EventLoop | None = None  # needed with agg_pps; without one the pipeline reads the machine's clock
    rng: random.Random = field(default_factory=lambda: random.Random(0))  # the random extern's stream
    protocol: Protocol | None = None  # how to tell a contribution; needed with agg_pps
    cores: int = 1  # aggregation engines, each at agg_pps (a server's cores; a switch has one)
    agg_queue: float = AGG_QUEUE  # seconds of contributions an engine holds before it drops
    agg_free: list[float] = field(default_factory=list)  # per engine: when it takes its next contribution
    agg_busy: float = 0.0  # seconds it spent summing
    agg_waited: float = 0.0  # seconds contributions waited for it, summed
    agg_dropped: int = 0
    on_port_status: Callable[[], None] | None = None  # told after the server publishes a port's change

    def __post_init__(self) -> None:
        P = self.protocol
        self.contribution = (P.INA_UDP_PORT, ETH_IP_UDP + P.field_bytes("msg_type")[0], P.MSG_DATA) if P else None
        self.job_id_at = (ETH_IP_UDP + P.field_bytes("job_id")[0], P.field_bytes("job_id")[1]) if P else None
        self.boot()

    @property
    def up(self) -> bool:
        return self.server is not None and self.server.running

    def boot(self) -> None:
        """A fresh process: no pipeline, no state.  A running one is killed first (one process per
        switch: a controller connected to the old one must see it go)."""
        self.kill()
        self.server = P4RuntimeServer(Dataplane([]), self.device_id, compile=self.compile,
                                      environment=self.environment())

    def environment(self) -> Environment:
        """The pipeline's clock, timers and randomness: the loop's and the switch's stream."""
        if self.loop is None:
            return Environment(rng=self.rng)
        return Environment(clock=self.loop.clock, timer=self.loop.timer, rng=self.rng)

    def kill(self) -> None:
        self.agg_free = [0.0] * self.cores  # what waited is lost with the process (its turns find no pipeline)
        if self.server is not None:
            self.server.stop()
        self.server = None

    def port_status(self, port: int, up: bool) -> None:
        """A port's carrier changed: the server tells its controller, as the built-in target does."""
        if self.up:
            self.server.port_status(port, up, self.interfaces.get(port, f"{self.name}-p{port}"))
            if self.on_port_status is not None:
                self.on_port_status()

    def receive(self, port: int, frame: bytes) -> None:
        if self.agg_pps and self.up and self._is_contribution(frame):
            now, turn, core = self.loop.now, 1.0 / self.agg_pps, self._core(frame)
            start = max(now, self.agg_free[core])
            if start - now > self.agg_queue:
                self.agg_dropped += 1
                return
            self.agg_free[core] = start + turn
            self.agg_busy += turn
            self.agg_waited += start - now
            self.loop.at(start + turn, self.process, port, frame)
            return
        self.process(port, frame)

    def _is_contribution(self, frame: bytes) -> bool:
        udp_port, at, data = self.contribution
        return len(frame) > at and frame[at] == data and int.from_bytes(frame[36:38], "big") == udp_port

    def _core(self, frame: bytes) -> int:
        """The engine a contribution waits for: its tree's (job id) core."""
        if self.cores == 1:
            return 0
        at, width = self.job_id_at
        return int.from_bytes(frame[at:at + width], "big") % self.cores

    def process(self, port: int, frame: bytes) -> None:
        """One pipeline pass, its outputs onto their links."""
        server = self.server
        switch = server.dataplane.switch if server is not None and server.running else None
        if switch is None:
            self.dropped += 1
            return
        self.passes += 1
        # the native pipeline's own entry (one thread here: Switch.process's lock guards against gRPC's)
        native = switch.native
        for out in (native.process if native is not None else switch.process)(port, frame):
            link = self.ports.get(out.port)
            if link is None:
                self.dropped += 1
            else:
                link.send(out.data)

    def registers(self) -> dict[str, object]:
        """The running pipeline's registers by name (empty without one)."""
        switch = self.server.dataplane.switch if self.up else None
        return {} if switch is None else dict(switch.registers)
