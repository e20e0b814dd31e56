"""A Mininet switch that runs a P4Runtime switch process: ours or BMv2's.

``p4target-switch-grpc`` (the built-in target) and ``simple_switch_grpc`` take the same
command line, so one class starts either::

    p4target-switch-grpc -i 1@s1-eth1 -i 2@s1-eth2 --device-id 1 --no-p4 \\
        -- --grpc-server-addr 127.0.0.1:50001

The switch starts empty (``--no-p4``): the controller pushes the pipeline.  One whose program no controller
pushes yet (a direct-connect cluster's streaming NIC, ``direct.py``) is given it on the command line instead.
It runs in the root network namespace, where its ``sX-ethN`` interfaces are; port N is the interface
``sX-ethN``, so the topology file's ``"s1-p3"`` is ``s1-eth3``.  Its output goes to
``<log_dir>/<name>.log``.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import grpc
from mininet.node import Switch
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

from p4target.netns import disable_ipv6

from .processes import stop_popen

TARGETS = ("auto", "builtin", "bmv2")
BUILTIN_COMMAND = "p4target-switch-grpc"
BMV2_COMMAND = "simple_switch_grpc"
_POLL = 0.05  # seconds between readiness probes
_LOG_TAIL = 2000  # characters of a failed switch's log quoted in the error


class SwitchStartError(RuntimeError):
    """A switch process that could not be started or never answered P4Runtime."""


def resolve_target(target: str) -> str:
    """``auto`` is BMv2 when ``simple_switch_grpc`` is installed, else the built-in target."""
    if target not in TARGETS:
        raise ValueError(f"target {target!r}: choose one of {TARGETS}")
    if target == "auto":
        return "bmv2" if shutil.which(BMV2_COMMAND) else "builtin"
    return target


def switch_command(target: str) -> list[str]:
    """The program (and leading arguments) that runs a switch of this target."""
    if target == "bmv2":
        path = shutil.which(BMV2_COMMAND)
        if path is None:
            raise SwitchStartError(f"{BMV2_COMMAND} is not on PATH; use the built-in target instead")
        return [path]
    # Our console script, else the one installed next to this interpreter (a venv that is not
    # on PATH), else the module itself: the built-in target is always there.
    path = shutil.which(BUILTIN_COMMAND) or shutil.which(BUILTIN_COMMAND, path=str(Path(sys.executable).parent))
    return [path] if path else [sys.executable, "-m", "p4target.switch_grpc"]


def port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    """Whether nothing listens on (or holds) this TCP port: a bind without SO_REUSEADDR succeeds."""
    with socket.socket() as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def p4runtime_answers(address: str, timeout: float) -> bool:
    """Whether a P4Runtime server answers a Capabilities request at ``address`` (any answer counts)."""
    host, _, port = address.rpartition(":")
    with socket.socket() as s:  # cheap first: gRPC's reconnect backoff would slow the polling
        s.settimeout(timeout)
        if s.connect_ex((host, int(port))) != 0:
            return False
    with grpc.insecure_channel(address) as channel:
        try:
            p4runtime_pb2_grpc.P4RuntimeStub(channel).Capabilities(p4runtime_pb2.CapabilitiesRequest(),
                                                                   timeout=timeout)
        except grpc.RpcError as e:
            # An older server without Capabilities still proves the server is up.
            return e.code() == grpc.StatusCode.UNIMPLEMENTED
    return True


def log_tail(path: Path) -> str:
    """The end of a switch process's log, for an error that says why it did not start."""
    try:
        return path.read_text(errors="replace")[-_LOG_TAIL:]
    except OSError as e:
        return f"(no log: {e})"


