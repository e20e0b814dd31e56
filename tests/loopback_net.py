"""A one-switch network on the loopback interface, for worker tests that need no root.

The switch is the real ina.p4 on the built-in target, set up by the real controller over
real gRPC; workers use real UDP sockets on 127.0.1.x.  Only the wire is different: a UDP
socket at the switch's address turns each datagram into the Ethernet/IPv4/UDP frame a host
would have sent on its switch port, runs it through the pipeline, and sends every frame the
switch emits to its IPv4/UDP destination.  The wire can lose, duplicate and reorder frames
(seeded), in each direction, to test the protocol under exactly those faults.

``LoopbackSwitch`` is the switch and its wire alone, for a controller made elsewhere (a direct-connect
cluster's devices, set up by ``controller.direct_jobs``); ``LoopbackNet`` adds the controller.  Switches of
one topology, each a LoopbackSwitch, reach each other the same way: a frame to a neighbour switch's address
goes to its wire, which takes it in on the port the link arrives at.
"""

from __future__ import annotations

import random
import select
import socket
import struct
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from controller.controller import Controller
from controller.network import Network, SwitchAccess
from controller.pipeline import PipelineOptions
from controller.topology import Topology
from p4target.dataplane import Dataplane
from p4target.runtime.service import P4RuntimeServer, serve
from tests.conftest import free_port
from worker import protocol
from worker.jobspec import JobSpec

SWITCH_IP = "127.0.0.254"


def topology(workers: int, host_ips: Sequence[str] | None = None, switch_ip: str = SWITCH_IP) -> Topology:
    """h1..hN on ``host_ips`` (default 127.0.1.1..N), each on its own port of s1 at ``switch_ip``."""
    ips = list(host_ips) if host_ips is not None else [f"127.0.1.{i}" for i in range(1, workers + 1)]
    if len(ips) != workers:
        raise ValueError(f"{len(ips)} host addresses for {workers} workers")
    hosts = {f"h{i}": {"ip": f"{ips[i - 1]}/8", "mac": f"02:00:00:00:00:{i:02x}"} for i in range(1, workers + 1)}
    return Topology.from_dict({"hosts": hosts, "switches": {"s1": {"ip": switch_ip}},
                               "links": [[f"h{i}", f"s1-p{i}"] for i in range(1, workers + 1)]})


class Faults:
    """Per-frame fault probabilities of the wire, applied independently in both directions."""

    def __init__(self, loss: float = 0.0, duplicate: float = 0.0, reorder: float = 0.0, seed: int = 1) -> None:
        self.loss, self.duplicate, self.reorder = loss, duplicate, reorder
        self.rng = random.Random(seed)
        self.held: dict[str, list[tuple[bytes, object]]] = {"up": [], "down": []}
        self.counts = {"lost": 0, "duplicated": 0, "reordered": 0}

    def apply(self, direction: str, data: bytes, where: object) -> list[tuple[bytes, object]]:
        """What travels now in this direction: nothing, the frame, two copies, and frames held back."""
        if self.rng.random() < self.loss:
            self.counts["lost"] += 1
            return []
        out = [(data, where)]
        if self.rng.random() < self.duplicate:
            self.counts["duplicated"] += 1
            out.append((data, where))
        if self.rng.random() < self.reorder:  # overtaken by the next frame that goes through
            self.counts["reordered"] += 1
            self.held[direction] += out
            return []
        out += self.held[direction]
        self.held[direction] = []
        return out


