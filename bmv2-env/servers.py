"""Server hosts (issue 62, NTT's Optcast): a topology host with ``"server"`` aggregates, running ina.p4 itself.

A server is a Mininet host like any other (its namespace, interface, address, static neighbours), and in it
runs the built-in target, its P4Runtime on the host's management address (``<mgmt ip>:9559``), so the
controller in the root namespace provisions it as it provisions a switch: ``net.json`` holds its access.
How the target meets the host's traffic is ``server_launch``'s alone: today the host's interface is the
target's raw port 1, and the kernel is kept from the INA datagrams (UDP dropped at the interface's ingress,
after packet sockets have seen the frame, so the kernel neither spends time on them nor answers them with
ICMP port-unreachable: without it, in one 2 MB call of the Mininet test 4,334 reached no socket on a server).
When the target takes L3 UDP sockets (``--udp IP:PORT``), only that function changes.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from mininet.node import Host

from .hosts import run_checked
from .p4switch import switch_command, wait_answering
from .processes import stop_popen

SERVER_GRPC_PORT = 9559  # P4Runtime's registered port: each server has an address of its own
# Classic BPF in direct-action mode (no act_gact, which kernels like ours lack: links.py), run on an IPv4 frame
# from its Ethernet header: load the IP protocol byte, UDP is TC_ACT_SHOT, anything else TC_ACT_UNSPEC.
DROP_UDP = "4,48 0 0 23,21 0 1 17,6 0 0 2,6 0 0 4294967295"


@dataclass(frozen=True)
class Launch:
    """What starts a server in its host: the host's set-up commands, then the target's command line."""

    setup: list[str]
    argv: list[str]


def server_launch(interface: str, device_id: int, grpc_address: str) -> Launch:
    """The one place that says how a server host runs ina.p4: the built-in target with the host's interface as
    its port 1 (every child is on port 1), the kernel's UDP dropped at that interface's ingress."""
    drop_udp = [f"tc qdisc add dev {interface} ingress",
                f"tc filter add dev {interface} ingress protocol ip prio 1 bpf bytecode '{DROP_UDP}' da"]
    argv = [*switch_command("builtin"), "-i", f"1@{interface}", "--device-id", str(device_id), "--no-p4",
            "--", "--grpc-server-addr", grpc_address]
    return Launch(drop_udp, argv)


class ServerProcess:
    """A server host's target process, started in the host's namespace; ready once it answers P4Runtime."""

    def __init__(self, name: str, host: Host, interface: str, device_id: int, management_ip: str,
                 log_dir: Path) -> None:
        self.name = name
        self.host = host
        self.device_id = device_id
        self.grpc_address = f"{management_ip}:{SERVER_GRPC_PORT}"
        self.launch = server_launch(interface, device_id, self.grpc_address)
        self.log_path = Path(log_dir) / f"{name}.log"
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        """Set the host up and launch the target (not waited for: ``wait_ready``)."""
        for command in self.launch.setup:
            run_checked(self.host, command)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            log.write(f"=== {datetime.now().isoformat(timespec='seconds')} {' '.join(self.launch.argv)}\n".encode())
            log.flush()
            # Mininet's popen runs it by ``mnexec -da``: in the host's namespace and a session of its own (a
            # Ctrl-C meant for the CLI does not stop it behind our back); mnexec forks when already a leader.
            self.process = self.host.popen(self.launch.argv, stdin=subprocess.DEVNULL, stdout=log,
                                           stderr=subprocess.STDOUT)

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def wait_ready(self, timeout: float) -> None:
        """Poll P4Runtime on the management address; a process that dies or stays mute is an error with its log."""
        wait_answering(f"server {self.name}", self.process, self.grpc_address, self.log_path, timeout)

    def signal_stop(self) -> None:
        if self.running():
            self.process.terminate()

    def stop(self) -> None:
        if self.process is not None:
            stop_popen(self.process)
