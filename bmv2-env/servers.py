"""Server hosts (issue 62, NTT's Optcast): a topology host with ``"server"`` aggregates, running ina.p4 itself.

A server is a Mininet host like any other (its namespace, interface, address, static neighbours), and in it
runs the aggregation server process, its P4Runtime on the host's management address (``<mgmt ip>:9559``), so
the controller in the root namespace provisions it as it provisions a switch: ``net.json`` holds its access.
How the target meets the host's traffic is ``server_launch``'s alone: the server process on the host's own
address (``p4target-switch-grpc --udp <host ip>:<INA UDP port>``), so the host's kernel carries the datagrams
(its UDP stack, socket buffers, batched receive and send) as on a real spare server; nothing is set up on the
interface beyond what every host gets (``hosts.py``: TX checksum offload off, so the server's GSO sends, when
the kernel takes them, are cut into wire frames before the veth and a lossy link's filter sees each).
"""

from __future__ import annotations

import subprocess
from datetime import datetime
from pathlib import Path

from mininet.node import Host

from controller.programs import Program
from controller.topology import Host as TopologyHost
from worker import protocol

from .p4switch import switch_command, wait_answering
from .processes import stop_popen

SERVER_GRPC_PORT = 9559  # P4Runtime's registered port: each server has an address of its own
STEER_FIELD = "ina_t.job_id"  # what keeps a tree's lane on one server thread (docs/servers.md, "The server process")


def server_launch(host: TopologyHost, device_id: int, grpc_address: str, program: Program) -> list[str]:
    """The one place that says how a server host runs ina.p4: the server process on the host's address and the
    program's aggregation port (``INA_UDP_PORT``: ``ina-ctl setup --udp-port`` must leave it so), a socket and
    thread per core of the host's ``server.cores``, steered by job id when more than one.  It starts empty
    (``--no-p4``): the controller pushes the pipeline; the program file is read only for the steering field."""
    cores = host.server.cores if host.server else 1
    threads = ["--threads", str(cores), "--steer", STEER_FIELD, str(program.source)] if cores > 1 else []
    return [*switch_command("builtin"), "--udp", f"{host.ip.ip}:{protocol.load().INA_UDP_PORT}", *threads,
            "--device-id", str(device_id), "--no-p4", "--", "--grpc-server-addr", grpc_address]


def udp_counters(log_text: str) -> dict[str, int]:
    """The sockets' counters a server prints when it stops (``p4target-switch-grpc: udp rx_datagrams=...``): the
    last such line of its log, or nothing if it has not stopped cleanly."""
    lines = [line.split(": udp ", 1)[1] for line in log_text.splitlines() if ": udp " in line]
    return {k: int(v) for k, v in (kv.split("=", 1) for kv in lines[-1].split())} if lines else {}


class ServerProcess:
    """A server host's target process, started in the host's namespace; ready once it answers P4Runtime."""

    def __init__(self, name: str, host: Host, spec: TopologyHost, device_id: int, management_ip: str,
                 program: Program, log_dir: Path) -> None:
        self.name = name
        self.host = host
        self.device_id = device_id
        self.grpc_address = f"{management_ip}:{SERVER_GRPC_PORT}"
        self.argv = server_launch(spec, device_id, self.grpc_address, program)
        self.log_path = Path(log_dir) / f"{name}.log"
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        """Launch the server process in the host (not waited for: ``wait_ready``)."""
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            log.write(f"=== {datetime.now().isoformat(timespec='seconds')} {' '.join(self.argv)}\n".encode())
            log.flush()
            # Mininet's popen runs it by ``mnexec -da``: in the host's namespace and a session of its own (a
            # Ctrl-C meant for the CLI does not stop it behind our back); mnexec forks when already a leader.
            self.process = self.host.popen(self.argv, stdin=subprocess.DEVNULL, stdout=log,
                                           stderr=subprocess.STDOUT)

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def wait_ready(self, timeout: float) -> None:
        """Poll P4Runtime on the management address; a process that dies or stays mute is an error with its log."""
        wait_answering(f"server {self.name}", self.process, self.grpc_address, self.log_path, timeout)

    def udp_counters(self) -> dict[str, int]:
        """What its sockets counted, once it has stopped (``udp_counters``)."""
        return udp_counters(self.log_path.read_text(errors="replace"))

    def signal_stop(self) -> None:
        if self.running():
            self.process.terminate()

    def stop(self) -> None:
        if self.process is not None:
            stop_popen(self.process)
