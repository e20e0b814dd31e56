"""Hosts as the aggregation workers need them: IPv4 only, static neighbours, full checksums.

A P4 switch answers no ARP and forwards UDP as it is, so each host gets

* IPv6 off in its namespace before any link exists (no router solicitations, MLD, DAD noise),
* static ARP entries for every other host and every switch address (workers send
  aggregation packets to their switch's IP and MAC),
* a default route via its switch (for addresses outside its subnet),
* TX checksum offload off (``ethtool -K <if> tx off``): otherwise the kernel leaves UDP
  checksums partial on veth and the switch would forward them unfinished.  Segmentation
  offload goes with it, so the kernel cuts a worker's UDP GSO sends into wire-size frames
  before the veth (a veth would pass the whole buffer on as one frame: tests/test_batch_io.py).
"""

from __future__ import annotations

import os
from typing import Any

from mininet.node import Host, Node

from controller.topology import Topology


class HostSetupError(RuntimeError):
    """A command that configures a host failed."""


def run_checked(node: Node, command: str) -> str:
    """Run ``command`` in the node's shell; raise HostSetupError with its output if it fails."""
    output = node.cmd(f"{command}; echo __exit=$?")
    text, _, code = output.rpartition("__exit=")
    if code.strip() != "0":
        raise HostSetupError(f"{node.name}: `{command}` failed ({code.strip()}): {text.strip()}")
    return text


class InaHost(Host):
    """A Mininet host whose namespace has IPv6 off from the start, so its links never speak IPv6."""

    def __init__(self, name: str, **params: Any) -> None:
        super().__init__(name, **params)
        if os.path.exists("/proc/sys/net/ipv6"):
            run_checked(self, "sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1")


def neighbour_commands(topology: Topology, host: str, iface: str) -> list[str]:
    """The commands that make ``host`` ready to talk through P4 switches (see the module docstring)."""
    switch, _ = topology.attachment[host]
    commands = [f"ethtool -K {iface} tx off"]
    for other in topology.hosts.values():
        if other.name != host:
            commands.append(f"ip neigh replace {other.ip.ip} lladdr {other.mac} dev {iface} nud permanent")
    for sw in topology.switches.values():
        commands.append(f"ip neigh replace {sw.ip} lladdr {sw.mac} dev {iface} nud permanent")
    commands.append(f"ip route replace default via {topology.switches[switch].ip} dev {iface} onlink")
    return commands


def configure_host(host: Host, topology: Topology) -> None:
    iface = host.defaultIntf().name
    for command in neighbour_commands(topology, host.name, iface):
        run_checked(host, command)