def wait_answering(name: str, process: subprocess.Popen | None, address: str, log_path: Path, timeout: float,
                   ours: Callable[[], bool] = lambda: True) -> None:
    """Poll until ``process`` answers P4Runtime at ``address`` (``ours``: the listener is that process, not another
    run's); raise SwitchStartError, with its log, if it dies or stays mute for ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        if process is None or process.poll() is not None:
            code = None if process is None else process.returncode
            raise SwitchStartError(f"{name} exited (code {code}) before answering P4Runtime on {address}; "
                                   f"{log_path}:\n{log_tail(log_path)}")
        if ours() and p4runtime_answers(address, timeout=max(0.05, min(1.0, deadline - time.monotonic()))):
            return
        if time.monotonic() > deadline:
            raise SwitchStartError(f"{name} did not answer P4Runtime on {address} within {timeout:.0f}s; "
                                   f"{log_path}:\n{log_tail(log_path)}")
        time.sleep(_POLL)


class P4Switch(Switch):
    """A P4Runtime switch process attached to this node's interfaces (Mininet's Switch contract)."""

    def __init__(self, name: str, grpc_port: int, device_id: int, log_dir: str | Path, target: str = "auto",
                 log_level: str | None = None, cpu_port: int | None = None, thrift_port: int | None = None,
                 program: str | Path | None = None, **params: Any) -> None:
        params["inNamespace"] = False  # the switch opens its sX-ethN interfaces in the root namespace
        params.setdefault("dpid", f"{device_id:x}")  # any switch name, not only "s<digits>"
        super().__init__(name, **params)
        self.target = resolve_target(target)
        self.grpc_port = grpc_port
        self.device_id = device_id
        self.log_path = Path(log_dir) / f"{name}.log"
        self.log_level = log_level
        self.cpu_port = cpu_port
        self.thrift_port = thrift_port
        self.program = program  # loaded at start when given (no controller pushes it); else --no-p4
        self.process: subprocess.Popen | None = None

    @property
    def grpc_address(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    def addIntf(self, intf: Any, port: int | None = None, **kwargs: Any) -> None:
        """Turn IPv6 off before the interface goes up, so the kernel sends nothing on it (no RS, MLD, DAD)."""
        super().addIntf(intf, port=port, **kwargs)
        if intf.name != "lo":
            disable_ipv6(intf.name)

    def data_ports(self) -> list[tuple[int, str]]:
        """(port number, interface) for each data port, in port order."""
        return sorted((port, intf.name) for port, intf in self.intfs.items() if intf.name != "lo")

    def command(self) -> list[str]:
        argv = switch_command(self.target)
        for port, iface in self.data_ports():
            argv += ["-i", f"{port}@{iface}"]
        argv += ["--device-id", str(self.device_id)]
        argv += [str(self.program)] if self.program is not None else ["--no-p4"]
        if self.thrift_port is not None:
            argv += ["--thrift-port", str(self.thrift_port)]  # BMv2 would take 9090 for every switch
        if self.log_level is not None:
            argv += ["--log-console", "-L", self.log_level]
        argv += ["--", "--grpc-server-addr", self.grpc_address]
        if self.cpu_port is not None:
            argv += ["--cpu-port", str(self.cpu_port)]
        return argv

    def start(self, controllers: list) -> None:
        """Launch the switch process and return at once; ``wait_ready`` waits for P4Runtime."""
        if self.process is not None and self.process.poll() is None:
            raise SwitchStartError(f"{self.name} is already running (pid {self.process.pid})")
        argv = self.command()
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            log.write(f"=== {datetime.now().isoformat(timespec='seconds')} {' '.join(argv)}\n".encode())
            log.flush()
            # Own session: a Ctrl-C meant for the CLI does not kill the switches behind our back.
            self.process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                            start_new_session=True)

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def connected(self) -> bool:
        """Mininet's readiness question: the process runs and answers P4Runtime."""
        return self.running() and p4runtime_answers(self.grpc_address, timeout=0.5)

    def wait_ready(self, timeout: float) -> None:
        """Poll until the switch answers P4Runtime; raise SwitchStartError (with its log) if it dies or stays mute."""
        wait_answering(self.name, self.process, self.grpc_address, self.log_path, timeout, self._listens)

    def _listens(self) -> bool:
        """Whether our own process holds the listening socket (another run's switch may answer the port)."""
        port = int(self.grpc_address.rsplit(":", 1)[1])
        out = subprocess.run(["ss", "-Htlnp", f"sport = :{port}"], capture_output=True, text=True).stdout
        return f"pid={self.process.pid}," in out

    def log_tail(self) -> str:
        return log_tail(self.log_path)

    def signal_stop(self) -> None:
        """Send SIGTERM without waiting, so that many switches stop in parallel."""
        if self.running():
            self.process.terminate()

    def stop_process(self) -> None:
        """SIGTERM, then SIGKILL after a timeout."""
        if self.process is not None:
            stop_popen(self.process)

    def stop(self, deleteIntfs: bool = True) -> None:
        self.stop_process()
        super().stop(deleteIntfs)
