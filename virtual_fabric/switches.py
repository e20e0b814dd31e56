"""A simulated switch: the built-in target's P4Runtime server and pipeline, fed frames in virtual time.

The server is the real one (``p4target.runtime.service``): the controller reaches it through
``LocalSwitchClient`` and pushes the real program, which runs on the native pipeline, one
image per program and registers and tables per switch.  A frame is one pipeline pass; its
outputs go onto the port's link at once (the switch's queues are its egress links').  A killed
switch drops everything and its connections fail; a restarted one comes back empty, with no
pipeline, as a restarted process does.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from p4target.dataplane import Dataplane
from p4target.runtime.device_config import DeviceConfigCache
from p4target.runtime.service import P4RuntimeServer
from virtual_fabric.links import Channel


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

    def __post_init__(self) -> None:
        self.boot()

    @property
    def up(self) -> bool:
        return self.server is not None and self.server.running

    def boot(self) -> None:
        """A fresh process: no pipeline, no state.  A running one is killed first (one process per
        switch: a controller connected to the old one must see it go)."""
        self.kill()
        self.server = P4RuntimeServer(Dataplane([]), self.device_id, compile=self.compile)

    def kill(self) -> None:
        if self.server is not None:
            self.server.stop()
        self.server = None

    def port_status(self, port: int, up: bool) -> None:
        """A port's carrier changed: the server tells its controller, as the built-in target does."""
        if self.up:
            self.server.port_status(port, up, self.interfaces.get(port, f"{self.name}-p{port}"))

    def receive(self, port: int, frame: bytes) -> None:
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
