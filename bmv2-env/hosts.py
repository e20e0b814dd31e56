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

A machine with several NICs (``machines.py``) gets the same on each NIC's interface, and routes that keep
each NIC's traffic on its own link.
"""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path
from typing import Any

from mininet.node import Host, Node

from controller.topology import Topology
from p4target import netns


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


# --- the management network: every host's second interface, bridged into the root namespace -------
#
# The data path (10.x through the P4 switches) carries aggregation and gloo; a service that runs in
# the root namespace (``ina-ctl serve``, torchrun's rendezvous on a host) needs an ordinary IP
# network beside it, as a cluster's management network is.  One Linux bridge in the root
# namespace holds the root's address and one veth per host; the host end sits in the host's
# namespace.  Nothing is routed between the two networks.

MANAGEMENT_BRIDGE = "inamgmt0"
MANAGEMENT_NETWORK = ipaddress.IPv4Network("172.31.0.0/16")
MANAGEMENT_ADDRESS = ipaddress.IPv4Interface("172.31.255.254/16")  # the root namespace's, on the bridge


def management_interfaces(host: str) -> tuple[str, str]:
    """(root end, host end) of a host's management veth: ``h1-mgr`` on the bridge, ``h1-mgmt`` in h1.  A
    machine with several NICs (``machines.py``) has one, named after the machine: ``n1-mgr``, ``n1-mgmt``."""
    return f"{host}-mgr", f"{host}-mgmt"


def management_ip(topology: Topology, host: str) -> ipaddress.IPv4Interface:
    """Machine number n (its position among ``Topology.nodes``, from 1; a host without ``node`` is a machine of
    its own, so a file without machines numbers its hosts) gets 172.31.0.0 + n: any number fits.  ``host`` is a
    machine or a topology host (a NIC: its machine's address)."""
    machines = list(topology.nodes)
    machine = host if host in topology.nodes else topology.hosts[host].node if host in topology.hosts else None
    if machine not in topology.nodes:
        raise HostSetupError(f"no host or machine {host!r} in the topology")
    n = machines.index(machine) + 1
    address = MANAGEMENT_NETWORK.network_address + n
    if address >= MANAGEMENT_ADDRESS.ip:
        raise HostSetupError(f"{host}: the management network {MANAGEMENT_NETWORK} has no address for host {n}")
    return ipaddress.IPv4Interface(f"{address}/{MANAGEMENT_NETWORK.prefixlen}")


def bridge_ports(bridge: str = MANAGEMENT_BRIDGE) -> list[str]:
    """The links enslaved to ``bridge`` in the root namespace (none when it does not exist)."""
    ports = Path("/sys/class/net", bridge, "brif")
    return sorted(p.name for p in ports.iterdir()) if ports.is_dir() else []


def add_management_bridge(bridge: str = MANAGEMENT_BRIDGE) -> None:
    """The bridge with the root's address; IPv6 off, so it stays as quiet as the data links."""
    netns.ip("link", "add", bridge, "type", "bridge")
    netns.disable_ipv6(bridge)
    netns.ip("address", "add", str(MANAGEMENT_ADDRESS), "dev", bridge)
    netns.link_up(bridge)


def add_management_link(host: Host, topology: Topology, bridge: str = MANAGEMENT_BRIDGE) -> None:
    """The host's veth, its far end created inside the host's namespace (never a stray end in the root's)."""
    root_end, host_end = management_interfaces(host.name)
    netns.ip("link", "add", root_end, "type", "veth", "peer", "name", host_end, "netns", str(host.pid))
    netns.disable_ipv6(root_end)
    netns.ip("link", "set", root_end, "master", bridge, "up")
    run_checked(host, f"ip address add {management_ip(topology, host.name)} dev {host_end} && "
                      f"ip link set {host_end} up")
