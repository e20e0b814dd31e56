"""Port up and down on the P4Runtime stream.

P4Runtime has no message for a port's operational state (Stratum reports it over gNMI), so the
built-in target sends it as the stream's ``other`` message: a ``google.protobuf.Struct``
``{"port_status": {"port": 3, "up": false, "interface": "s1-eth3"}}``, to every arbitrated client
when a port changes, and to a client when it arbitrates, for each port that is down then.  A
client that does not know the message ignores it, as P4Runtime lets it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

from google.protobuf import struct_pb2
from p4.v1 import p4runtime_pb2

KEY = "port_status"


def port_status_message(port: int, up: bool, interface: str) -> p4runtime_pb2.StreamMessageResponse:
    body = struct_pb2.Struct()
    body.update({KEY: {"port": port, "up": up, "interface": interface}})
    msg = p4runtime_pb2.StreamMessageResponse()
    msg.other.Pack(body)
    return msg


def is_up(interface: str) -> bool:
    """The kernel's operational state: a veth whose peer is down is down too; gone is down."""
    try:
        state = Path(f"/sys/class/net/{interface}/operstate").read_text().strip()
    except OSError:
        return False
    return state in ("up", "unknown")  # "unknown": interfaces without carrier reporting (tun, loopback)


def watch_ports(ports: dict[int, str], report: Callable[[int, bool, str], None], stop: threading.Event,
                period: float = 0.2) -> None:
    """Call ``report(port, up, interface)`` for every port at first, then on every change, until ``stop``."""
    state: dict[int, bool] = {}
    while True:
        for port, interface in ports.items():
            up = is_up(interface)
            if state.get(port) != up:
                state[port] = up
                report(port, up, interface)
        if stop.wait(period):
            return