class LoopbackSwitch:
    """One switch of ``topology`` on loopback, with no controller: a built-in-target P4Runtime server at
    ``grpc_address`` (default: a free port), empty until whoever has its address sets it up over gRPC, and
    its wire, a UDP socket at the switch's address (the hosts attached to it are the ones it takes frames
    from).  ``udp_port``: the aggregation port the wire listens on (default: the protocol's)."""

    def __init__(self, topology: Topology, name: str = "s1", faults: Faults | None = None, *,
                 grpc_address: str | None = None, udp_port: int | None = None, device_id: int = 1) -> None:
        if faults is not None and any(faults.held.values()):
            raise ValueError("faults holds frames of another wire: a Faults is one wire's state, make a new one")
        self.name, self.device_id = name, device_id
        self.switch_ip = str(topology.switches[name].ip)
        self.switch_mac = bytes.fromhex(topology.switches[name].mac.replace(":", ""))
        self.faults = faults or Faults()
        self.grpc_address = grpc_address or f"127.0.0.1:{free_port()}"
        self.service = P4RuntimeServer(Dataplane([]), device_id=device_id)
        self.server = serve(self.service, self.grpc_address)
        self._switch_lock = threading.Lock()  # a restart never cuts a frame's way through the switch
        attached = [h for h in topology.hosts.values() if topology.attachment[h.name][0] == name]
        self.port_of = {str(h.ip.ip): topology.attachment[h.name][1] for h in attached}
        self.mac_of = {str(h.ip.ip): bytes.fromhex(h.mac.replace(":", "")) for h in attached}
        for n in topology.switch_neighbours(name):  # another LoopbackSwitch's wire sends from its switch's address
            other = topology.switches[n.node]
            self.port_of[str(other.ip)] = n.port
            self.mac_of[str(other.ip)] = bytes.fromhex(other.mac.replace(":", ""))
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
        self.sock.bind((self.switch_ip, udp_port if udp_port is not None else protocol.load().INA_UDP_PORT))
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True, name=f"loopback-wire-{name}")
        self._thread.start()

    def restart(self) -> None:
        """The switch dies and comes back on the same address empty: no pipeline, no entries, no
        registers; frames sent meanwhile are lost."""
        with self._switch_lock:
            self.server.stop(None).wait()
            self.service = P4RuntimeServer(Dataplane([]), device_id=self.device_id)
            for attempt in range(50):
                try:
                    self.server = serve(self.service, self.grpc_address)
                    break
                except RuntimeError:
                    if attempt == 49:
                        raise
                    time.sleep(0.1)

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.sock.close()
        self.server.stop(None)

    def __enter__(self) -> LoopbackSwitch:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def _serve(self) -> None:
        dst = socket.inet_aton(self.switch_ip)
        while not self._stop.is_set():
            if not select.select([self.sock], [], [], 0.05)[0]:
                continue
            payload, (ip, sport) = self.sock.recvfrom(65536)
            if ip not in self.port_of:
                continue
            ip_header = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 28 + len(payload), 0, 0, 64, 17, 0,
                                    socket.inet_aton(ip), dst)
            frame = self.switch_mac + self.mac_of[ip] + b"\x08\x00" + ip_header + \
                struct.pack("!HHHH", sport, self.sock.getsockname()[1], 8 + len(payload), 0) + payload
            for data, port in self.faults.apply("up", frame, self.port_of[ip]):
                self._through_switch(port, data)

    def _through_switch(self, port: int, frame: bytes) -> None:
        with self._switch_lock:
            pipeline = self.service.pipeline
            out = [] if pipeline is None else list(pipeline.switch.process(port, frame))  # no program yet: lost
        for _, data in out:
            dst_ip, dst_port = socket.inet_ntoa(data[30:34]), struct.unpack("!H", data[36:38])[0]
            for payload, where in self.faults.apply("down", data[42:], (dst_ip, dst_port)):
                self.sock.sendto(payload, where)


class LoopbackNet:
    """``with LoopbackNet(3) as net: spec = net.job(pool_size=16)``; workers then use ``spec``.

    ``host_ips`` and ``switch_ip`` put the hosts and the switch elsewhere on loopback, so that several
    networks (one per aggregation device of a direct-connect plan) run side by side."""

    def __init__(self, workers: int, state_dir: Path, faults: Faults | None = None, *,
                 host_ips: Sequence[str] | None = None, switch_ip: str = SWITCH_IP) -> None:
        self.switch_ip = switch_ip
        self.topology = topology(workers, host_ips, switch_ip)
        self.switch = LoopbackSwitch(self.topology, "s1", faults)
        self.grpc_address = self.switch.grpc_address
        network = Network(self.topology, {"s1": SwitchAccess(self.grpc_address, 1, "builtin")})
        # V = 64 (not the default 256): the tests size their calls and bounds in chunks of 64
        self.controller = Controller(network, state_dir / "state.json", PipelineOptions(values=64))
        self.controller.setup()

    @property
    def faults(self) -> Faults:
        """The wire's faults; a test may put others in place while the network runs."""
        return self.switch.faults

    @faults.setter
    def faults(self, faults: Faults) -> None:
        self.switch.faults = faults

    def job(self, name: str = "job", pool_size: int = 16, mode: str = "ina") -> JobSpec:
        """A job of every host of the network, through the switch unless ``mode`` says otherwise."""
        return self.controller.create_job(name, sorted(self.topology.hosts), pool_size, mode=mode)

    def spec_file(self, name: str = "job") -> Path:
        """Where the controller wrote the job's spec (and writes it again)."""
        assert self.controller.spec_dir is not None
        return self.controller.spec_dir / f"{name}.json"

    def restart_switch(self) -> None:
        """The switch dies and comes back on the same address empty (``LoopbackSwitch.restart``):
        ``controller.check_switches()`` provisions it again."""
        self.switch.restart()

    def close(self) -> None:
        self.controller.close()
        self.switch.close()

    def __enter__(self) -> LoopbackNet:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()
